package migratejob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/keytext"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
)

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures a Migrator, as New builds it.
type Option func(*options)

// options are what the Options set: apart from the Migrator, so that an
// Option cannot change a Migrator in use.
type options struct {
	checkpoint  string
	clock       strategy.Clock
	dryRun      bool
	maxExamples int
	inflight    int
	// allAmbiguous: every ambiguous cell is kept, not maxExamples.
	allAmbiguous bool
	writeStall   time.Duration
	// writeTbl takes the writes and the reads that must see them
	// (WithWriteTable); nil: New's table.
	writeTbl *bigtable.Table
}

// WithWriteTable sends the moves (CheckAndMutateRow), and the reads that
// must see the latest writes (a resumed run's witness checks, a cell read
// again after a move did not apply), through w instead of New's table,
// which then serves the scan only: w is the same table opened on a client
// with another app profile. Production allows CheckAndMutateRow only
// through a single-cluster profile that allows transactional writes, and
// a Data Boost profile, which suits the scan, neither writes nor serves
// point reads, and may miss the last half hour's writes
// (docs/design.md#app-profiles).
func WithWriteTable(w *bigtable.Table) Option { return func(m *options) { m.writeTbl = w } }

// writer is the table moves and their reads go through.
func (m *Migrator) writer() *bigtable.Table {
	if m.writeTbl != nil {
		return m.writeTbl
	}
	return m.tbl
}

// WithClock sets the clock that decides which cells are expired (default:
// the system clock).
func WithClock(c strategy.Clock) Option {
	return func(m *options) {
		if c != nil {
			m.clock = c
		}
	}
}

// WithDryRun makes the Migrator count and collect examples of what it
// would change, and write nothing.
func WithDryRun() Option { return func(m *options) { m.dryRun = true } }

// WithCheckpoint makes Run keep its progress in the file at path
// (scan.WithCheckpoint), recording the plan as the checkpoint's job: a
// restarted Run skips the ranges finished, and a checkpoint written for
// another plan (or a dry run) is refused.
func WithCheckpoint(path string) Option { return func(m *options) { m.checkpoint = path } }

// WithWriteTimeout bounds each conditional write Run sends: one that gets
// no answer within d fails Run with a *scan.StallError (Step
// "CheckAndMutateRow"), as a read that stalls does (scan.WithStall, which
// watches reads only); so does the read of a cell whose write did not
// apply (Step "ReadRow"). 0, the default: no bound but the context's.
func WithWriteTimeout(d time.Duration) Option { return func(m *options) { m.writeStall = max(d, 0) } }

// WithExamples keeps up to n examples of changed cells, and as many of
// ambiguous ones, in Stats (default 5).
func WithExamples(n int) Option { return func(m *options) { m.maxExamples = max(n, 0) } }

// WithAllAmbiguous keeps every ambiguous cell the run reads in
// Stats.AmbiguousExamples, not only the first WithExamples: the list an
// operator resolves cell by cell (MoveCell, DeleteCell). Each takes memory
// (its row key and column) until the Migrator is dropped.
func WithAllAmbiguous() Option { return func(m *options) { m.allAmbiguous = true } }

// DefaultInflight is the number of conditional row mutations a Run keeps in
// flight per scan worker without WithInflight.
const DefaultInflight = 4

// WithInflight sets how many rows' conditional mutations Run keeps in
// flight per scan worker (default DefaultInflight): enough to hide the
// round trip, bounded so that memory and the load on the table are.
func WithInflight(n int) Option { return func(m *options) { m.inflight = n } }

// Migrator migrates the rows it is given, a row's cells at a time.
// MigrateRow is safe for concurrent use on different rows, which is how a
// scan engine's workers call it.
type Migrator struct {
	tbl    *bigtable.Table
	table  string
	plan   Plan
	lo, hi bigtable.Timestamp // in place: proven legacy at or before lo, proven bttl after hi
	now    bigtable.Timestamp // the instant expiry is judged at
	asOf   bigtable.Timestamp // DeleteExpired: cells expired at it may be deleted
	options

	total  tally        // this Migrator's, over every row it was given
	budget atomic.Int64 // DeleteExpired: deletions left (never more than ExpectExpired)
	// witnessGone and witnessNone count the finished ranges a resumed run
	// reads again (stillDone): their witness is gone, or they have none.
	witnessGone, witnessNone atomic.Int64
	// movesUndone holds the unfinished ranges (scan.Range) whose earlier
	// moves' witness stillDone found gone: their read again carries over
	// the earlier deletions only.
	movesUndone sync.Map
	// deletedEarlier holds, for the finished ranges stillDone has read
	// again (no witness, or a gone one), the deletions their record held
	// (int64 by scan.Range): carried over as DeletedBefore, so that a
	// restarted deletion run keeps counting them.
	deletedEarlier sync.Map

	mu           sync.Mutex
	examples     []Example
	ambiguous    []Example
	examplesFull atomic.Bool // examples holds maxExamples: no need to lock
}

