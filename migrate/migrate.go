package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/scan"
	"github.com/bttl/bttl/strategy"
)

// Clock gives the current time (the same shape as ttlclient.Clock).
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option adjusts a Migrator.
type Option func(*Migrator)

// WithClock sets the clock that decides which cells are expired (default:
// the system clock).
func WithClock(c Clock) Option {
	return func(m *Migrator) {
		if c != nil {
			m.clock = c
		}
	}
}

// WithDryRun makes the Migrator count and collect examples of what it
// would change, and write nothing.
func WithDryRun() Option { return func(m *Migrator) { m.dryRun = true } }

// WithCheckpoint makes Run keep its progress in the file at path
// (scan.WithCheckpoint), recording the plan as the checkpoint's job: a
// restarted Run skips the ranges finished, and a checkpoint written for
// another plan (or a dry run) is refused.
func WithCheckpoint(path string) Option { return func(m *Migrator) { m.checkpoint = path } }

// WithExamples keeps up to n examples of changed cells in Stats (default
// 5).
func WithExamples(n int) Option { return func(m *Migrator) { m.maxExamples = max(n, 0) } }

// Migrator migrates the rows it is given, one cell at a time. MigrateRow is
// safe for concurrent use on different rows, which is how a scan engine's
// workers call it.
type Migrator struct {
	tbl         *bigtable.Table
	table       string
	checkpoint  string
	plan        Plan
	cutoff      bigtable.Timestamp
	clock       Clock
	dryRun      bool
	maxExamples int

	total tally // this Migrator's, over every row it was given

	mu       sync.Mutex
	examples []Example
}

// New checks plan (Plan.Validate; and, in place, that WrittenBefore is not
// after now) and returns a Migrator for tbl, named table (as scan.Run
// takes it, for the checkpoint).
func New(tbl *bigtable.Table, table string, plan Plan, opts ...Option) (*Migrator, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	m := &Migrator{tbl: tbl, table: table, plan: plan, clock: systemClock{}, maxExamples: 5}
	for _, o := range opts {
		o(m)
	}
	if !plan.WrittenBefore.IsZero() {
		m.cutoff = strategy.Millis(bigtable.Time(plan.WrittenBefore))
		if now := m.clock.Now(); plan.WrittenBefore.After(now) {
			return nil, &PlanError{Field: "WrittenBefore", Reason: fmt.Sprintf("%s is after now (%s): writers switched later may still write real timestamps",
				formatTime(plan.WrittenBefore), formatTime(now))}
		}
	}
	return m, nil
}

// Filter is the read filter rows given to MigrateRow must be read with:
// the source family, and in a copy the target family (whose cells say
// what was copied already). Values are needed: each move pins the value.
func (m *Migrator) Filter() bigtable.Filter {
	src := bigtable.FamilyFilter(filters.FamilyRegex(m.plan.Family))
	if m.plan.inPlace() {
		return src
	}
	return bigtable.InterleaveFilters(src, bigtable.FamilyFilter(filters.FamilyRegex(m.plan.ToFamily)))
}

// Example is one cell a run changed (or, dry, would change).
type Example struct {
	Row, Column string // Column is the qualifier
	// Old is the cell's timestamp; New its new one (0 when Deleted).
	Old, New bigtable.Timestamp
	// Deleted: the cell was expired under the target and deleted.
	Deleted bool
}

// Stats counts what a run did (under WithDryRun: would do) to the cells
// of the source family it read.
type Stats struct {
	Rows, Cells int64
	// Moved cells got their new timestamp (in place) or were copied.
	Moved int64
	// OnTarget cells needed nothing: in place, timestamps after
	// WrittenBefore's millisecond (bttl writes and migrated cells); in a
	// copy, cells whose target cell (same column, new timestamp, same
	// value) exists.
	OnTarget int64
	// ExpiredDeleted cells were expired under the target and deleted
	// (in place, DeleteExpired); ExpiredLeft were left as they are
	// (KeepExpired, or a copy, which never copies them).
	ExpiredDeleted, ExpiredLeft int64
	// Changed cells were changed or removed by someone else between the
	// read and the move, or someone wrote a cell on their new timestamp
	// (the predicate did not match): skipped, nothing overwritten.
	Changed int64
	// Collisions: another cell already holds the new timestamp in that
	// column: not moved, never overwritten.
	Collisions int64
	// TooLargeToPin: values over about 10 KB, whose pinning predicate
	// would exceed filters.MaxFilterBytes (filters.ErrCellTooLargeToPin):
	// never moved unpinned.
	TooLargeToPin int64
	// OutOfRange: the new timestamp is past strategy.MaxTimestamp or
	// before the epoch.
	OutOfRange int64
	// NotRealTimes: from real timestamps, cells stamped before
	// strategy.RealTimeFloor (2000): sequence numbers, not write times.
	NotRealTimes int64
	// Examples are the first changed cells (WithExamples).
	Examples []Example
}

