package filters

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/companion"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/timefmt"
	"github.com/bttl/bttl/strategy"
)

// Visibility says whether a read through bttl returns a stored cell, and
// if not, what hides it.
type Visibility string

// The visibilities Explain gives, one per stored cell.
const (
	// Returned: a read through bttl returns the cell.
	Returned Visibility = "returned"
	// Expired: the cell is past its expiry instant; a complete GC would
	// have removed it, so no read returns it.
	Expired Visibility = "expired"
	// ExcessVersion: the cell is live but older than the newest N live
	// cells of its column that the family keeps (Sequence(N),
	// WithMaxVersions(N)).
	ExcessVersion Visibility = "excess-version"
	// Companion: the cell is a write-time companion (strategy.WithWriteTime),
	// bttl's record of another cell's write time, never data: qualifier
	// strategy.WriteTimeColumn(c) with a cell of column c at the same
	// timestamp in the row (its value is not checked). The one definition,
	// which audit and provision's adoption scan use too.
	Companion Visibility = "companion"
	// Reserved: a qualifier from 0xFF 0xFF on in a family with write times
	// that is not a companion, an orphaned one (no cell of its column at
	// its timestamp) included; reads hide the reserved range whole, and
	// audit counts these as hidden reserved cells.
	Reserved Visibility = "reserved"
)

// CellReport is what Explain says of one stored cell.
type CellReport struct {
	Family    string             // the cell's column family
	Column    string             // its qualifier
	Timestamp bigtable.Timestamp // as stored, in microseconds
	Value     []byte

	// Strategy is the family's policy as the schema declares it
	// (strategy.Policy.String); "unmanaged" for an unmanaged family and for
	// one the schema does not name (Listed false), both read untouched.
	Strategy string
	Listed   bool // the schema names the family

	Visibility Visibility
	// Reason says why, in words: for a hidden cell what hides it, for a
	// returned one anything worth knowing (a read refreshes it, a real
	// timestamp in a sequence family).
	Reason string

	// Expiry is the instant the cell stops being live (age strategies;
	// zero otherwise), exact for every timestamp, years past 9999
	// included, and Remaining the time from the explained instant to it
	// (negative once expired), saturated at the largest (smallest)
	// time.Duration, about 292 years, for an expiry further out.
	Expiry    time.Time
	Remaining time.Duration
	// WriteTime is the cell's real write time from its companion, zero when
	// the family records none or the companion is missing; for a
	// companion, the write time it records.
	WriteTime time.Time
}

// Hidden reports whether a read through bttl leaves the cell out.
func (c CellReport) Hidden() bool { return c.Visibility != Returned }

// Explain classifies every stored cell of row, as read with no filter, the
// way bttl's read filter for schema treats it at now (microseconds): which
// cells a read returns and why each other one is hidden. It is the read
// filter's rule worked out cell by cell on the client, for people and
// tools asking "why is this value not returned?" (bttl lookup prints it);
// reads themselves use the filter. Families the schema does not name are
// read untouched, as by a client opened on the table.
//
// Cells come out by family, then qualifier, then newest first, as Bigtable
// stores them.
func Explain(schema strategy.Schema, row bigtable.Row, now bigtable.Timestamp) []CellReport {
	fams := make([]string, 0, len(row))
	for f := range row {
		fams = append(fams, f)
	}
	sort.Strings(fams)
	var out []CellReport
	for _, fam := range fams {
		out = append(out, explainFamily(fam, schema, row[fam], now)...)
	}
	return out
}

