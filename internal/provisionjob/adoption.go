package provisionjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/companion"
	"github.com/bttl/bttl/internal/keytext"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
)

// ErrUnsafeAdoption is wrapped by every refusal of a rule change, or of a
// declared strategy over an unchanged rule, that would delete or hide
// stored cells (ErrRealTimestamps, ErrAgeOverSequence,
// ErrNotSequenceNumbers, ErrHiddenColumns): WithForce overrides exactly
// these.
var ErrUnsafeAdoption = errors.New("bttl: the rule change would delete or hide stored cells")

// ErrAgeOverSequence: an age rule (one-second or default expiry) is about
// to be put on a family whose cells are sequence numbers (timestamps
// before strategy.RealTimeFloor) or whose current rule is max versions;
// the *AdoptionError's From and To name the rules.
var ErrAgeOverSequence = fmt.Errorf("%w: an age rule would delete a sequence family's cells", ErrUnsafeAdoption)

// ErrNotSequenceNumbers: a family about to be put on the sequence strategy
// holds cells whose timestamps are not sequence numbers; the
// *AdoptionError's RealTimes counts the real times among them.
var ErrNotSequenceNumbers = fmt.Errorf("%w: the family holds timestamps that are not sequence numbers", ErrUnsafeAdoption)

// ErrHiddenColumns: a family about to have write times
// (strategy.WithWriteTime) holds cells under qualifiers from 0xFF 0xFF on
// that are not write-time companions (*AdoptionError).
var ErrHiddenColumns = fmt.Errorf("%w: the family holds columns write times would hide", ErrUnsafeAdoption)

// Impact is what Plan's scan of a family found for a change that lowers
// its rule. The scan reads every row holding the family: the counts are
// exact, never estimated.
type Impact struct {
	// Collectable cells (CollectableBytes value bytes) are kept by the
	// current rule but collectable at once under the new one, and
	// invisible through bttl as soon as it applies.
	Collectable, CollectableBytes int64
	// Row, Column and Timestamp are the first such cell (in key order).
	Row, Column string
	Timestamp   bigtable.Timestamp
	// Rows and Cells holding the family were read.
	Rows, Cells int64
}