// Changes is how many cells were changed: moved or deleted.
func (s Stats) Changes() int64 { return s.Moved + s.ExpiredDeleted }

// Unmoved is how many cells still need a move that this run could not
// make (changed meanwhile, collisions, too large to pin, out of range,
// not real times): the run is not complete while it is above zero.
func (s Stats) Unmoved() int64 {
	return s.Changed + s.Collisions + s.TooLargeToPin + s.OutOfRange + s.NotRealTimes
}

// Stats is what the Migrator has done so far, over every row it was
// given (by Run, or MigrateRow directly).
func (m *Migrator) Stats() Stats {
	m.mu.Lock()
	ex := append([]Example(nil), m.examples...)
	m.mu.Unlock()
	st := m.total.stats()
	st.Examples = ex
	return st
}

// tally counts cells by outcome; safe for concurrent use.
type tally struct {
	rows, cells, moved, onTarget, expiredDeleted, expiredLeft atomic.Int64
	changed, collisions, tooLarge, outOfRange, notReal        atomic.Int64
}

func (t *tally) stats() Stats {
	return Stats{
		Rows: t.rows.Load(), Cells: t.cells.Load(), Moved: t.moved.Load(), OnTarget: t.onTarget.Load(),
		ExpiredDeleted: t.expiredDeleted.Load(), ExpiredLeft: t.expiredLeft.Load(), Changed: t.changed.Load(),
		Collisions: t.collisions.Load(), TooLargeToPin: t.tooLarge.Load(), OutOfRange: t.outOfRange.Load(),
		NotRealTimes: t.notReal.Load(),
	}
}

// counter is one outcome's counters: the Migrator's total and, during
// Run, the range's.
type counter []*atomic.Int64

func (c counter) Add(n int64) {
	for _, a := range c {
		a.Add(n)
	}
}

// counters are the counters a row adds to.
type counters struct {
	rows, cells, moved, onTarget, expiredDeleted, expiredLeft counter
	changed, collisions, tooLarge, outOfRange, notReal        counter
}

func countersOf(ts ...*tally) *counters {
	c := &counters{}
	for _, t := range ts {
		c.rows = append(c.rows, &t.rows)
		c.cells = append(c.cells, &t.cells)
		c.moved = append(c.moved, &t.moved)
		c.onTarget = append(c.onTarget, &t.onTarget)
		c.expiredDeleted = append(c.expiredDeleted, &t.expiredDeleted)
		c.expiredLeft = append(c.expiredLeft, &t.expiredLeft)
		c.changed = append(c.changed, &t.changed)
		c.collisions = append(c.collisions, &t.collisions)
		c.tooLarge = append(c.tooLarge, &t.tooLarge)
		c.outOfRange = append(c.outOfRange, &t.outOfRange)
		c.notReal = append(c.notReal, &t.notReal)
	}
	return c
}

func (m *Migrator) example(x Example) {
	m.mu.Lock()
	if len(m.examples) < m.maxExamples {
		m.examples = append(m.examples, x)
	}
	m.mu.Unlock()
}

// Report is what Run did.
type Report struct {
	// Stats are this run's: the rows it read and what it did to them.
	Stats
	// Earlier sums what earlier runs recorded in the checkpoint for the
	// ranges they finished, which this run did not read again.
	Earlier Stats
	// Scan is the scan engine's summary: ranges, which are done, which
	// were resumed from the checkpoint.
	Scan *scan.Summary
}

// Run scans the table with the scan engine (package scan: its options
// set the workers, the cells/s limit, the shard, the key range and the
// checkpoint) and migrates every row. The source family (and, in a copy,
// the target family) is all that is read. With scan.WithCheckpoint, the
// checkpoint's job is the plan: a checkpoint of another plan is refused,
// and a restarted run skips the ranges finished and reads the others again
// (which moves nothing twice: see the package doc). The Report is returned
// also with an error.
func (m *Migrator) Run(ctx context.Context, opts ...scan.Option) (*Report, error) {
	rep := &Report{}
	opts = append(append([]scan.Option(nil), opts...), scan.WithFilter(m.Filter()))
	opts = m.withJob(opts)
	sum, err := scan.RunRanges(ctx, m.tbl, m.table, func(scan.Range) (scan.RowFunc, func() (json.RawMessage, error)) {
		var rg tally
		n := countersOf(&m.total, &rg)
		return func(ctx context.Context, r bigtable.Row) error {
				return m.migrateRow(ctx, r, n)
			}, func() (json.RawMessage, error) {
				return json.Marshal(rg.stats())
			}
	}, opts...)
	rep.Stats, rep.Scan = m.Stats(), sum
	if sum != nil {
		for _, r := range sum.Ranges {
			if !r.Resumed || r.Result == nil {
				continue
			}
			var st Stats
			if err := json.Unmarshal(r.Result, &st); err == nil {
				rep.Earlier = rep.Earlier.plus(st)
			}
		}
	}
	return rep, err
}