func explainFamily(fam string, schema strategy.Schema, items []bigtable.ReadItem, now bigtable.Timestamp) []CellReport {
	p, listed := schema[fam]
	var kinds []companion.Kind // nil: every cell is data
	if p.Managed() && p.HasCompanions() {
		kinds = companion.Classify(fam, items)
	}
	cells := make([]CellReport, len(items))
	order := make([]int, len(items)) // cells[i] is items[order[i]]
	for i, it := range items {
		order[i] = i
		cells[i] = CellReport{
			Family:    fam,
			Column:    strings.TrimPrefix(it.Column, fam+":"),
			Timestamp: it.Timestamp,
			Value:     it.Value,
			Strategy:  p.String(),
			Listed:    listed,
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := &cells[order[i]], &cells[order[j]]
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Timestamp > b.Timestamp
	})
	sorted := make([]CellReport, len(cells))
	kind := make([]companion.Kind, len(cells))
	for i, o := range order {
		sorted[i] = cells[o]
		if kinds != nil {
			kind[i] = kinds[o]
		}
	}
	cells = sorted
	if !p.Managed() {
		why := "unmanaged family: read untouched"
		if !listed {
			why = "family not in the schema: read untouched (writes through bttl are refused)"
		}
		for i := range cells {
			cells[i].Visibility, cells[i].Reason = Returned, why
		}
		return cells
	}

	// Write times recorded by companions, by (column, timestamp).
	type key struct {
		col string
		ts  bigtable.Timestamp
	}
	written := map[key]bigtable.Timestamp{}
	for i, c := range cells {
		if kind[i] != companion.Companion {
			continue
		}
		if wt, err := strategy.ParseWriteTime(c.Value); err == nil {
			written[key{strings.TrimPrefix(c.Column, strategy.WriteTimePrefix), c.Timestamp}] = wt
		}
	}

	// Data cells seen per column, newest first. A cell beyond the newest N
	// is an excess version whatever its age, as audit counts it: the
	// newer cells of a column expire later, so the live ones come first
	// and "among the newest N" is "among the newest N live" for every live
	// cell, and one both expired and beyond N is classified once, the
	// same way by both.
	kept := map[string]int{}
	for i := range cells {
		c := &cells[i]
		if p.Reserved(c.Column) {
			col, named := strings.CutPrefix(c.Column, strategy.WriteTimePrefix)
			wt, err := strategy.ParseWriteTime(c.Value)
			switch {
			case kind[i] == companion.Companion && err == nil:
				c.Visibility, c.WriteTime = Companion, wallTime(wt)
				c.Reason = fmt.Sprintf("write-time companion of column %s (written %s)", keytext.Quote(col), formatWhen(c.WriteTime))
			case kind[i] == companion.Companion:
				c.Visibility, c.Reason = Companion, fmt.Sprintf("write-time companion of column %s with an unreadable value (%d bytes, not 8)", keytext.Quote(col), len(c.Value))
			case named:
				c.Visibility = Reserved
				c.Reason = fmt.Sprintf("orphaned write-time companion of column %s: no cell of that column at its timestamp, so it records no write time; "+
					"in the range reserved for companions (from 0xFF 0xFF on): hidden from every read", keytext.Quote(col))
			default:
				c.Visibility, c.Reason = Reserved, "qualifier in the range reserved for write-time companions (from 0xFF 0xFF on): hidden from every read"
			}
			continue
		}
		if wt, ok := written[key{c.Column, c.Timestamp}]; ok {
			c.WriteTime = wallTime(wt)
		}
		age := p.Kind() == strategy.KindOneSecond || p.Kind() == strategy.KindDefaultExpiry
		if age {
			exp := p.Expiry(c.Timestamp)
			c.Expiry = wallTime(exp)
			c.Remaining = remaining(p, c.Timestamp, now)
		}
		kept[c.Column]++
		if n := p.VersionLimit(); n > 0 && kept[c.Column] > n {
			c.Visibility = ExcessVersion
			c.Reason = fmt.Sprintf("version %d of the column's cells; the family keeps the newest %d", kept[c.Column], n)
			continue
		}
		if age && !p.IsLive(c.Timestamp, now) {
			c.Visibility = Expired
			c.Reason = fmt.Sprintf("expired at %s (%s ago); a complete GC would have removed it", formatWhen(c.Expiry), durationText(-c.Remaining))
			continue
		}
		c.Visibility = Returned
		var notes []string
		if age {
			notes = append(notes, fmt.Sprintf("live until %s (%s left)", formatWhen(c.Expiry), durationText(c.Remaining)))
			// A read refreshes the newest cell of a column it returns
			// only (docs/design.md#time-to-idle), never an older version.
			if kept[c.Column] == 1 && p.NeedsIdleRefresh(c.Timestamp, now) {
				notes = append(notes, "a read refreshes it (time-to-idle)")
			}
		}
		if p.Kind() == strategy.KindSequence {
			switch {
			case c.Timestamp >= strategy.RealTimeFloor:
				notes = append(notes, fmt.Sprintf("real timestamp (%s), not seq*1000: it sorts above every sequence number", formatWhen(wallTime(c.Timestamp))))
			case c.Timestamp%1000 != 0:
				notes = append(notes, "timestamp is not seq*1000")
			default:
				notes = append(notes, fmt.Sprintf("sequence number %d", c.Timestamp/1000))
			}
		}
		c.Reason = strings.Join(notes, "; ")
	}
	return cells
}

