package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// ErrUnsafeAdoption is wrapped by every refusal of a rule change that
// would delete or hide stored cells (ErrRealTimestamps,
// ErrAgeOverSequence, ErrNotSequenceNumbers): WithForce overrides exactly
// these.
var ErrUnsafeAdoption = errors.New("bttl: the rule change would delete or hide stored cells")

// ErrAgeOverSequence: an age rule (one-second or default expiry) is about
// to be put on a family whose cells are sequence numbers (timestamps
// before strategy.RealTimeFloor) or whose current rule is max versions;
// see *SequenceCellsError.
var ErrAgeOverSequence = fmt.Errorf("%w: an age rule would delete a sequence family's cells", ErrUnsafeAdoption)

// ErrNotSequenceNumbers: a family about to be put on the sequence strategy
// holds cells whose timestamps are not sequence numbers; see
// *NotSequenceError.
var ErrNotSequenceNumbers = fmt.Errorf("%w: the family holds timestamps that are not sequence numbers", ErrUnsafeAdoption)

// SequenceCellsError names the family and the cells an age rule would
// delete at the next compaction: sequence numbers (seq*1000, years before
// 2000 read as times), or any cell past the new max age of a family whose
// current rule is max versions.
type SequenceCellsError struct {
	Table, Family string
	From, To      string // the current rule and the age rule
	// Cells is how many such cells the scan read (a lower bound unless
	// Exact).
	Cells int64
	Exact bool
	// Row, Column and Timestamp are the first one found.
	Row, Column string
	Timestamp   bigtable.Timestamp
	// Forced: the change goes ahead (WithForce).
	Forced bool
}

func (e *SequenceCellsError) Error() string {
	s := fmt.Sprintf("bttl: an age rule would delete a sequence family's cells: table %q, family %q (%s -> %s): %s already past the new max age, "+
		"sequence numbers or versions kept by max versions (first: row %q, column %q, timestamp %s); ",
		e.Table, e.Family, e.From, e.To, countCells(e.Cells, e.Exact), e.Row, e.Column, formatTimestamp(e.Timestamp))
	if e.Forced {
		return s + "forced: they are hidden from reads through bttl now and deleted at the next compaction"
	}
	return s + "every one would be deleted at the next compaction: keep the sequence strategy, move them first, or force"
}

func (e *SequenceCellsError) Unwrap() error { return ErrAgeOverSequence }

// NotSequenceError names the family and the cells whose timestamps are not
// sequence numbers: not a positive multiple of 1000, or at or after
// strategy.RealTimeFloor (real times, as cbt and server timestamps write).
// The latter outrank every sequence number new writes use, so max versions
// keeps them and collects the new writes, and reads return them instead.
type NotSequenceError struct {
	Table, Family string
	// Cells is how many such cells the scan read (a lower bound unless
	// Exact); RealTimes how many of them are real times.
	Cells, RealTimes int64
	Exact            bool
	// Row, Column and Timestamp are the first one found.
	Row, Column string
	Timestamp   bigtable.Timestamp
	// Forced: the change goes ahead (WithForce).
	Forced bool
}

func (e *NotSequenceError) Error() string {
	s := fmt.Sprintf("bttl: the family holds timestamps that are not sequence numbers: table %q, family %q: %s whose timestamp is not seq*1000 before %s, "+
		"%d of them real times (first: row %q, column %q, timestamp %s); ",
		e.Table, e.Family, countCells(e.Cells, e.Exact), formatTimestamp(strategy.RealTimeFloor), e.RealTimes, e.Row, e.Column, formatTimestamp(e.Timestamp))
	if e.Forced {
		return s + "forced: they outrank every sequence number, so reads through bttl return them and hide new writes, which max versions collects, until they are deleted"
	}
	return s + "they would outrank every sequence number new writes use, hiding those writes: rewrite them as seq*1000 first, or force"
}

func (e *NotSequenceError) Unwrap() error { return ErrNotSequenceNumbers }