// withJob adds the checkpoint (WithCheckpoint), whose job is the plan, so
// that a checkpoint is never resumed by another plan or a dry run.
func (m *Migrator) withJob(opts []scan.Option) []scan.Option {
	p := m.plan
	var rules []string
	for _, r := range p.TTL {
		rules = append(rules, r.String())
	}
	job := struct {
		Migrate       string   `json:"migrate"`
		TTL           []string `json:"ttl,omitempty"`
		WrittenBefore string   `json:"written_before,omitempty"`
		Expired       string   `json:"expired"`
		DryRun        bool     `json:"dry_run,omitempty"`
	}{p.String(), rules, "", p.Expired.String(), m.dryRun}
	if !p.WrittenBefore.IsZero() {
		job.WrittenBefore = formatTime(p.WrittenBefore)
	}
	if m.checkpoint == "" {
		return opts
	}
	return append(opts, scan.WithCheckpoint(m.checkpoint, job))
}

func (s Stats) plus(o Stats) Stats {
	s.Rows += o.Rows
	s.Cells += o.Cells
	s.Moved += o.Moved
	s.OnTarget += o.OnTarget
	s.ExpiredDeleted += o.ExpiredDeleted
	s.ExpiredLeft += o.ExpiredLeft
	s.Changed += o.Changed
	s.Collisions += o.Collisions
	s.TooLargeToPin += o.TooLargeToPin
	s.OutOfRange += o.OutOfRange
	s.NotRealTimes += o.NotRealTimes
	return s
}

// cell is one stored cell of a column: its timestamp and value.
type cell struct {
	ts    bigtable.Timestamp
	value []byte
}

// MigrateRow migrates the source family's cells of one row, read with
// Filter: one conditional row mutation per cell, whose predicate pins the
// exact old cell (filters.Cell) and an empty target slot, so a cell changed
// meanwhile is skipped and nothing a concurrent writer wrote is
// overwritten. It returns only errors of the RPCs (the row's remaining
// cells are not tried); every cell it cannot move is counted in Stats.
func (m *Migrator) MigrateRow(ctx context.Context, r bigtable.Row) error {
	return m.migrateRow(ctx, r, countersOf(&m.total))
}

func (m *Migrator) migrateRow(ctx context.Context, r bigtable.Row, n *counters) error {
	src := r[m.plan.Family]
	if len(src) == 0 {
		return nil
	}
	n.rows.Add(1)
	row := src[0].Row
	// Cells of a column arrive together, newest first.
	bySrc := map[string][]cell{}
	var order []string
	for _, it := range src {
		q := strings.TrimPrefix(it.Column, m.plan.Family+":")
		if _, ok := bySrc[q]; !ok {
			order = append(order, q)
		}
		bySrc[q] = append(bySrc[q], cell{it.Timestamp, it.Value})
	}
	byTgt := bySrc
	if !m.plan.inPlace() {
		byTgt = map[string][]cell{}
		for _, it := range r[m.plan.ToFamily] {
			q := strings.TrimPrefix(it.Column, m.plan.ToFamily+":")
			byTgt[q] = append(byTgt[q], cell{it.Timestamp, it.Value})
		}
	}
	for _, q := range order {
		if err := m.migrateColumn(ctx, n, row, q, bySrc[q], byTgt[q]); err != nil {
			return err
		}
	}
	return nil
}

// migrateColumn moves one column's cells. Every cell of a column moves by
// the same amount (TTL rules are per row prefix and column), so moving
// the newest first when cells move later (the oldest first when they move
// earlier) never lands a cell on one not yet moved; occupied tracks the
// target column as the moves go.
func (m *Migrator) migrateColumn(ctx context.Context, n *counters, row, q string, cells, target []cell) error {
	n.cells.Add(int64(len(cells)))
	occupied := make(map[bigtable.Timestamp][]byte, len(target))
	for _, c := range target {
		occupied[c.ts] = c.value
	}
	if to, ok := m.plan.newTimestamp(row, q, cells[0].ts); ok && to < cells[0].ts {
		cells = append([]cell(nil), cells...)
		sort.Slice(cells, func(i, j int) bool { return cells[i].ts < cells[j].ts })
	}
	for _, c := range cells {
		if err := m.migrateCell(ctx, n, row, q, c, occupied); err != nil {
			return err
		}
	}
	return nil
}