// New checks plan (Plan.Validate; and, in place, that WrittenBefore plus
// the clock skew and ExpiredAsOf are not after now) and returns a
// Migrator for tbl, named table (as scan.Run takes it, for the
// checkpoint). Expiry is judged at the clock's time when New is called,
// the same for every cell of the run (Report.Now).
func New(tbl *bigtable.Table, table string, plan Plan, opts ...Option) (*Migrator, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	m := &Migrator{tbl: tbl, table: table, plan: plan, options: options{clock: systemClock{}, maxExamples: 5, inflight: DefaultInflight}}
	for _, o := range opts {
		o(&m.options)
	}
	if m.inflight < 1 {
		return nil, &PlanError{Field: "Inflight", Reason: fmt.Sprintf("%d: want at least 1", m.inflight)}
	}
	now := m.clock.Now()
	m.now = unixMicros(now)
	if plan.inPlace() {
		skew := plan.skew()
		lo, hi := plan.Window()
		m.lo, m.hi = unixMicros(lo), unixMicros(hi)
		// A moved cell lands after now; after hi too, so that a rerun
		// proves it a bttl timestamp.
		if plan.WrittenBefore.Add(skew).After(now) {
			return nil, &PlanError{Field: "WrittenBefore", Reason: fmt.Sprintf("%s plus the clock skew %s is after now (%s): "+
				"writers switched that late may still write real timestamps; run at or after %s",
				formatTime(plan.WrittenBefore), skew, formatTime(now), formatTime(plan.WrittenBefore.Add(skew)))}
		}
		if plan.Expired == DeleteExpired {
			if plan.ExpiredAsOf.After(now) {
				return nil, &PlanError{Field: "ExpiredAsOf", Reason: fmt.Sprintf("%s is after now (%s)", formatTime(plan.ExpiredAsOf), formatTime(now))}
			}
			m.asOf = unixMicros(plan.ExpiredAsOf)
			m.budget.Store(plan.ExpectExpired)
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
	// Expired: the cell is expired under the target and was left as it
	// is (KeepExpired).
	Expired bool
}

// Now is the instant the Migrator judges expiry at (the clock's when New
// was called): a dry run's Now is the ExpiredAsOf of a run deleting the
// expired cells it counted.
func (m *Migrator) Now() time.Time { return m.now.Time() }

// Stats counts what a run did (under WithDryRun: would do) to the cells
// of the source family it read.
type Stats struct {
	Rows, Cells int64
	// Moved cells got their new timestamp (in place) or were copied.
	Moved int64
	// OnTarget cells needed nothing: in place, live cells proven bttl
	// (stamped after WrittenBefore + ClockSkew, or with a write-time
	// companion: bttl writes and migrated cells); in a copy, cells whose
	// target cell (same column, new timestamp, same value) exists.
	OnTarget int64
	// ExpiredDeleted cells were expired under the target (at
	// ExpiredAsOf) and deleted (in place, DeleteExpired); ExpiredLeft were
	// expired and left as they are (KeepExpired, expired only after
	// ExpiredAsOf, or a copy, which never copies them). Only cells whose
	// provenance is proven are either.
	ExpiredDeleted, ExpiredLeft int64
	// Ambiguous cells (in place) are stamped inside the window in which
	// both legacy and bttl writers wrote (after FirstSwitch - ClockSkew,
	// at or before WrittenBefore + ClockSkew) with nothing to prove which
	// wrote them: never moved or deleted.
	Ambiguous int64
	// MovedBefore and DeletedBefore are the cells earlier runs moved and
	// deleted in the key ranges this run read again (ranges they left
	// unfinished, recorded in the checkpoint): this run finds the moved
	// ones on the target (counted in OnTarget too, while still stored),
	// so without these a resumed job's counts would not add up to what it
	// moved. A run killed in a range records nothing for it: what it
	// moved there is found on the target, counted in OnTarget only.
	MovedBefore, DeletedBefore int64
	// Changed cells were changed by someone else between the read and
	// the move (another value at their timestamp), or someone wrote a cell
	// on their new timestamp (the predicate did not match): skipped,
	// nothing overwritten; work remains, so they count in Unmoved.
	Changed int64
	// Gone cells were removed by a writer between the read and the move
	// (the predicate did not match and nothing is stored at the cell's
	// column and millisecond any more): nothing is left to do, so they are
	// not in Unmoved and do not make a run incomplete.
	Gone int64
	// Collisions: another cell already holds the new timestamp in that
	// column: not moved, never overwritten.
	Collisions int64
	// TooLargeToPin: values over about 10 KB, whose pinning predicate
	// would exceed filters.MaxFilterBytes (filters.ErrCellTooLargeToPin):
	// never moved or deleted unpinned; an expired one is counted here, not
	// in ExpiredLeft, so the count a deleting run expects is the cells it
	// can delete.
	TooLargeToPin int64
	// OutOfRange: the new timestamp is past strategy.MaxTimestamp or
	// before the epoch.
	OutOfRange int64
	// NotRealTimes: from real timestamps, cells stamped before
	// strategy.RealTimeFloor (2000): sequence numbers, not write times.
	NotRealTimes int64
	// Examples are the first changed cells (WithExamples);
	// AmbiguousExamples the first ambiguous ones (Old is the timestamp;
	// New is 0).
	Examples, AmbiguousExamples []Example
}

// Changes is how many cells were changed: moved or deleted.
func (s Stats) Changes() int64 { return s.Moved + s.ExpiredDeleted }

// Unmoved is how many cells still need a move that this run could not
// make (changed meanwhile, collisions, too large to pin, out of range,
// not real times, ambiguous): the run is not complete while it is above
// zero.
func (s Stats) Unmoved() int64 {
	return s.Changed + s.Collisions + s.TooLargeToPin + s.OutOfRange + s.NotRealTimes + s.Ambiguous
}

// Stats is what the Migrator has done so far, over every row it was
// given (by Run, or MigrateRow directly).
func (m *Migrator) Stats() Stats {
	m.mu.Lock()
	ex, amb := append([]Example(nil), m.examples...), append([]Example(nil), m.ambiguous...)
	m.mu.Unlock()
	st := m.total.stats()
	st.Examples, st.AmbiguousExamples = ex, amb
	return st
}

// tally counts cells by outcome; safe for concurrent use.
type tally struct {
	rows, cells, moved, onTarget, expiredDeleted, expiredLeft atomic.Int64
	changed, collisions, tooLarge, outOfRange, notReal        atomic.Int64
	ambiguous, gone                                           atomic.Int64
	movedBefore, deletedBefore                                atomic.Int64
}

func (t *tally) stats() Stats {
	return Stats{
		Rows: t.rows.Load(), Cells: t.cells.Load(), Moved: t.moved.Load(), OnTarget: t.onTarget.Load(),
		ExpiredDeleted: t.expiredDeleted.Load(), ExpiredLeft: t.expiredLeft.Load(), Changed: t.changed.Load(),
		Collisions: t.collisions.Load(), TooLargeToPin: t.tooLarge.Load(), OutOfRange: t.outOfRange.Load(),
		NotRealTimes: t.notReal.Load(), Ambiguous: t.ambiguous.Load(), Gone: t.gone.Load(),
		MovedBefore: t.movedBefore.Load(), DeletedBefore: t.deletedBefore.Load(),
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
	ambiguous, gone                                           counter
	// last keeps the range's latest move, its witness (nil outside Run).
	last *witnessSlot
}

// Witness is a cell a range's run moved: its row, target family, column
// and new timestamp. While it is stored the range's moves were not undone
// (a restore from a backup, a table re-created under the same name): the
// checkpoint records it with the range's result, a resumed run skips the
// range only if it is still there (scan.WithResumeCheck), and a shard's
// report carries its ranges' (ShardReport.Witnesses).
type Witness struct {
	Row    []byte             `json:"row"` // bytes: keys need not be UTF-8
	Family string             `json:"family"`
	Column []byte             `json:"column"`
	TS     bigtable.Timestamp `json:"ts"`
}

// Stored reports whether the witness cell is still stored in tbl (any
// value at its column and millisecond).
func (w Witness) Stored(ctx context.Context, tbl *bigtable.Table) (bool, error) {
	col := string(w.Column)
	f := bigtable.ChainFilters( // that column (binary-safe, as filters pins it), that timestamp
		bigtable.ColumnRangeFilter(w.Family, col, col+"\x00"),
		bigtable.TimestampRangeFilterMicros(strategy.Millis(w.TS), strategy.MilliEnd(strategy.Millis(w.TS))),
		bigtable.StripValueFilter())
	row, err := tbl.ReadRow(ctx, string(w.Row), bigtable.RowFilter(f))
	if err != nil {
		return false, bttlerr.Wrap(err, "migrate: read the witness of a finished range, row %s", keytext.Quote(string(w.Row)))
	}
	return len(row[w.Family]) > 0, nil
}

// witnessSlot keeps the range's latest move.
type witnessSlot struct {
	mu sync.Mutex
	w  *Witness
}

func (s *witnessSlot) set(w Witness) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.w = &w
	s.mu.Unlock()
}

func (s *witnessSlot) get() *Witness {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w
}

// rangeResult is a range's result as the checkpoint records it: its
// counts (what Report.Earlier sums) and its witness.
type rangeResult struct {
	Stats
	Witness *Witness `json:"witness,omitempty"`
}

// stillDone is Run's scan.WithResumeCheck: a range an earlier run finished
// is skipped only if its witness is still stored. A range with none (it
// moved nothing: empty, already on the target, or only deletions or
// counts) proves nothing and is read again; so is a range whose witness a
// writer or GC removed since, which costs a read and moves nothing twice.
//
// It is also asked about a range an earlier run left unfinished (its
// result records a cell not moved): whether that run's moves, carried
// over to this run's read as MovedBefore, are still stored. With no
// witness there is nothing to check; with one gone (a restore undid the
// moves, or a writer deleted the cell) the moves are not carried over,
// as this run finds any restored cell to move again. The result is kept
// either way: its deletions are still carried over (a restarted deletion
// run counts them against ExpectExpired: counting a restored cell's
// deletion twice errs toward refusing).
func (m *Migrator) stillDone(ctx context.Context, rg scan.Range, result json.RawMessage) (bool, error) {
	var rr rangeResult
	err := json.Unmarshal(result, &rr)
	unfinished := err == nil && rr.Unmoved() > 0
	if err == nil && !unfinished {
		if d := rr.ExpiredDeleted + rr.DeletedBefore; d > 0 {
			m.deletedEarlier.Store(rg, d) // used only if read again
		}
	}
	if err != nil || rr.Witness == nil {
		if unfinished {
			return true, nil
		}
		m.witnessNone.Add(1)
		return false, nil
	}
	stored, err := rr.Witness.Stored(ctx, m.writer())
	if err != nil {
		return false, err
	}
	if !stored {
		if unfinished {
			m.movesUndone.Store(rg, true)
			return true, nil
		}
		m.witnessGone.Add(1)
	}
	return stored, nil
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
		c.ambiguous = append(c.ambiguous, &t.ambiguous)
		c.gone = append(c.gone, &t.gone)
	}
	return c
}

func (m *Migrator) example(x Example) {
	if m.examplesFull.Load() {
		return
	}
	m.mu.Lock()
	if len(m.examples) < m.maxExamples {
		m.examples = append(m.examples, x)
	}
	if len(m.examples) >= m.maxExamples {
		m.examplesFull.Store(true)
	}
	m.mu.Unlock()
}

func (m *Migrator) ambiguousExample(x Example) {
	m.mu.Lock()
	if m.allAmbiguous || len(m.ambiguous) < m.maxExamples {
		m.ambiguous = append(m.ambiguous, x)
	}
	m.mu.Unlock()
}

// Report is what Run did.
type Report struct {
	// Stats are this run's: the rows it read and what it did to them.
	Stats
	// Earlier sums what earlier runs recorded in the checkpoint for the
	// ranges they finished, which this run did not read again. A range
	// where a cell was left unmoved is never finished: a rerun reads it
	// again, so its cells are counted by the run that reads them last.
	Earlier Stats
	// Now is the instant expiry was judged at (Migrator.Now).
	Now time.Time
	// Scan is the scan engine's summary: ranges, which are done, which
	// were resumed from the checkpoint.
	Scan *scan.Summary
	// RecordedDeletions (a restarted deletion run) is what the checkpoint
	// records earlier runs of the job deleted, in every range: the bound
	// on what is left to delete (not Stats.DeletedBefore, the part carried
	// over in the ranges this run read again).
	RecordedDeletions int64
	// Undone counts the ranges the checkpoint recorded finished that this
	// run read again because the last cell moved there is no longer
	// stored (the table was restored or re-created since, or a writer or
	// GC removed that cell); Unproven those read again because they moved
	// nothing, so nothing shows their state is still the one recorded.
	Undone, Unproven int
}

// Run scans the table with the scan engine (package scan: its options
// set the workers, the cells/s limit, the shard, the key range and the
// checkpoint) and migrates every row, keeping up to WithInflight rows'
// mutations in flight per worker. The source family (and, in a copy, the
// target family) is all that is read. With WithCheckpoint, the
// checkpoint's job is the plan: a checkpoint of another plan is refused,
// and a restarted run skips the ranges finished and reads the others again
// (which moves nothing twice: see the package doc); a range where a cell
// was left unmoved (Stats.Unmoved) is not recorded finished. Under
// DeleteExpired, Run first counts the expired cells (a read-only pass over
// the same ranges, without the checkpoint) and returns an
// *ExpiredCountError, having written nothing, unless the count is
// Plan.ExpectExpired; restarted with the job's checkpoint (an earlier run
// passed that check), unless the count left plus the deletions the
// checkpoint records is at most Plan.ExpectExpired, and it then deletes
// at most the difference. The Report is returned also with an error.
func (m *Migrator) Run(ctx context.Context, opts ...scan.Option) (*Report, error) {
	rep := &Report{Now: m.Now()}
	if m.plan.Expired == DeleteExpired && !m.dryRun {
		counter := &Migrator{tbl: m.tbl, table: m.table, plan: m.plan, lo: m.lo, hi: m.hi, now: m.now, asOf: m.asOf,
			options: options{clock: m.clock, dryRun: true, inflight: m.inflight}}
		counter.budget.Store(math.MaxInt64)
		if _, err := counter.run(ctx, opts); err != nil {
			return rep, err
		}
		// A restarted deletion run cannot count the whole set again:
		// earlier runs deleted some, and a kill loses the record of the
		// deletions in the ranges it interrupted. Its checkpoint exists
		// only if an earlier run of this job passed the exact count (the
		// record is written after it). The set expired as of ExpiredAsOf
		// only shrinks, so what is left plus what the record says was
		// deleted is at most that count, and the deletions left to make
		// are bounded by the difference.
		var deleted int64
		// rec is nil without a checkpoint (migrate's or a scan option's).
		rec, err := scan.Recorded(ctx, m.table, append(m.withJob(opts), scan.WithFilter(m.Filter()))...)
		if err != nil {
			return rep, err
		}
		for _, r := range rangesOf(rec) {
			var st Stats
			if r.Result != nil && json.Unmarshal(r.Result, &st) == nil {
				// A range read again records the deletions of the
				// earlier attempts as DeletedBefore.
				deleted += st.ExpiredDeleted + st.DeletedBefore
			}
		}
		n := counter.Stats().ExpiredDeleted
		switch {
		case rec == nil && n != m.plan.ExpectExpired:
			return rep, &ExpiredCountError{Expected: m.plan.ExpectExpired, Found: n, AsOf: m.plan.ExpiredAsOf}
		case rec != nil && n+deleted > m.plan.ExpectExpired:
			return rep, &ExpiredCountError{Expected: m.plan.ExpectExpired, Found: n, Deleted: deleted, Restarted: true, AsOf: m.plan.ExpiredAsOf}
		case rec != nil:
			m.budget.Store(m.plan.ExpectExpired - deleted)
		}
		rep.RecordedDeletions = deleted
	}
	sum, err := m.run(ctx, m.withJob(opts))
	rep.Stats, rep.Scan = m.Stats(), sum
	rep.Undone, rep.Unproven = int(m.witnessGone.Load()), int(m.witnessNone.Load())
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

// run scans with up to m.inflight rows in flight per range; it returns
// once every row it started is done.
func (m *Migrator) run(ctx context.Context, opts []scan.Option) (*scan.Summary, error) {
	opts = append(append([]scan.Option(nil), opts...), scan.WithFilter(m.Filter()))
	var all sync.WaitGroup
	defer all.Wait() // a scan stopped by an error may leave rows in flight
	return scan.RunResumedRanges(ctx, m.tbl, m.table, func(r scan.Range, prior json.RawMessage) (scan.RowFunc, func() (json.RawMessage, error)) {
		var rg tally
		n := countersOf(&m.total, &rg)
		// An earlier run left this range unfinished: what it moved and
		// deleted there is carried over (the rows no longer show it),
		// its moves only while their witness is stored.
		var was rangeResult
		if d, ok := m.deletedEarlier.Load(r); ok && len(prior) == 0 {
			// A finished range read again: what it moved proves nothing
			// any more (the witness is missing or gone), what it deleted
			// stays counted (a restore's cells deleted again count twice,
			// which errs toward refusing).
			was.DeletedBefore = d.(int64)
			for _, t := range []*tally{&m.total, &rg} {
				t.deletedBefore.Add(was.DeletedBefore)
			}
		}
		if len(prior) > 0 && json.Unmarshal(prior, &was) == nil {
			if _, undone := m.movesUndone.Load(r); undone {
				was.Moved, was.MovedBefore, was.Witness = 0, 0, nil
			}
			for _, t := range []*tally{&m.total, &rg} {
				t.movedBefore.Add(was.Moved + was.MovedBefore)
				t.deletedBefore.Add(was.ExpiredDeleted + was.DeletedBefore)
			}
		}
		n.last = &witnessSlot{}
		if was.Witness != nil {
			// The earlier moves' witness (checked still stored by
			// stillDone) stands for them until this run moves a cell.
			n.last.set(*was.Witness)
		}
		var (
			wg    sync.WaitGroup
			sem   = make(chan struct{}, m.inflight)
			mu    sync.Mutex
			first error
		)
		failed := func() error { mu.Lock(); defer mu.Unlock(); return first }
		return func(ctx context.Context, r bigtable.Row) error {
				if err := failed(); err != nil {
					return err
				}
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				wg.Add(1)
				all.Add(1)
				go func() {
					defer all.Done()
					defer wg.Done()
					defer func() { <-sem }()
					if err := m.migrateRow(ctx, r, n); err != nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
					}
				}()
				return nil
			}, func() (json.RawMessage, error) {
				wg.Wait()
				if err := failed(); err != nil {
					return nil, err
				}
				st := rg.stats()
				res, err := json.Marshal(rangeResult{Stats: st, Witness: n.last.get()})
				if err == nil && st.Unmoved() > 0 {
					// Not finished: a rerun with the checkpoint reads it again.
					err = fmt.Errorf("%w: %d cell(s) not moved", scan.ErrUnfinished, st.Unmoved())
				}
				return res, err
			}
	}, opts...)
}

// withJob adds the checkpoint (WithCheckpoint) and records the plan as
// its job, so that a checkpoint is never resumed by another plan or a dry
// run: also one the caller gave as a scan option (the public
// scan.WithCheckpoint takes no job), which would otherwise record none.
func (m *Migrator) withJob(opts []scan.Option) []scan.Option {
	opts = append([]scan.Option(nil), opts...)
	if m.checkpoint != "" {
		opts = append(opts, scan.WithCheckpoint(m.checkpoint, nil))
	}
	opts = append(opts, scan.WithJob(m.Job()))
	if m.dryRun {
		// A dry run writes nothing to witness: its finished ranges' counts
		// are what they read, as of its clock (a run that writes counts
		// again before it deletes anything).
		return opts
	}
	return append(opts, scan.WithResumeCheck(m.stillDone))
}

// Job is a run's plan as its checkpoint records it (the checkpoint's job)
// and its JSON report (ShardReport.Job) carries it: two runs are of one
// job when their Jobs are equal.
type Job struct {
	// Migrate is Plan.String: the family, the source and target
	// policies, in place or the family copied into.
	Migrate string `json:"migrate"`
	// TTL is the TTL rules (TTLRule.String), from real timestamps.
	TTL               []string `json:"ttl,omitempty"`
	FirstSwitch       string   `json:"first_switch,omitempty"`
	WrittenBefore     string   `json:"written_before,omitempty"`
	ClockSkew         string   `json:"clock_skew,omitempty"`
	WriteTimeComplete bool     `json:"write_time_complete,omitempty"`
	Expired           string   `json:"expired"`
	ExpiredAsOf       string   `json:"expired_as_of,omitempty"`
	DryRun            bool     `json:"dry_run,omitempty"`
}

// Job is the Migrator's plan as its checkpoint records it.
func (m *Migrator) Job() Job {
	p := m.plan
	job := Job{Migrate: p.String(), TTL: p.TTL.strings(), WriteTimeComplete: p.WriteTimeComplete, Expired: p.Expired.String(), DryRun: m.dryRun}
	if p.inPlace() {
		job.FirstSwitch, job.WrittenBefore, job.ClockSkew = formatTime(p.FirstSwitch), formatTime(p.WrittenBefore), p.skew().String()
	}
	if !p.ExpiredAsOf.IsZero() {
		job.ExpiredAsOf = formatTime(p.ExpiredAsOf)
	}
	return job
}

// rangesOf is s's ranges (none for a nil s).
func rangesOf(s *scan.Summary) []scan.RangeResult {
	if s == nil {
		return nil
	}
	return s.Ranges
}

// Plus returns s with o's counts added (the examples are s's): the
// counts of two runs over disjoint key ranges, such as two shards.
func (s Stats) Plus(o Stats) Stats { return s.plus(o) }

func (s Stats) plus(o Stats) Stats {
	s.Rows += o.Rows
	s.Cells += o.Cells
	s.Moved += o.Moved
	s.OnTarget += o.OnTarget
	s.ExpiredDeleted += o.ExpiredDeleted
	s.ExpiredLeft += o.ExpiredLeft
	s.Changed += o.Changed
	s.Gone += o.Gone
	s.Collisions += o.Collisions
	s.TooLargeToPin += o.TooLargeToPin
	s.OutOfRange += o.OutOfRange
	s.NotRealTimes += o.NotRealTimes
	s.Ambiguous += o.Ambiguous
	s.MovedBefore += o.MovedBefore
	s.DeletedBefore += o.DeletedBefore
	return s
}

// cell is one stored cell of a column: its timestamp and value.
type cell struct {
	ts    bigtable.Timestamp
	value []byte
}

type actionKind uint8

const (
	actMove   actionKind = iota // delete the old cell (in place) and set it at to
	actDelete                   // delete an expired cell (and its write-time companion)
)

// action is one change to a row, planned from what the row held when read.
type action struct {
	kind      actionKind
	row, q    string
	c         cell
	to        bigtable.Timestamp
	companion bool // actDelete: the cell's write-time companion goes too
}

// provenance is what a stored cell in place is proven to be.
type provenance uint8

const (
	legacy    provenance = iota // a real write time
	bttlWrite                   // an expiry instant: a bttl write or a cell moved already
	ambiguous                   // could be either
)

// provenance classifies a cell of the source family stamped ts (in
// place); companion says its write-time companion is stored.
func (m *Migrator) provenance(ts bigtable.Timestamp, companion bool) provenance {
	switch {
	case ts > m.hi, companion:
		return bttlWrite
	case ts <= m.lo, m.plan.WriteTimeComplete:
		return legacy
	}
	return ambiguous
}

// MigrateRow migrates the source family's cells of one row, read with
// Filter: one conditional row mutation for all of them (more when the
// predicate would pass filters.MaxFilterBytes), whose predicate pins every
// old cell (filters.Cell) and requires every target slot empty, so nothing
// a concurrent writer wrote is overwritten. When it does not match, each
// cell is tried on its own, so that only the changed ones are skipped. It
// returns only errors of the RPCs; every cell it cannot move is counted in
// Stats.
func (m *Migrator) MigrateRow(ctx context.Context, r bigtable.Row) error {
	return m.migrateRow(ctx, r, countersOf(&m.total))
}

func (m *Migrator) migrateRow(ctx context.Context, r bigtable.Row, n *counters) error {
	src := r[m.plan.Family]
	if len(src) == 0 {
		return nil
	}
	row := src[0].Row
	// In a family recording write times, companions are evidence, not
	// cells: one at a cell's millisecond proves a bttl write.
	withCompanions := m.plan.inPlace() && m.plan.To.HasCompanions()
	// A copy into a family without write times leaves the source's
	// companions: there they would be columns of data, served.
	dropCompanions := !m.plan.inPlace() && m.plan.From.HasCompanions() && !m.plan.To.HasCompanions()
	var companions map[string]map[bigtable.Timestamp]bool
	// Cells of a column arrive together, newest first: a column is a run
	// of items, held in one slice for the row.
	type column struct {
		q          string
		start, end int // in cells
	}
	cells := make([]cell, 0, len(src))
	cols := make([]column, 0, len(src))
	prefix := len(m.plan.Family) + 1
	for _, it := range src {
		q := it.Column[prefix:]
		if dropCompanions && strings.HasPrefix(q, strategy.WriteTimePrefix) {
			continue
		}
		if withCompanions && strings.HasPrefix(q, strategy.WriteTimePrefix) {
			of := q[len(strategy.WriteTimePrefix):]
			if companions == nil {
				companions = map[string]map[bigtable.Timestamp]bool{}
			}
			if companions[of] == nil {
				companions[of] = map[bigtable.Timestamp]bool{}
			}
			companions[of][strategy.Millis(it.Timestamp)] = true
			continue
		}
		if len(cols) == 0 || cols[len(cols)-1].q != q {
			cols = append(cols, column{q: q, start: len(cells)})
		}
		cells = append(cells, cell{it.Timestamp, it.Value})
		cols[len(cols)-1].end = len(cells)
	}
	if len(cols) == 0 {
		return nil
	}
	n.rows.Add(1)
	var byTgt map[string][]cell
	if !m.plan.inPlace() {
		byTgt = map[string][]cell{}
		for _, it := range r[m.plan.ToFamily] {
			q := strings.TrimPrefix(it.Column, m.plan.ToFamily+":")
			byTgt[q] = append(byTgt[q], cell{it.Timestamp, it.Value})
		}
	}
	acts := make([]action, 0, len(cells))
	for _, c := range cols {
		cs := cells[c.start:c.end:c.end]
		target := cs
		if byTgt != nil {
			target = byTgt[c.q]
		}
		acts = m.planColumn(n, row, c.q, cs, target, companions[c.q], acts)
	}
	return m.applyRow(ctx, n, row, r[m.plan.target()], acts)
}

// occupancy is a column's timestamps and values as the planned moves
// leave them: a short list (columns hold few versions) or, past a few
// dozen, a map.
type occupancy struct {
	list []cell
	m    map[bigtable.Timestamp][]byte
}

func newOccupancy(cells []cell) *occupancy {
	o := &occupancy{}
	if len(cells) > 32 {
		o.m = make(map[bigtable.Timestamp][]byte, len(cells))
		for _, c := range cells {
			o.m[c.ts] = c.value
		}
		return o
	}
	o.list = append(make([]cell, 0, len(cells)+1), cells...)
	return o
}

func (o *occupancy) get(ts bigtable.Timestamp) ([]byte, bool) {
	if o.m != nil {
		v, ok := o.m[ts]
		return v, ok
	}
	for _, c := range o.list {
		if c.ts == ts {
			return c.value, true
		}
	}
	return nil, false
}

func (o *occupancy) set(ts bigtable.Timestamp, v []byte) {
	if o.m != nil {
		o.m[ts] = v
		return
	}
	o.list = append(o.list, cell{ts, v})
}

func (o *occupancy) del(ts bigtable.Timestamp) {
	if o.m != nil {
		delete(o.m, ts)
		return
	}
	for i, c := range o.list {
		if c.ts == ts {
			o.list = append(o.list[:i], o.list[i+1:]...)
			return
		}
	}
}

// planColumn plans one column's changes. Every cell of a column moves by
// the same amount (TTL rules are per row prefix and column), so moving
// the newest first when cells move later (the oldest first when they move
// earlier) never lands a cell on one not yet moved; occupied tracks the
// target column as the moves go, in the order the mutation applies them.
func (m *Migrator) planColumn(n *counters, row, q string, cells, target []cell, companions map[bigtable.Timestamp]bool, acts []action) []action {
	n.cells.Add(int64(len(cells)))
	occupied := newOccupancy(target)
	// In place, the versions past the newest SourceMaxVersions (cells
	// arrive newest first) are dead under the family's rule, stored until
	// GC runs: moved, they would be live again under the target's.
	var dead bigtable.Timestamp = -1
	if k := m.plan.SourceMaxVersions; k > 0 && m.plan.inPlace() && len(cells) > k {
		dead = cells[k-1].ts
	}
	if to, ok := m.plan.newTimestamp(row, q, cells[0].ts); ok && to < cells[0].ts {
		cells = append([]cell(nil), cells...)
		sort.Slice(cells, func(i, j int) bool { return cells[i].ts < cells[j].ts })
	}
	for _, c := range cells {
		acts = m.planCell(n, row, q, c, companions != nil && companions[strategy.Millis(c.ts)], c.ts < dead, occupied, acts)
	}
	return acts
}

func (m *Migrator) planCell(cnt *counters, row, q string, c cell, companion, dead bool, occupied *occupancy, acts []action) []action {
	p := m.plan
	if p.fromReal() && c.ts < strategy.RealTimeFloor {
		cnt.notReal.Add(1)
		return acts
	}
	del := action{kind: actDelete, row: row, q: q, c: c, companion: companion}
	if p.inPlace() {
		switch m.provenance(c.ts, companion) {
		case ambiguous:
			cnt.ambiguous.Add(1)
			m.ambiguousExample(Example{Row: row, Column: q, Old: c.ts})
			return acts
		case bttlWrite:
			if p.To.IsLive(c.ts, m.now) {
				cnt.onTarget.Add(1)
				return acts
			}
			return m.expired(cnt, c.ts, del, occupied, acts)
		}
		if dead {
			return m.expired(cnt, 0, del, occupied, acts) // dead already: expired at any instant
		}
	}
	n, ok := p.newTimestamp(row, q, c.ts)
	if !ok {
		cnt.outOfRange.Add(1)
		return acts
	}
	if !p.To.IsLive(n, m.now) {
		if p.inPlace() {
			return m.expired(cnt, n, del, occupied, acts)
		}
		cnt.expiredLeft.Add(1)
		return acts
	}
	if v, taken := occupied.get(n); taken {
		if !p.inPlace() && bytes.Equal(v, c.value) {
			cnt.onTarget.Add(1) // copied by an earlier run
		} else {
			cnt.collisions.Add(1)
		}
		return acts
	}
	if p.inPlace() {
		occupied.del(c.ts)
	}
	occupied.set(n, c.value)
	return append(acts, action{kind: actMove, q: q, c: c, to: n})
}

// expired plans the deletion of a cell proven expired at expiry e when the
// plan asks for it and e is at or before ExpiredAsOf (never more than
// ExpectExpired of them); otherwise the cell is left, counted.
func (m *Migrator) expired(cnt *counters, e bigtable.Timestamp, del action, occupied *occupancy, acts []action) []action {
	// A cell too large to pin can never be deleted (nothing is, unpinned):
	// counted so by every run, dry or not, never in the expired count a
	// deleting run is held to.
	if _, err := filters.Cell(m.plan.Family, del.q, del.c.ts, del.c.value); errors.Is(err, filters.ErrCellTooLargeToPin) {
		cnt.tooLarge.Add(1)
		return acts
	}
	if m.plan.Expired == DeleteExpired && !m.plan.To.IsLive(e, m.asOf) && m.budget.Add(-1) >= 0 {
		occupied.del(del.c.ts)
		return append(acts, del)
	}
	cnt.expiredLeft.Add(1)
	m.example(Example{Row: del.row, Column: del.q, Old: del.c.ts, Expired: true})
	return acts
}

// applyRow sends the row's actions, as many in one conditional mutation as
// the predicate's size allows; read is the target family's cells as read.
func (m *Migrator) applyRow(ctx context.Context, cnt *counters, row string, read []bigtable.ReadItem, acts []action) error {
	var rm filters.RowMove
	batch := make([]action, 0, len(acts))
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := m.send(ctx, cnt, row, &rm, read, batch)
		rm, batch = filters.RowMove{}, batch[len(batch):]
		return err
	}
	for _, a := range acts {
		for {
			ok, err := m.pin(&rm, a)
			if errors.Is(err, filters.ErrCellTooLargeToPin) {
				cnt.tooLarge.Add(1) // never moved or deleted unpinned
				break
			}
			if err != nil {
				return err
			}
			if ok {
				batch = append(batch, a)
				break
			}
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// pin adds a's cell (and, for a move, its target slot) to rm.
func (m *Migrator) pin(rm *filters.RowMove, a action) (bool, error) {
	if a.kind == actMove {
		return rm.Add(m.plan.Family, a.q, a.c.ts, a.c.value, m.plan.target(), a.to)
	}
	return rm.Add(m.plan.Family, a.q, a.c.ts, a.c.value, "", 0)
}

// send applies batch guarded by rm; when rm does not match, some cell
// changed meanwhile and each is tried on its own. When the target slots
// are several and the target family as read (read) holds nothing in
// their span, the slots are checked as the span (RowMove.SpanFilter: one
// filter for all, matching only where rm's full predicate does); when
// that does not match, the cells tried on their own have their exact
// slots, so a cell written into the span but on no slot since the read
// stops nothing from moving.
func (m *Migrator) send(ctx context.Context, cnt *counters, row string, rm *filters.RowMove, read []bigtable.ReadItem, batch []action) error {
	mut := bigtable.NewMutation()
	for _, a := range batch {
		ms := strategy.Millis(a.c.ts)
		if a.kind == actDelete || m.plan.inPlace() {
			mut.DeleteTimestampRange(m.plan.Family, a.q, ms, strategy.MilliEnd(ms))
		}
		if a.kind == actMove {
			mut.Set(m.plan.target(), a.q, a.to, a.c.value)
		} else if a.companion {
			mut.DeleteTimestampRange(m.plan.Family, strategy.WriteTimeColumn(a.q), ms, strategy.MilliEnd(ms))
		}
	}
	pred := rm.Filter
	if moves(batch) > 1 {
		if sp, ok := rm.Span(); ok && !holdsAny(sp, read) {
			pred = rm.SpanFilter
		}
	}
	applied, err := m.apply(ctx, row, pred(), mut)
	if err != nil {
		return bttlerr.Wrap(err, "migrate row %s, %d cell(s) from column %s, timestamp %s", keytext.Quote(row), len(batch), keytext.Quote(batch[0].q), formatTimestamp(batch[0].c.ts))
	}
	if !applied {
		if len(batch) == 1 {
			gone, err := m.gone(ctx, row, batch[0])
			if err != nil {
				return err
			}
			if gone {
				cnt.gone.Add(1)
			} else {
				cnt.changed.Add(1)
			}
			return nil
		}
		for _, a := range batch {
			var one filters.RowMove
			if _, err := m.pin(&one, a); err != nil {
				return err
			}
			if err := m.send(ctx, cnt, row, &one, read, []action{a}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, a := range batch {
		if a.kind == actMove {
			cnt.moved.Add(1)
			cnt.last.set(Witness{Row: []byte(row), Family: m.plan.target(), Column: []byte(a.q), TS: a.to})
			m.example(Example{Row: row, Column: a.q, Old: a.c.ts, New: a.to})
		} else {
			cnt.expiredDeleted.Add(1)
			m.example(Example{Row: row, Column: a.q, Old: a.c.ts, Deleted: true})
		}
	}
	return nil
}

// gone reports whether a's cell is no longer stored at all: nothing at
// its column and millisecond (a writer deleted it, or GC collected it),
// so nothing is left to move or delete. A cell still there, changed or
// not, leaves work (a rerun sees what blocks it).
func (m *Migrator) gone(ctx context.Context, row string, a action) (bool, error) {
	ms := strategy.Millis(a.c.ts)
	// Bounded as the write is (WithWriteTimeout): the scan's stall watch
	// sees nothing of it.
	rctx := ctx
	if m.writeStall > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeoutCause(ctx, m.writeStall, errWriteStalled)
		defer cancel()
	}
	r, err := m.writer().ReadRow(rctx, row, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(m.plan.Family, a.q, a.q+"\x00"),
		bigtable.TimestampRangeFilterMicros(ms, strategy.MilliEnd(ms)),
		bigtable.StripValueFilter())))
	if err != nil {
		if m.writeStall > 0 && (status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)) {
			<-rctx.Done() // gRPC's deadline can fire just before the context's (see apply)
		}
		if ctx.Err() == nil && errors.Is(context.Cause(rctx), errWriteStalled) {
			return false, &scan.StallError{Interval: m.writeStall, Step: "ReadRow"}
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", ctx.Err(), err) // as in apply
		}
		return false, bttlerr.Wrap(err, "migrate row %s: read column %s, timestamp %s again", keytext.Quote(row), keytext.Quote(a.q), formatTimestamp(a.c.ts))
	}
	return len(r[m.plan.Family]) == 0, nil
}

// moves is how many of acts are moves.
func moves(acts []action) int {
	n := 0
	for _, a := range acts {
		if a.kind == actMove {
			n++
		}
	}
	return n
}

// holdsAny reports whether any of items (cells of one family) lies in s.
func holdsAny(s filters.Span, items []bigtable.ReadItem) bool {
	prefix := len(s.Family) + 1
	for _, it := range items {
		if len(it.Column) >= prefix && s.Holds(it.Column[:prefix-1], it.Column[prefix:], it.Timestamp) {
			return true
		}
	}
	return false
}

// apply sends mut guarded by pin, and reports whether the pinned cells
// were there (dry runs send nothing and assume they were).
func (m *Migrator) apply(ctx context.Context, row string, pin bigtable.Filter, mut *bigtable.Mutation) (bool, error) {
	if m.dryRun {
		return true, nil
	}
	var matched bool
	cond := bigtable.NewCondMutation(pin, mut, nil)
	wctx := ctx
	if m.writeStall > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, m.writeStall, errWriteStalled)
		defer cancel()
	}
	if err := m.writer().Apply(wctx, row, cond, bigtable.GetCondMutationResult(&matched)); err != nil {
		if m.writeStall > 0 && (status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)) {
			// gRPC's own deadline timer can fire just before the
			// context's: wait for the context (bounded by writeStall) so
			// its cause says which deadline it was.
			<-wctx.Done()
		}
		if ctx.Err() == nil && errors.Is(context.Cause(wctx), errWriteStalled) {
			return false, &scan.StallError{Interval: m.writeStall, Step: "CheckAndMutateRow"}
		}
		if ctx.Err() != nil {
			// gRPC reports the call as a status that does not wrap it.
			return false, fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return false, err
	}
	return matched, nil
}

// errWriteStalled is the cause of a write's context WithWriteTimeout ended.
var errWriteStalled = errors.New("write timeout passed")

// unixMicros is t as a timestamp: not bigtable.Time, which goes through
// UnixNano and wraps outside the years 1678-2262.
func unixMicros(t time.Time) bigtable.Timestamp { return bigtable.Timestamp(t.UnixMicro()) }

func formatTimestamp(ts bigtable.Timestamp) string {
	if ts >= strategy.RealTimeFloor {
		return formatTime(ts.Time())
	}
	return fmt.Sprintf("%d", ts)
}