func (i *Impact) String() string {
	s := fmt.Sprintf("collectable at once, and invisible through bttl: %d cell(s), %d byte(s)", i.Collectable, i.CollectableBytes)
	if i.Collectable > 0 {
		s += fmt.Sprintf(" (first: row %s, column %s, timestamp %s)", keytext.Quote(i.Row), keytext.Quote(i.Column), formatTimestamp(i.Timestamp))
	}
	return s + fmt.Sprintf("; exact: read all %d row(s) of the family", i.Rows)
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

// countCells says how a safety scan's count was made: exact, a lower
// bound because the scan stopped at the first maxOffending, or from a
// sample that may have missed cells.
func countCells(n int64, exact, sampled bool, rows int64) string {
	switch {
	case sampled && !exact:
		return fmt.Sprintf("%d cell(s) in a sample of %d row(s) (sampled scan, not exhaustive: cells outside the sample were not checked)", n, rows)
	case exact:
		return fmt.Sprintf("%d cell(s)", n)
	}
	return fmt.Sprintf("at least %d cell(s) (the scan stopped after the first %d)", n, maxOffending)
}

// maxOffending is how many offending cells a full safety scan finds
// before it stops: enough to refuse and show the first.
const maxOffending = 1000

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

// merge adds g, found in rows after f's (key order: f's first stays).
func (f *found) merge(g found) {
	if f.cells == 0 {
		f.row, f.column, f.ts = g.row, g.column, g.ts
	}
	f.cells += g.cells
	f.bytes += g.bytes
}

// examination is one scan of a family for one change.
type examination struct {
	realTimestamps, ageOverSequence, notSequence, collectable, hidden found
	// passed: one-second cells at or before now stamped after
	// WithWrittenBefore's bound: expiry instants already passed, not
	// refused.
	passed      found
	realTimes   int64
	rows, cells int64
	// exact: every row was read (and, for the safety scan, it did not
	// stop early); sampled: a sample was read.
	exact, sampled bool
	// now is the time the cells were classified at; legacyBound the
	// WithWrittenBefore bound they were classified with (zero: none).
	now, legacyBound bigtable.Timestamp
}

// offending counts the cells that make the change unsafe.
func (x *examination) offending() int64 {
	return x.realTimestamps.cells + x.ageOverSequence.cells + x.notSequence.cells + x.hidden.cells
}

// merge adds y, the examination of rows after x's.
func (x *examination) merge(y *examination) {
	x.realTimestamps.merge(y.realTimestamps)
	x.ageOverSequence.merge(y.ageOverSequence)
	x.notSequence.merge(y.notSequence)
	x.collectable.merge(y.collectable)
	x.hidden.merge(y.hidden)
	x.passed.merge(y.passed)
	x.realTimes += y.realTimes
	x.rows += y.rows
	x.cells += y.cells
}

// classifier classifies one family's cells for one change at now.
type classifier struct {
	c                              Change
	now                            bigtable.Timestamp
	isAge, versionsOnly, unchanged bool
	// legacyBound (when hasBound): no real timestamp is stamped after it
	// (WithWrittenBefore).
	legacyBound bigtable.Timestamp
	hasBound    bool
}

func newClassifier(c Change, now bigtable.Timestamp, legacyBound bigtable.Timestamp, hasBound bool) classifier {
	kind := c.Policy.Kind()
	return classifier{
		c: c, now: now, legacyBound: legacyBound, hasBound: hasBound,
		isAge:        kind == strategy.KindOneSecond || kind == strategy.KindDefaultExpiry,
		versionsOnly: c.from.HasVersions && !c.from.HasAge,
		// An unchanged rule deletes nothing new: only what the declared
		// strategy hides is looked for (Plan.Unchanged).
		unchanged: c.Action == KeepRule,
	}
}

// row adds the family's cells of r to x.
func (k classifier) row(x *examination, r bigtable.Row) {
	pol, family, now := k.c.Policy, k.c.Family, k.now
	items := r[family]
	if len(items) == 0 {
		return // read without a family filter: another family's row
	}
	x.rows++
	col, idx := "", 0
	var kinds []companion.Kind
	if pol.HasCompanions() {
		kinds = companion.Classify(family, items)
	}
	for i, it := range items {
		x.cells++
		qual, ts, n := strings.TrimPrefix(it.Column, family+":"), it.Timestamp, int64(len(it.Value))
		if kinds != nil && kinds[i] != companion.Data {
			// A companion goes with its cell; another reserved
			// qualifier is hidden by the option.
			if kinds[i] == companion.Hidden {
				x.hidden.add(it.Row, qual, ts, n)
			}
			continue
		}
		if it.Column != col {
			col, idx = it.Column, 0
		}
		idx++ // cells of a column arrive newest first
		liveAfter := liveUnder(pol, ts, idx, now)
		switch {
		case k.unchanged && pol.Kind() != strategy.KindSequence:
			// An age rule already in place has collected or will
			// collect what it deletes: nothing for this scan.
		case k.isAge && ts < strategy.RealTimeFloor && !liveAfter:
			x.ageOverSequence.add(it.Row, qual, ts, n)
		case pol.Kind() == strategy.KindOneSecond && ts <= now && k.hasBound && ts > k.legacyBound:
			// No real timestamp is stamped after the bound: an expiry
			// instant already passed (docs/design.md#apply-after-migrate).
			x.passed.add(it.Row, qual, ts, n)
		case pol.Kind() == strategy.KindOneSecond && ts <= now:
			x.realTimestamps.add(it.Row, qual, ts, n)
		case k.isAge && k.versionsOnly && !liveAfter:
			x.ageOverSequence.add(it.Row, qual, ts, n)
		case pol.Kind() == strategy.KindSequence && (ts < 1000 || ts%1000 != 0 || ts >= strategy.RealTimeFloor):
			x.notSequence.add(it.Row, qual, ts, n)
			if ts >= strategy.RealTimeFloor {
				x.realTimes++
			}
		}
		if !k.unchanged && !liveAfter && !collectedUnder(k.c.from, ts, idx, now) {
			x.collectable.add(it.Row, qual, ts, n)
		}
	}
}

// errEnough stops a safety scan that found enough to refuse.
var errEnough = errors.New("enough offending cells")

// examine reads family's cells and classifies them for change c at now:
// every row through the scan engine (WithWorkers streams), or, when
// sampled, up to WithSampleRows rows spread over the table's
// SampleRowKeys ranges. Values are read only when withBytes (Plan's
// impact); otherwise the scan stops once it has found maxOffending cells
// that make the change unsafe. families are the table's families (nil:
// not known): the family filter is left out when c's is the only one, as
// it would remove nothing (and the emulators evaluate it per cell).
func (p *Provisioner) examine(ctx context.Context, table string, families []string, c Change, now bigtable.Timestamp, withBytes, sampled bool) (*examination, error) {
	var fs []bigtable.Filter
	if !(len(families) == 1 && families[0] == c.Family) {
		fs = append(fs, bigtable.FamilyFilter(filters.FamilyRegex(c.Family)))
	}
	if !withBytes {
		fs = append(fs, bigtable.StripValueFilter())
	}
	bound, hasBound := p.legacyBound()
	k := newClassifier(c, now, bound, hasBound)
	tbl := p.data.Open(table)
	if sampled {
		return p.sample(ctx, tbl, table, k, fs)
	}
	var mu sync.Mutex
	parts := map[scan.Range]*examination{}
	var offending atomic.Int64
	perRange := func(rg scan.Range) (scan.RowFunc, func() (json.RawMessage, error)) {
		x := &examination{}
		mu.Lock()
		parts[rg] = x
		mu.Unlock()
		return func(_ context.Context, r bigtable.Row) error {
			before := x.offending()
			k.row(x, r)
			if !withBytes && offending.Add(x.offending()-before) >= maxOffending {
				return errEnough
			}
			return nil
		}, func() (json.RawMessage, error) { return nil, nil }
	}
	opts := []scan.Option{scan.WithWorkers(p.workers), scan.WithStall(p.stall)}
	if p.pacer != nil {
		opts = append(opts, scan.WithPacer(p.pacer))
	}
	for _, f := range fs {
		opts = append(opts, scan.WithFilter(f))
	}
	sum, err := scan.RunRanges(ctx, tbl, table, perRange, opts...)
	stopped := errors.Is(err, errEnough)
	if err != nil && (!stopped || sum == nil) {
		return nil, bttlerr.Wrap(err, "scan of %q, family %q", table, c.Family)
	}
	// Merged in key order, so the first cell of each kind is the first
	// read in key order, whatever the workers' order.
	x := &examination{exact: !stopped, now: now, legacyBound: k.legacyBound}
	for _, r := range sum.Ranges {
		if part := parts[r.Range]; part != nil {
			x.merge(part)
		}
	}
	return x, nil
}

// sample is examine's sampled scan (WithSampledSafetyScan): up to
// sampleRows rows, spread over the ranges between the table's
// SampleRowKeys, read in key order.
func (p *Provisioner) sample(ctx context.Context, tbl *bigtable.Table, table string, k classifier, fs []bigtable.Filter) (*examination, error) {
	cctx, cancel := p.call(ctx)
	keys, err := tbl.SampleRowKeys(cctx)
	cancel()
	if err != nil {
		return nil, bttlerr.Wrap(err, "sample row keys of %q", table)
	}
	ranges := splitRanges(keys)
	perRange := max(p.sampleRows/len(ranges), 1)
	opts := []bigtable.ReadOption{bigtable.LimitRows(int64(perRange))}
	switch len(fs) {
	case 1:
		opts = append(opts, bigtable.RowFilter(fs[0]))
	case 2:
		opts = append(opts, bigtable.RowFilter(bigtable.ChainFilters(fs...)))
	}
	x := &examination{exact: true, sampled: true, now: k.now, legacyBound: k.legacyBound}
	for _, rr := range ranges {
		var rows int
		stopped := false
		cctx, cancel := p.call(ctx)
		err := tbl.ReadRows(cctx, rr, func(r bigtable.Row) bool {
			rows++
			k.row(x, r)
			stopped = x.offending() >= maxOffending
			return !stopped
		}, opts...)
		cancel()
		if err != nil {
			return nil, bttlerr.Wrap(err, "scan of %q, family %q", table, k.c.Family)
		}
		if stopped || rows >= perRange {
			x.exact = false
		}
		if stopped {
			break
		}
	}
	return x, nil
}

// liveUnder reports whether the idx-th newest cell of its column, with
// timestamp ts, is kept and visible through bttl under pol at now.
func liveUnder(pol strategy.Policy, ts bigtable.Timestamp, idx int, now bigtable.Timestamp) bool {
	if v := pol.VersionLimit(); v > 0 && idx > v {
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
func (x *examination) impact() *Impact {
	return &Impact{
		Collectable: x.collectable.cells, CollectableBytes: x.collectable.bytes,
		Row: x.collectable.row, Column: x.collectable.column, Timestamp: x.collectable.ts,
		Rows: x.rows, Cells: x.cells,
	}
}

// refusals are the examination's findings that make the change unsafe,
// one *AdoptionError per kind found.
func (x *examination) refusals(table string, c Change, now bigtable.Timestamp, forced bool) []error {
	var errs []error
	add := func(sentinel error, f found, fill func(*AdoptionError)) {
		if f.cells == 0 {
			return
		}
		e := &AdoptionError{Err: sentinel, Table: table, Family: c.Family, From: c.From, To: c.To,
			Cells: f.cells, Rows: x.rows, Exact: x.exact, Sampled: x.sampled,
			Row: f.row, Column: f.column, Timestamp: f.ts, Now: now, Forced: forced}
		if fill != nil {
			fill(e)
		}
		errs = append(errs, e)
	}
	add(ErrRealTimestamps, x.realTimestamps, func(e *AdoptionError) { e.LegacyBound, e.Passed = x.legacyBound, x.passed.cells })
	add(ErrAgeOverSequence, x.ageOverSequence, nil)
	add(ErrNotSequenceNumbers, x.notSequence, func(e *AdoptionError) { e.RealTimes = x.realTimes })
	add(ErrHiddenColumns, x.hidden, nil)
	return errs
}