// Impact is what a scan of a family's stored cells found for a change that
// lowers its rule.
type Impact struct {
	// Collectable cells (CollectableBytes value bytes) are kept by the
	// current rule but collectable at once under the new one, and
	// invisible through bttl as soon as it applies.
	Collectable, CollectableBytes int64
	// Row, Column and Timestamp are the first such cell.
	Row, Column string
	Timestamp   bigtable.Timestamp
	// Rows and Cells holding the family were read.
	Rows, Cells int64
	// Exact: every row holding the family was read (WithExactCounts, or a
	// sample that reached the end of every range); otherwise the counts
	// are a lower bound from a sample of up to PerRange rows from each of
	// Ranges row-key ranges.
	Exact            bool
	Ranges, PerRange int
	// Sampled: the counts come from the sample scan (even if it read
	// every row), not WithExactCounts.
	Sampled bool
}

func (i *Impact) String() string {
	s := fmt.Sprintf("collectable at once, and invisible through bttl: %d cell(s), %d byte(s)", i.Collectable, i.CollectableBytes)
	if i.Collectable > 0 {
		s += fmt.Sprintf(" (first: row %q, column %q, timestamp %s)", i.Row, i.Column, formatTimestamp(i.Timestamp))
	}
	switch {
	case !i.Sampled:
		return s + fmt.Sprintf("; exact: read all %d row(s) of the family", i.Rows)
	case i.Exact:
		return s + fmt.Sprintf("; sampled: %d of %d row(s), the whole family, so exact", i.Rows, i.Rows)
	}
	return s + fmt.Sprintf("; sampled: %d row(s), up to %d from each of %d row-key range(s), so at least this many (an exact count reads every row)",
		i.Rows, i.PerRange, i.Ranges)
}

// formatTimestamp shows a timestamp as people read it: RFC 3339 UTC for a
// real time, the sequence number for seq*1000.
func formatTimestamp(ts bigtable.Timestamp) string {
	switch {
	case ts >= strategy.RealTimeFloor:
		return ts.Time().UTC().Format(time.RFC3339Nano)
	case ts >= 1000 && ts%1000 == 0:
		return fmt.Sprintf("%d (seq %d)", ts, ts/1000)
	}
	return fmt.Sprintf("%d", ts)
}

func countCells(n int64, exact bool) string {
	if exact {
		return fmt.Sprintf("%d cell(s)", n)
	}
	return fmt.Sprintf("%d sampled cell(s)", n)
}

// found counts cells of one kind and keeps the first.
type found struct {
	cells, bytes int64
	row, column  string
	ts           bigtable.Timestamp
}

func (f *found) add(row, column string, ts bigtable.Timestamp, n int64) {
	if f.cells == 0 {
		f.row, f.column, f.ts = row, column, ts
	}
	f.cells++
	f.bytes += n
}

// examination is one scan of a family for one change.
type examination struct {
	realTimestamps, ageOverSequence, notSequence, collectable found
	realTimes                                                 int64
	rows, cells                                               int64
	exact                                                     bool
	ranges, perRange                                          int
}