// wallTime is a timestamp as an instant in UTC.
func wallTime(ts bigtable.Timestamp) time.Time { return time.UnixMicro(int64(ts)).UTC() }

func formatWhen(t time.Time) string { return timefmt.Instant(t) }

// remaining is the time from now to the expiry of a cell with timestamp ts
// in an age family, saturated at the limits of time.Duration.
func remaining(p strategy.Policy, ts, now bigtable.Timestamp) time.Duration {
	const maxMicros = math.MaxInt64 / int64(time.Microsecond)
	left, ok := p.Remaining(ts, now)
	switch {
	case !ok && p.Expiry(ts) > now, ok && int64(left) > maxMicros:
		return math.MaxInt64
	case !ok, int64(left) < -maxMicros:
		return math.MinInt64
	}
	return time.Duration(left) * time.Microsecond
}

// durationText keeps explanations readable: milliseconds are the
// timestamps' precision, and a saturated Remaining says it is a bound.
func durationText(d time.Duration) string {
	switch d {
	case math.MaxInt64:
		return "more than " + timefmt.Duration(d.Truncate(24*time.Hour))
	case math.MinInt64:
		return "more than " + timefmt.Duration(-(d + 1).Truncate(24*time.Hour))
	}
	return timefmt.Duration(d.Round(time.Millisecond))
}

// cellReportJSON is CellReport's JSON form: times in RFC 3339 UTC at fixed
// width (a year past 9999 in ISO 8601's expanded form, "+10000-..."), the
// remaining TTL as a duration in days and smaller units ("60d", exact), a
// qualifier that is not valid UTF-8 (a companion's) in base64 so it
// survives the trip (internal/timefmt).
type cellReportJSON struct {
	Family       string     `json:"family"`
	Column       *string    `json:"column,omitempty"`
	ColumnBase64 []byte     `json:"column_base64,omitempty"`
	Timestamp    int64      `json:"timestamp"`
	Value        []byte     `json:"value"`
	Strategy     string     `json:"strategy"`
	Listed       bool       `json:"listed"`
	Visibility   Visibility `json:"visibility"`
	Reason       string     `json:"reason,omitempty"`
	Expiry       string     `json:"expiry,omitempty"`
	Remaining    string     `json:"remaining_ttl,omitempty"`
	WriteTime    string     `json:"write_time,omitempty"`
}

// MarshalJSON writes the report in the form bttl lookup -json prints.
func (c CellReport) MarshalJSON() ([]byte, error) {
	j := cellReportJSON{
		Family: c.Family, Timestamp: int64(c.Timestamp), Value: c.Value, Strategy: c.Strategy,
		Listed: c.Listed, Visibility: c.Visibility, Reason: c.Reason,
	}
	if utf8.ValidString(c.Column) {
		col := c.Column
		j.Column = &col
	} else {
		j.ColumnBase64 = []byte(c.Column)
	}
	if !c.Expiry.IsZero() {
		j.Expiry, j.Remaining = timefmt.Instant(c.Expiry), timefmt.Duration(c.Remaining)
	}
	if !c.WriteTime.IsZero() {
		j.WriteTime = timefmt.Instant(c.WriteTime)
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *CellReport) UnmarshalJSON(data []byte) error {
	var j cellReportJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	*c = CellReport{
		Family: j.Family, Timestamp: bigtable.Timestamp(j.Timestamp), Value: j.Value, Strategy: j.Strategy,
		Listed: j.Listed, Visibility: j.Visibility, Reason: j.Reason,
	}
	switch {
	case j.Column != nil && j.ColumnBase64 != nil:
		return errors.New("bttl: cell report: both column and column_base64")
	case j.Column != nil:
		c.Column = *j.Column
	default:
		c.Column = string(j.ColumnBase64)
	}
	if j.Expiry != "" {
		e, err := timefmt.ParseInstant(j.Expiry)
		if err != nil {
			return bttlerr.Wrap(err, "cell report: expiry")
		}
		d, err := timefmt.ParseDuration(j.Remaining)
		if err != nil {
			return bttlerr.Wrap(err, "cell report: remaining_ttl")
		}
		c.Expiry, c.Remaining = e, d
	}
	if j.WriteTime != "" {
		w, err := timefmt.ParseInstant(j.WriteTime)
		if err != nil {
			return bttlerr.Wrap(err, "cell report: write_time")
		}
		c.WriteTime = w
	}
	return nil
}