func (m *Migrator) migrateCell(ctx context.Context, cnt *counters, row, q string, c cell, occupied map[bigtable.Timestamp][]byte) error {
	p := m.plan
	now := bigtable.Time(m.clock.Now())
	if p.fromReal() {
		// Strictly after the cutoff's millisecond: a bttl write at or after
		// WrittenBefore stamps ms(now + ttl) with ttl >= 1ms, past it; a
		// legacy write just before WrittenBefore can share its millisecond.
		if p.inPlace() && c.ts > m.cutoff {
			// A bttl write or a cell migrated already: its timestamp is
			// an expiry instant. One already past is deleted too under
			// DeleteExpired: `bttl apply` refuses a one-second rule over
			// any timestamp at or before now.
			if p.Expired == DeleteExpired && !p.To.IsLive(c.ts, now) {
				return m.deleteCell(ctx, cnt, row, q, c, occupied)
			}
			cnt.onTarget.Add(1)
			return nil
		}
		if c.ts < strategy.RealTimeFloor {
			cnt.notReal.Add(1)
			return nil
		}
	}
	n, ok := p.newTimestamp(row, q, c.ts)
	if !ok {
		cnt.outOfRange.Add(1)
		return nil
	}
	if !p.To.IsLive(n, now) {
		if p.inPlace() && p.Expired == DeleteExpired {
			return m.deleteCell(ctx, cnt, row, q, c, occupied)
		}
		cnt.expiredLeft.Add(1)
		return nil
	}
	if n == c.ts && p.inPlace() {
		cnt.onTarget.Add(1)
		return nil
	}
	if v, taken := occupied[n]; taken {
		if !p.inPlace() && bytes.Equal(v, c.value) {
			cnt.onTarget.Add(1) // copied by an earlier run
		} else {
			cnt.collisions.Add(1)
		}
		return nil
	}
	pin, err := m.movePredicate(q, c, n)
	if errors.Is(err, filters.ErrCellTooLargeToPin) {
		cnt.tooLarge.Add(1)
		return nil
	}
	if err != nil {
		return err
	}
	mut := bigtable.NewMutation()
	if p.inPlace() {
		mut.DeleteTimestampRange(p.Family, q, c.ts, c.ts+1000)
	}
	mut.Set(p.target(), q, n, c.value)
	applied, err := m.apply(ctx, row, pin, mut)
	if err != nil {
		return fmt.Errorf("bttl: migrate row %q, column %q, timestamp %s: %w", row, q, formatTimestamp(c.ts), err)
	}
	if !applied {
		cnt.changed.Add(1)
		return nil
	}
	if p.inPlace() {
		delete(occupied, c.ts)
	}
	occupied[n] = c.value
	cnt.moved.Add(1)
	m.example(Example{Row: row, Column: q, Old: c.ts, New: n})
	return nil
}

// movePredicate matches while the old cell is stored and no cell holds
// the new timestamp in the target column (filters.CellMove): a write that
// lands on the new timestamp after the row was read is never replaced by
// the move's Set.
func (m *Migrator) movePredicate(q string, c cell, to bigtable.Timestamp) (bigtable.Filter, error) {
	return filters.CellMove(m.plan.Family, q, c.ts, c.value, m.plan.target(), to)
}

func (m *Migrator) deleteCell(ctx context.Context, cnt *counters, row, q string, c cell, occupied map[bigtable.Timestamp][]byte) error {
	pin, err := filters.Cell(m.plan.Family, q, c.ts, c.value)
	if errors.Is(err, filters.ErrCellTooLargeToPin) {
		cnt.tooLarge.Add(1)
		return nil
	}
	if err != nil {
		return err
	}
	mut := bigtable.NewMutation()
	mut.DeleteTimestampRange(m.plan.Family, q, c.ts, c.ts+1000)
	applied, err := m.apply(ctx, row, pin, mut)
	if err != nil {
		return fmt.Errorf("bttl: delete expired cell of row %q, column %q, timestamp %s: %w", row, q, formatTimestamp(c.ts), err)
	}
	if !applied {
		cnt.changed.Add(1)
		return nil
	}
	delete(occupied, c.ts)
	cnt.expiredDeleted.Add(1)
	m.example(Example{Row: row, Column: q, Old: c.ts, Deleted: true})
	return nil
}

// apply sends mut guarded by pin, and reports whether the pinned cell was
// there (dry runs send nothing and assume it was).
func (m *Migrator) apply(ctx context.Context, row string, pin bigtable.Filter, mut *bigtable.Mutation) (bool, error) {
	if m.dryRun {
		return true, nil
	}
	var matched bool
	cond := bigtable.NewCondMutation(pin, mut, nil)
	if err := m.tbl.Apply(ctx, row, cond, bigtable.GetCondMutationResult(&matched)); err != nil {
		return false, err
	}
	return matched, nil
}

func formatTimestamp(ts bigtable.Timestamp) string {
	if ts >= strategy.RealTimeFloor {
		return formatTime(ts.Time())
	}
	return fmt.Sprintf("%d", ts)
}