// examine scans family's cells (a sample unless WithExactCounts) and
// classifies them for change c at now. Values are read only when
// withBytes.
func (p *Provisioner) examine(ctx context.Context, table string, c Change, now bigtable.Timestamp, withBytes bool) (*examination, error) {
	tbl := p.data.Open(table)
	pol, family := c.Policy, c.Family
	// Timestamps are checked here, not by a server-side range: with a
	// range filter LimitRows would count only matching rows and a clean
	// table would be read to its end.
	f := bigtable.FamilyFilter(filters.FamilyRegex(family))
	if !withBytes {
		f = bigtable.ChainFilters(f, bigtable.StripValueFilter())
	}
	x := &examination{exact: true}
	ranges := []bigtable.RowRange{bigtable.InfiniteRange("")}
	var limit []bigtable.ReadOption
	if !p.exact {
		keys, err := tbl.SampleRowKeys(ctx)
		if err != nil {
			return nil, fmt.Errorf("bttl: sample row keys of %q: %w", table, err)
		}
		ranges = splitRanges(keys)
		x.perRange = max(p.sampleRows/len(ranges), 1)
		x.ranges = len(ranges)
		limit = []bigtable.ReadOption{bigtable.LimitRows(int64(x.perRange))}
	}
	isAge := pol.Kind() == strategy.KindOneSecond || pol.Kind() == strategy.KindDefaultExpiry
	versionsOnly := c.from.HasVersions && !c.from.HasAge
	for _, rr := range ranges {
		var rows int
		err := tbl.ReadRows(ctx, rr, func(r bigtable.Row) bool {
			rows++
			x.rows++
			col, idx := "", 0
			for _, it := range r[family] {
				x.cells++
				if it.Column != col {
					col, idx = it.Column, 0
				}
				idx++ // cells of a column arrive newest first
				qual, ts, n := strings.TrimPrefix(it.Column, family+":"), it.Timestamp, int64(len(it.Value))
				liveAfter := liveUnder(pol, ts, idx, now)
				switch {
				case isAge && ts < strategy.RealTimeFloor && !liveAfter:
					x.ageOverSequence.add(it.Row, qual, ts, n)
				case pol.Kind() == strategy.KindOneSecond && ts <= now:
					x.realTimestamps.add(it.Row, qual, ts, n)
				case isAge && versionsOnly && !liveAfter:
					x.ageOverSequence.add(it.Row, qual, ts, n)
				case pol.Kind() == strategy.KindSequence && (ts < 1000 || ts%1000 != 0 || ts >= strategy.RealTimeFloor):
					x.notSequence.add(it.Row, qual, ts, n)
					if ts >= strategy.RealTimeFloor {
						x.realTimes++
					}
				}
				if !liveAfter && !collectedUnder(c.from, ts, idx, now) {
					x.collectable.add(it.Row, qual, ts, n)
				}
			}
			return true
		}, append([]bigtable.ReadOption{bigtable.RowFilter(f)}, limit...)...)
		if err != nil {
			return nil, fmt.Errorf("bttl: scan of %q, family %q: %w", table, family, err)
		}
		if limit != nil && rows >= x.perRange {
			x.exact = false
		}
	}
	return x, nil
}

// liveUnder reports whether the idx-th newest cell of its column, with
// timestamp ts, is kept and visible through bttl under pol at now.
func liveUnder(pol strategy.Policy, ts bigtable.Timestamp, idx int, now bigtable.Timestamp) bool {
	if v := pol.Versions(); v > 0 && idx > v {
		return false
	}
	return pol.IsLive(ts, now)
}

// collectedUnder reports whether rule n already makes the cell collectable
// (an intersection or unreadable rule counts as collecting nothing).
func collectedUnder(n gcrule.Normal, ts bigtable.Timestamp, idx int, now bigtable.Timestamp) bool {
	if n.Intersection || n.Unrecognized {
		return false
	}
	if n.HasVersions && int64(idx) > n.Versions {
		return true
	}
	return n.HasAge && ts < now-bigtable.Timestamp(n.Age/time.Microsecond)
}

// impact is the examination as reported for a lowering change.
func (x *examination) impact(sampled bool) *Impact {
	return &Impact{
		Collectable: x.collectable.cells, CollectableBytes: x.collectable.bytes,
		Row: x.collectable.row, Column: x.collectable.column, Timestamp: x.collectable.ts,
		Rows: x.rows, Cells: x.cells, Exact: x.exact, Ranges: x.ranges, PerRange: x.perRange, Sampled: sampled,
	}
}

// refusals are the examination's findings that make the change unsafe.
func (x *examination) refusals(table string, c Change, now bigtable.Timestamp, forced bool) []error {
	var errs []error
	if f := x.realTimestamps; f.cells > 0 {
		errs = append(errs, &RealTimestampsError{Table: table, Family: c.Family, Cells: f.cells, Row: f.row, Column: f.column, Timestamp: f.ts, Now: now, Exact: x.exact, Forced: forced})
	}
	if f := x.ageOverSequence; f.cells > 0 {
		errs = append(errs, &SequenceCellsError{Table: table, Family: c.Family, From: c.From, To: c.To, Cells: f.cells, Exact: x.exact, Row: f.row, Column: f.column, Timestamp: f.ts, Forced: forced})
	}
	if f := x.notSequence; f.cells > 0 {
		errs = append(errs, &NotSequenceError{Table: table, Family: c.Family, Cells: f.cells, RealTimes: x.realTimes, Exact: x.exact, Row: f.row, Column: f.column, Timestamp: f.ts, Forced: forced})
	}
	return errs
}
