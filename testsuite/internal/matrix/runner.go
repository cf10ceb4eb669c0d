package matrix

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/model"
	"github.com/bttl/bttl/ttlclient"
)

// Clock is the clock the Target's table uses, which the suite moves.
type Clock interface {
	Now() time.Time
	Set(time.Time)
}

// The suite's table: one family per strategy, the age ones with a union
// max-versions rule or single-value mode on top, a pure age family, and an
// unmanaged family. The max ages are seconds, so cells expire, and the
// server's GC collects them, within a run. The table is kept small (few
// families, rows, columns) because bttest compiles each family regex of the
// read filter once per cell: every family and cell costs on every read.
const (
	FamOne    = "one"   // one-second expiry, default TTL 1.5s, + max versions 2, + write time
	FamDef    = "def"   // default expiry D = 1.5s, + write time, + idle TTL 300ms (debounce 0.5)
	FamDefSV  = "defsv" // default expiry D = 2s, single-value
	FamSeq    = "seq"   // sequence numbers, keep 3
	FamPlain  = "plain" // unmanaged
	numRows   = 10      // row keys r0..r9
	columnSet = "abcd"  // column qualifiers
	// keepColumn holds the cell keepRow writes so no row is ever empty.
	keepColumn = "keep"
)

// Schema is the suite's table schema.
func Schema() strategy.Schema {
	return strategy.Schema{
		FamOne: strategy.OneSecond(strategy.WithDefaultTTL(1500*time.Millisecond), strategy.WithMaxVersions(2), strategy.WithWriteTime()),
		FamDef: strategy.DefaultExpiry(1500*time.Millisecond, strategy.WithWriteTime(),
			strategy.WithIdleTTL(300*time.Millisecond, 0.5)),
		FamDefSV: strategy.DefaultExpiry(2*time.Second, strategy.SingleValue()),
		FamSeq:   strategy.Sequence(3),
		FamPlain: strategy.Unmanaged(),
	}
}

// families is Schema's families in the order the suite draws them.
var families = []string{FamOne, FamDef, FamDefSV, FamSeq, FamPlain}

// Config is one run of the suite.
type Config struct {
	Seed   uint64
	Ops    int // steps; each is one operation followed by reads
	Target Target
	Clock  Clock
	// Schema is the table's schema (default Schema()), and Families its
	// families in the order the suite draws them (default: Schema's order,
	// or Schema's keys sorted). It must have FamPlain, unmanaged: the
	// suite keeps every row alive with a cell there.
	Schema   strategy.Schema
	Families []string
	// Semantics is what the Target's path can express (model.Semantics):
	// the zero value for ttlclient, Wire for a plain client through the
	// wire guard, whose ApplyBulk is also refused whole when one row is.
	Semantics model.Semantics
	// Raw, when set, is the same table through the raw client: every
	// FullCheckEvery steps the suite checks that the server stores nothing
	// the model does not, and that every cell it no longer stores is one its
	// GC may collect.
	Raw            *bigtable.Table
	FullCheckEvery int // default 100
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
	// WriteTimeAfterRefresh: after each time-to-idle refresh of a cell of
	// a write-time family, ask the Target (an Expirer) for the cell's
	// write time with the timestamp the read returned (issue 26 item 10).
	WriteTimeAfterRefresh bool
	// FlushIdle, when set, waits for the Target's time-to-idle refreshes
	// (ttlclient.Client.FlushIdleRefreshes): after every read the suite
	// waits for them and applies to the model the refreshes that read
	// queued (FamDef has an idle TTL). Leave it nil only for a Target
	// whose reads do not go through the library's read path.
	FlushIdle func(context.Context) error
	// Replication, when set, is the replicated instance under the Target
	// (replicated.go): reads may return a lagging cluster's state.
	Replication *Replication
	// Idle, when set, is the Target's table's recorder (ttlclient.WithRecorder):
	// after each read's refreshes (FlushIdle) the library's results must
	// be the model's decisions (as many refreshed, none failed or
	// dropped), and each read's decisions are in the failure report.
	Idle *IdleRecorder
}

// Stats counts what a run did and saw.
type Stats struct {
	Steps, Writes, Bulk, Cond, Refused, ClockMoves int
	// Expires: Expire and ExpireColumn calls; Moved: cells they moved;
	// ExpireSkipped: ones skipped as undecidable (model.ExpireUndecidable);
	// WriteTimes: write times read back and compared.
	Expires, Moved, ExpireSkipped, WriteTimes int
	// NotMet: lifecycle operations whose condition did not hold;
	// MaxWriteTimes: MaxWriteTime answers compared.
	NotMet, MaxWriteTimes int
	Reads, CellsCompared  int
	// StoredExpired: cells the server still stored although the model's view
	// excluded them (expired or beyond N, not collected yet), summed over
	// full checks. Collected: cells the server's GC had removed.
	StoredExpired, Collected int
	// MaxStored: the most cells the model held at a full check.
	MaxStored int
	// ServerDuplicates: cells an unfiltered raw read returned twice (an
	// emulator bug, see fullCheck).
	ServerDuplicates int
	// IdleDue: cells reads returned due for a time-to-idle refresh;
	// IdleRefreshed: those whose refresh applied (the others had changed
	// or were not their column's newest).
	IdleDue, IdleRefreshed int
	// Replication: the replicated slice's counts (Config.Replication).
	Replication ReplicationStats
}

func (s Stats) String() string {
	return fmt.Sprintf("%d steps: %d writes (%d bulk, %d conditional, %d refused), %d clock moves, %d reads comparing %d cells; full checks saw %d expired-or-excess cells still stored and %d collected by the server's GC (%d duplicated by the emulator's raw reads); at most %d cells stored; %d expires moved %d cells (%d skipped as undecidable), %d write times compared; %d conditions not met, %d max write times compared; %d time-to-idle refreshes of %d cells due",
		s.Steps, s.Writes, s.Bulk, s.Cond, s.Refused, s.ClockMoves, s.Reads, s.CellsCompared, s.StoredExpired, s.Collected, s.ServerDuplicates, s.MaxStored,
		s.Expires, s.Moved, s.ExpireSkipped, s.WriteTimes, s.NotMet, s.MaxWriteTimes, s.IdleRefreshed, s.IdleDue)
}

// MismatchError is a read that differs from the model.
type MismatchError struct {
	Seed    uint64
	Step    int
	What    string // the read or write that differed
	Detail  string // diff or explanation
	History []string
	// RowHistory is, for a failure about cells, each one's row's history:
	// every step and time-to-idle decision that touched it, with the
	// model's instant, the injected clock's and the wall clock's readings
	// (a seed replays the suite's draws, not real time). Stored is what
	// the model and the server (a raw read) store in each one's column.
	RowHistory, Stored []string
}

func (e *MismatchError) Error() string {
	s := fmt.Sprintf("conformance mismatch: seed %d (replay with BTTL_SEED=%d), step %d: %s\n%s\nlast steps:\n  %s",
		e.Seed, e.Seed, e.Step, e.What, e.Detail, strings.Join(e.History, "\n  "))
	if len(e.RowHistory) > 0 {
		s += "\nhistory of " + strings.Join(e.RowHistory, "\nhistory of ")
	}
	if len(e.Stored) > 0 {
		s += "\nstored now:\n  " + strings.Join(e.Stored, "\n  ")
	}
	return s
}

type runner struct {
	cfg     Config
	rng     *rand.Rand
	m       *model.Model
	stats   Stats
	step    int
	history []string
	ctx     context.Context
	lag     *lagged // the replica's state (Config.Replication)
	// The failure report's log (diagnose.go): every entry with its clock
	// readings, the rows the current step touches, the last instant given
	// to the model, and the library's time-to-idle results (Config.Idle)
	// as of the last read's.
	log          []logEntry
	touching     []string
	modelAt      time.Time
	idleSeen     IdleCounts
	idleFailSeen int
}

// Run drives cfg.Target with cfg.Ops random steps and compares every read
// with the model. The table must be empty and have Schema's families.
func Run(ctx context.Context, cfg Config) (Stats, error) {
	if cfg.FullCheckEvery <= 0 {
		cfg.FullCheckEvery = 100
	}
	if cfg.Schema == nil {
		cfg.Schema, cfg.Families = Schema(), families
	}
	if cfg.Families == nil {
		for fam := range cfg.Schema {
			cfg.Families = append(cfg.Families, fam)
		}
		sort.Strings(cfg.Families)
	}
	if p, ok := cfg.Schema[FamPlain]; !ok || p.Managed() {
		return Stats{}, fmt.Errorf("conformance: the schema needs an unmanaged family %q", FamPlain)
	}
	r := &runner{
		cfg: cfg,
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		m:   model.NewWith(cfg.Schema, cfg.Semantics),
		ctx: ctx,
	}
	start := time.Now()
	for r.step = 1; r.step <= cfg.Ops; r.step++ {
		if err := r.doStep(); err != nil {
			return r.stats, err
		}
		r.stats.Steps++
		if r.step%cfg.FullCheckEvery == 0 || r.step == cfg.Ops {
			if err := r.fullCheck(); err != nil {
				return r.stats, err
			}
		}
		if cfg.Logf != nil && r.step%10000 == 0 {
			cfg.Logf("step %d of %d, %s elapsed", r.step, cfg.Ops, time.Since(start).Round(time.Second))
		}
	}
	return r.stats, nil
}

// u draws from the seeded stream. Every decision takes a fixed number of
// draws, whatever the model's state, so a replay with the same seed makes
// the same decisions even where real time made the states differ.
func (r *runner) u(n int) int {
	v := r.rng.Uint64()
	if n <= 0 {
		return 0
	}
	return int(v % uint64(n))
}

// ClockLead is how far ahead of real time the suite keeps the manual clock.
//
// The server's GC runs on real time; the library and the model use the
// manual clock. A cell is live in the model while ts + maxAge > manual, and
// the server may collect it once ts + maxAge < real. If real time ever
// passed the manual clock (even by a millisecond, while a read is in
// flight), the server could collect a cell the model still holds live: a
// false failure, not a library bug. So before every write and read the
// clock is moved up to at least real time + ClockLead, a lead no RPC on a
// loaded machine outlasts. Cells expired in the model for less than the
// lead are still stored (the filter must hide them); older ones are
// collected by the server's GC during the run.
const ClockLead = 3 * time.Second

// clock moves the manual clock up to real time + ClockLead if it is behind
// and returns it. Writes give the model this reading itself: the library
// adds a TTL to it in nanoseconds.
func (r *runner) clock() time.Time {
	// Every write since the last call was accepted at the clock's reading
	// now (only this method and moveClock, through it, move the clock):
	// the replicated slice records the model as of that reading.
	r.snapshot(r.cfg.Clock.Now())
	floor := time.Now().Add(ClockLead)
	if c := r.cfg.Clock.Now(); c.Before(floor) {
		r.cfg.Clock.Set(floor)
	}
	r.modelAt = r.cfg.Clock.Now()
	return r.modelAt
}

// now is clock in microseconds, the read time.
func (r *runner) now() int64 { return r.clock().UnixMicro() }

// clockString is a write's clock reading in the history: microseconds, and
// the nanoseconds below them when there are any.
func clockString(c time.Time) string {
	if ns := c.Nanosecond() % 1000; ns != 0 {
		return fmt.Sprintf("%d+%dns", c.UnixMicro(), ns)
	}
	return fmt.Sprintf("%d", c.UnixMicro())
}

// record adds s to the last steps, and to the log as touching the rows
// of the current step.
func (r *runner) record(s string) { r.recordRows(s, r.touching...) }

func (r *runner) recordRows(s string, rows ...string) {
	const keep = 20
	r.history = append(r.history, fmt.Sprintf("step %d: %s", r.step, s))
	if len(r.history) > keep {
		r.history = r.history[len(r.history)-keep:]
	}
	r.logRows(s, rows...)
}

func (r *runner) fail(what, detail string) error {
	return &MismatchError{Seed: r.cfg.Seed, Step: r.step, What: what, Detail: detail, History: append([]string(nil), r.history...)}
}

func rowKey(i int) string { return fmt.Sprintf("r%d", i) }

func (r *runner) doStep() error {
	touched := rowKey(r.u(numRows))
	r.touching = []string{touched}
	switch k := r.u(100); {
	case k < 46:
		if err := r.apply(touched); err != nil {
			return err
		}
	case k < 50:
		if err := r.expire(touched); err != nil {
			return err
		}
	case k < 60:
		if err := r.applyBulk(); err != nil {
			return err
		}
	case k < 67:
		if err := r.condMutation(touched); err != nil {
			return err
		}
	case k < 82:
		r.touching = nil // every row's
		r.moveClock()
	default:
		r.record("reads only")
	}
	if err := r.readRow(touched); err != nil {
		return err
	}
	return r.readRows()
}

func (r *runner) moveClock() {
	var d time.Duration
	switch k := r.u(1000); {
	case k < 850:
		d = time.Duration(r.u(20_000)) * time.Microsecond
	case k < 990:
		d = time.Duration(20_000+r.u(480_000)) * time.Microsecond
	default:
		d = time.Duration(1_000_000+r.u(4_000_000)) * time.Microsecond
	}
	if r.u(4) == 0 {
		d = d.Truncate(time.Millisecond) // land on whole milliseconds too
	}
	r.cfg.Clock.Set(r.clock().Add(d))
	r.stats.ClockMoves++
	r.record(fmt.Sprintf("clock +%s", d))
}

// ttl draws a TTL: mostly short (so cells expire during the run), some
// around the families' max ages, a few long, a few invalid.
func (r *runner) ttl() time.Duration {
	var d time.Duration
	switch k := r.u(100); {
	case k < 30:
		d = time.Duration(1000+r.u(49_000)) * time.Microsecond
	case k < 65:
		d = time.Duration(50_000+r.u(950_000)) * time.Microsecond
	case k < 92:
		d = time.Duration(1_000_000+r.u(2_000_000)) * time.Microsecond // around D
	case k < 97:
		d = time.Duration(3+r.u(7)) * time.Second
	case k < 99:
		// Long: these pile up (distinct timestamps), so only a few.
		d = time.Duration(1+r.u(48)) * time.Hour
	default:
		d = -time.Duration(r.u(2)) * time.Millisecond // 0 or -1ms: refused
	}
	if r.u(3) == 0 && d > 0 {
		// Coarse TTLs make writes in the same millisecond collide.
		d = d.Truncate(250 * time.Millisecond)
		if d == 0 {
			d = 250 * time.Millisecond
		}
	}
	return d
}

func (r *runner) value() string { return fmt.Sprintf("%06d-%d", r.step, r.u(1000)) }

func (r *runner) column() string { return string(columnSet[r.u(len(columnSet))]) }

// set draws a Set on fam at now.
func (r *runner) set(fam string, now int64) model.Op {
	o := model.Op{Family: fam, Column: r.column(), Value: r.value()}
	k := r.u(100)
	switch r.cfg.Schema[fam].Kind() {
	case strategy.KindOneSecond:
		switch {
		case k < 60:
			o.Kind, o.TTL = model.SetTTL, r.ttl()
		case k < 80:
			// An explicit expiry instant; under a millisecond ahead it
			// rounds to <= now and must be refused.
			o.Kind, o.TS = model.SetExplicit, now+int64(r.u(2_000_000))
		default:
			o.Kind = model.SetAuto
		}
	case strategy.KindDefaultExpiry:
		switch {
		case k < 60:
			o.Kind, o.TTL = model.SetTTL, r.ttl()
		case k < 80:
			o.Kind = model.SetAuto
		default:
			// An explicit real write time, sometimes already expired.
			o.Kind, o.TS = model.SetExplicit, now-int64(r.u(3_000_000))
		}
	case strategy.KindSequence:
		seq := int64(1 + r.u(6))
		switch {
		case k < 80:
			o.Kind, o.Seq = model.SetSeq, seq
		case k < 97:
			o.Kind, o.TS = model.SetExplicit, seq*1000
		default:
			o.Kind, o.TS = model.SetExplicit, seq*1000+500 // not seq*1000: refused
		}
	default:
		o.Kind, o.TS = model.SetExplicit, int64(1+r.u(3))*1000+int64(r.u(2))*int64(r.u(1000))
	}
	return o
}

// deleteRange draws a range around the column's stored cells.
func (r *runner) deleteRange(row, fam, col string, now int64) model.Op {
	o := model.Op{Kind: model.DeleteRange, Family: fam, Column: col}
	var tss []int64
	for _, c := range r.m.Stored(row) {
		if c.Family == fam && c.Column == col {
			tss = append(tss, c.TS)
		}
	}
	pivot := now
	if len(tss) > 0 {
		pivot = tss[r.u(len(tss))]
	} else {
		r.u(1)
	}
	width := int64(1+r.u(3)) * 1000
	switch r.u(4) {
	case 0:
		o.TS, o.End = pivot, pivot+width
	case 1:
		o.TS, o.End = pivot, 0
	case 2:
		o.TS, o.End = 0, pivot+width
	default:
		o.TS, o.End = max(0, pivot-width), pivot+1000
	}
	return o
}

func (r *runner) mutation(row string, clock time.Time) []model.Op {
	now := clock.UnixMicro()
	n := 1 + r.u(4)
	ops := make([]model.Op, 0, n)
	for range n {
		fam := r.cfg.Families[r.u(len(r.cfg.Families))]
		col := r.column()
		switch k := r.u(100); {
		case k < 70:
			ops = append(ops, r.set(fam, now))
			if r.u(100) < 3 {
				// A forged write-time companion beside the Set, at its
				// timestamp, claiming the cell was written 1µs after the
				// epoch: refused in a family with write times (its
				// qualifiers are reserved), an ordinary column elsewhere.
				o := ops[len(ops)-1]
				o.Column, o.Value = model.CompanionPrefix+o.Column, model.WriteTimeValue(1)
				ops = append(ops, o)
			}
		case k < 78:
			ops = append(ops, model.Op{Kind: model.DeleteColumn, Family: fam, Column: col})
		case k < 91:
			ops = append(ops, r.deleteRange(row, fam, col, now))
		case k < 97:
			ops = append(ops, model.Op{Kind: model.DeleteFamily, Family: fam})
		default:
			ops = append(ops, model.Op{Kind: model.DeleteRow})
		}
	}
	if l, ok := r.cfg.Target.(Lowerer); ok {
		ops = l.Lower(ops, clock)
	}
	return r.keepRow(row, clock, r.safe(row, clock, ops))
}

// keepRow appends a write to the unmanaged family when ops would leave the
// row without a cell there, so no row is ever empty on the server: bttest,
// and cbtemulator built on it, can lose a write to an empty row racing with
// GC (see the bttest_harness package doc; seed 20261124, step 546469). The
// unmanaged family has no GC rule, so this cell keeps the row. No random
// draw is used, so a seed's steps do not change.
func (r *runner) keepRow(row string, now time.Time, ops []model.Op) []model.Op {
	if r.m.KeepsFamily(row, now, ops, FamPlain) {
		return ops
	}
	return append(ops, model.Op{Kind: model.SetExplicit, Family: FamPlain, Column: keepColumn, TS: 1000, Value: fmt.Sprintf("%06d-keep", r.step)})
}

// safe rewrites a mutation that would bring back a version the server's
// max-versions GC may already have removed (see model.Resurrects): its
// range deletes on versioned families then start at 0, which deletes
// every older version too.
func (r *runner) safe(row string, now time.Time, ops []model.Op) []model.Op {
	if !r.m.Resurrects(row, now, ops) {
		return ops
	}
	for i, o := range ops {
		if o.Kind == model.DeleteRange && r.m.Versions(o.Family) > 0 {
			ops[i].TS = 0
		}
	}
	return ops
}

func describe(ops []model.Op) string {
	parts := make([]string, len(ops))
	for i, o := range ops {
		parts[i] = o.String()
	}
	return strings.Join(parts, "; ")
}

// outcome compares the library's answer to one row's write with the
// model's: both accept it, or both refuse it with the same class of
// error (a *ttlclient.CellError wrapping the class's sentinel, or the
// wire guard's FailedPrecondition naming its rule).
func (r *runner) outcome(what string, want, got error) error {
	switch {
	case want == nil && got != nil:
		return r.fail(what, fmt.Sprintf("the model accepts this write, the library failed it: %v", got))
	case want != nil && got == nil:
		return r.fail(what, fmt.Sprintf("the model refuses this write (%v), the library sent it", want))
	case want != nil:
		class, ok := Classify(got)
		if !ok {
			return r.fail(what, fmt.Sprintf("refused without a typed error (a *ttlclient.CellError or a wire guard refusal): %v", got))
		}
		if wc := model.ClassOf(want); class != wc {
			return r.fail(what, fmt.Sprintf("refused as %s, the model refuses it as %s (%v): %v", class, wc, want, got))
		}
		r.stats.Refused++
	}
	return nil
}

func (r *runner) apply(row string) error {
	clock := r.clock()
	ops := r.mutation(row, clock)
	what := fmt.Sprintf("Apply %s at %s: %s", row, clockString(clock), describe(ops))
	r.record(what)
	want := r.m.Check(row, clock, ops)
	got := r.cfg.Target.Apply(r.ctx, row, ops)
	if err := r.outcome(what, want, got); err != nil {
		return err
	}
	if want == nil {
		_ = r.m.Apply(row, clock, ops)
	}
	r.stats.Writes++
	return nil
}

func (r *runner) applyBulk() error {
	clock := r.clock()
	n := 2 + r.u(4)
	perm := r.rng.Perm(numRows)
	rows := make([]string, n)
	opss := make([][]model.Op, n)
	var desc []string
	for i := range n {
		rows[i] = rowKey(perm[i])
		opss[i] = r.mutation(rows[i], clock)
		desc = append(desc, rows[i]+": "+describe(opss[i]))
	}
	what := fmt.Sprintf("ApplyBulk at %s: %s", clockString(clock), strings.Join(desc, " | "))
	r.touching = rows
	r.record(what)
	wants := make([]error, n)
	var first error // the first refused row's refusal
	for i := range n {
		wants[i] = r.m.Check(rows[i], clock, opss[i])
		if first == nil {
			first = wants[i]
		}
	}
	errs, err := r.cfg.Target.ApplyBulk(r.ctx, rows, opss)
	if r.cfg.Semantics.Wire && first != nil {
		// The guard refuses a MutateRows request whole when one entry
		// breaks a rule: nothing is written, ApplyBulk fails.
		if err == nil {
			return r.fail(what, fmt.Sprintf("the model refuses a row of this request (%v), the library sent it (the guard refuses a MutateRows request whole)", first))
		}
		if e := r.outcome(what, first, err); e != nil {
			return e
		}
		r.stats.Bulk++
		return nil
	}
	if err != nil {
		return r.fail(what, fmt.Sprintf("the whole call failed: %v", err))
	}
	for i := range n {
		var got error
		if errs != nil {
			got = errs[i]
		}
		if err := r.outcome(fmt.Sprintf("%s (row %s)", what, rows[i]), wants[i], got); err != nil {
			return err
		}
		if wants[i] == nil {
			_ = r.m.Apply(rows[i], clock, opss[i])
		}
	}
	r.stats.Writes++
	r.stats.Bulk++
	return nil
}

func (r *runner) condMutation(row string) error {
	clock := r.clock()
	now := clock.UnixMicro()
	cond := r.filter()
	var tops, fops []model.Op
	if r.u(4) != 0 {
		tops = r.mutation(row, clock)
	}
	if r.u(4) != 0 {
		fops = r.mutation(row, clock)
	}
	if tops == nil && fops == nil {
		tops = r.mutation(row, clock)
	}
	matched := r.m.Matches(row, now, cond)
	chosen := fops
	if matched {
		chosen = tops
	}
	what := fmt.Sprintf("CondMutation %s at %s if %s (model: %v) then [%s] else [%s]", row, clockString(clock), filterString(cond), matched, describe(tops), describe(fops))
	r.record(what)
	// Both branches are checked before anything is sent, the true branch
	// first: one refusal, the first in that order (with StampTTL, the
	// first TTL of either branch), refuses the whole mutation.
	want := r.m.Check(row, clock, append(append([]model.Op(nil), tops...), fops...))
	var bcond bigtable.Filter
	if cond != nil {
		bcond = cond.Bigtable()
	}
	got := r.cfg.Target.CondApply(r.ctx, row, bcond, tops, fops)
	if err := r.outcome(what, want, got); err != nil {
		return err
	}
	if want == nil && chosen != nil {
		if r.m.Resurrects(row, clock, chosen) {
			// Both branches went through safe, so this cannot happen; a
			// model bug if it does.
			return r.fail(what, "suite bug: the chosen branch resurrects a shadowed version")
		}
		_ = r.m.Apply(row, clock, chosen)
	}
	r.stats.Writes++
	r.stats.Cond++
	return nil
}

// filter draws a caller filter: none, one, or a chain of two or three.
func (r *runner) filter() model.Filter {
	one := func() model.Filter {
		switch r.u(5) {
		case 0:
			return model.LatestN(1 + r.u(3))
		case 1:
			a, b := r.u(len(columnSet)), r.u(len(columnSet)+1)
			end := ""
			if b < len(columnSet) && b > a {
				end = string(columnSet[b])
			}
			return model.ColumnRange(r.cfg.Families[r.u(len(r.cfg.Families))], string(columnSet[a]), end)
		case 2:
			// Timestamps around now, and small ones for sequence and
			// unmanaged cells.
			base := int64(r.u(12)) * 1000
			if r.u(2) == 0 {
				base = r.cfg.Clock.Now().UnixMicro() - 3_000_000 + int64(r.u(6_000))*1000
			}
			end := base + int64(1+r.u(4000))*1000
			if r.u(3) == 0 {
				end = 0
			}
			return model.TimestampRange(base, end)
		case 3:
			// Values start with the step that wrote them.
			lo := max(0, r.step-r.u(200))
			end := ""
			if r.u(2) == 0 {
				end = fmt.Sprintf("%06d", lo+1+r.u(100))
			}
			return model.ValueRange(fmt.Sprintf("%06d", lo), end)
		default:
			return model.StripValue()
		}
	}
	switch k := r.u(10); {
	case k < 4:
		return nil
	case k < 7:
		return one()
	case k < 9:
		return model.Chain(one(), one())
	default:
		return model.Chain(one(), one(), one())
	}
}

func filterString(f model.Filter) string {
	if f == nil {
		return "no filter"
	}
	return f.String()
}

func (r *runner) readRow(row string) error {
	f := r.filter()
	t := r.now()
	var bf bigtable.Filter
	if f != nil {
		bf = f.Bigtable()
	}
	what := fmt.Sprintf("ReadRow %s at %d with %s", row, t, filterString(f))
	if err := r.replicate(what); err != nil {
		return err
	}
	got, err := r.cfg.Target.ReadRow(r.ctx, row, bf)
	if err != nil {
		return r.fail(what, fmt.Sprintf("read failed: %v", err))
	}
	want, err := r.compareRead(what, fromRow(got), func(m *model.Model) []model.Cell { return m.Read(row, t, f) })
	if err != nil {
		return err
	}
	return r.afterRead(what, want, t)
}

// afterRead waits for the time-to-idle refreshes a read that returned
// read at t queued, and applies to the model those that must have applied.
// The library's refreshes run at its clock reading, which nothing moves
// until they are done.
func (r *runner) afterRead(what string, read []model.Cell, t int64) error {
	if r.cfg.FlushIdle == nil {
		return nil
	}
	due := r.m.IdleDue(read, t)
	r.idleDecisions(what, read, due, t)
	if err := r.cfg.FlushIdle(r.ctx); err != nil {
		return r.failCells(what, fmt.Sprintf("waiting for the time-to-idle refreshes: %v", err), due)
	}
	now := r.cfg.Clock.Now()
	r.modelAt = now
	r.stats.IdleDue += len(due)
	var refreshed []model.Cell
	for _, c := range due {
		if r.m.Refresh(c, now) {
			r.stats.IdleRefreshed++
			refreshed = append(refreshed, c)
			r.recordRows(fmt.Sprintf("time-to-idle refresh of %s at %s", c, clockString(now)), c.Row)
		} else {
			r.logRows(fmt.Sprintf("time-to-idle refresh of %s at %s: not applied in the model (gone, changed, not the newest, expired or not later)", c, clockString(now)), c.Row)
		}
	}
	if err := r.checkIdle(what, read, due, len(refreshed)); err != nil {
		return err
	}
	for _, c := range refreshed {
		if err := r.writeTimeAfterRefresh(c); err != nil {
			return err
		}
	}
	return nil
}

// checkIdle compares, with Config.Idle, the library's time-to-idle results
// since the last read with the model's decisions for this one: as many
// cells refreshed, none failed or dropped (the model cannot know of
// those, so the two would part from then on).
func (r *runner) checkIdle(what string, read, due []model.Cell, refreshed int) error {
	if r.cfg.Idle == nil {
		return nil
	}
	counts, failures := r.cfg.Idle.Counts()
	lib := counts.sub(r.idleSeen)
	r.idleSeen = counts
	failures, r.idleFailSeen = failures[r.idleFailSeen:], len(failures)
	if lib[ttlclient.IdleRefreshed] == refreshed && lib[ttlclient.IdleFailed] == 0 && lib[ttlclient.IdleDropped] == 0 {
		return nil
	}
	var idle []model.Cell // the report shows the rows of the read's cells of idle families
	for _, c := range read {
		if r.cfg.Schema[c.Family].RefreshesOnRead() {
			idle = append(idle, c)
		}
	}
	return r.failCells(what, fmt.Sprintf("time-to-idle: the model refreshed %d of the %d cells due (%s), the library reports %s (failures: %s)",
		refreshed, len(due), cellList(due), lib, orNone(failures)), idle)
}

// writeTimeAfterRefresh asks, with Config.WriteTimeAfterRefresh, for the
// write time of c as the read returned it, after its time-to-idle refresh
// moved it: the README's read-then-WriteTime. The answer must be the
// cell's write time (the refresh keeps it), wherever the cell now is.
func (r *runner) writeTimeAfterRefresh(c model.Cell) error {
	ex, ok := r.cfg.Target.(Expirer)
	if !r.cfg.WriteTimeAfterRefresh || !ok || !r.cfg.Schema[c.Family].HasCompanions() {
		return nil
	}
	var moved []model.Cell  // the refresh made the cell its column's newest
	wts := map[int64]bool{} // the write times of the column's cells holding c's value
	for _, s := range r.m.Stored(c.Row) {
		if s.Family == c.Family && s.Column == c.Column {
			moved = append(moved, s)
			if wt, ok := r.m.WriteTime(c.Row, c.Family, c.Column, s.TS); ok && s.Value == c.Value {
				wts[wt] = true
			}
		}
	}
	if len(wts) > 1 {
		// The moved cell can be found only by its value, which another
		// cell of the column with another write time also holds: the
		// library may say it cannot tell.
		return nil
	}
	want, ok := r.m.WriteTime(c.Row, c.Family, c.Column, moved[0].TS)
	if !ok {
		return r.fail("WriteTime after a refresh of "+c.String(), "suite bug: the model lost the moved cell's write time")
	}
	got, err := ex.WriteTime(r.ctx, bigtable.ReadItem{Row: c.Row, Column: c.Family + ":" + c.Column, Timestamp: bigtable.Timestamp(c.TS), Value: []byte(c.Value)})
	what := fmt.Sprintf("WriteTime of %s as read, after its time-to-idle refresh moved it to %d", c, moved[0].TS)
	switch {
	case err != nil:
		return r.fail(what, fmt.Sprintf("the library failed: %v", err))
	case got.UnixMicro() != want:
		return r.fail(what, fmt.Sprintf("write time %d, the model %d", got.UnixMicro(), want))
	}
	r.stats.WriteTimes++
	return nil
}

func (r *runner) readRows() error {
	f := r.filter()
	var rs bigtable.RowSet
	var keys func(m *model.Model) []string // the rows read, in a state of the table
	var desc string
	switch r.u(16) {
	case 0:
		rs, desc = bigtable.InfiniteRange(""), "all rows"
		keys = (*model.Model).RowKeys
	case 1, 2:
		a, b := r.u(numRows), r.u(4)
		start, end := rowKey(a), ""
		if b > 0 && a+b < numRows {
			b += a
			end = rowKey(b)
			rs = bigtable.NewRange(start, end)
		} else {
			rs = bigtable.InfiniteRange(start)
		}
		desc = fmt.Sprintf("rows [%s, %s)", start, end)
		keys = func(m *model.Model) (in []string) {
			for _, k := range m.RowKeys() {
				if k >= start && (end == "" || k < end) {
					in = append(in, k)
				}
			}
			return in
		}
	default:
		set := map[string]bool{}
		for range 1 + r.u(2) {
			set[rowKey(r.u(numRows))] = true
		}
		var list bigtable.RowList
		for k := range set {
			list = append(list, k)
		}
		sort.Strings(list)
		rs, desc = list, fmt.Sprintf("rows %v", []string(list))
		keys = func(*model.Model) []string { return []string(list) }
	}
	t := r.now()
	var bf bigtable.Filter
	if f != nil {
		bf = f.Bigtable()
	}
	what := fmt.Sprintf("ReadRows %s at %d with %s", desc, t, filterString(f))
	if err := r.replicate(what); err != nil {
		return err
	}
	var got []model.Cell
	var prev string
	var order error
	err := r.cfg.Target.ReadRows(r.ctx, rs, bf, func(row bigtable.Row) bool {
		if prev != "" && row.Key() <= prev && order == nil {
			order = fmt.Errorf("row %q after %q", row.Key(), prev)
		}
		prev = row.Key()
		got = append(got, fromRow(row)...)
		return true
	})
	if err != nil {
		return r.fail(what, fmt.Sprintf("read failed: %v", err))
	}
	if order != nil {
		return r.fail(what, "rows out of order: "+order.Error())
	}
	want, err := r.compareRead(what, got, func(m *model.Model) (want []model.Cell) {
		for _, k := range keys(m) {
			want = append(want, m.Read(k, t, f)...)
		}
		return want
	})
	if err != nil {
		return err
	}
	return r.afterRead(what, want, t)
}

// fromRow flattens a row in Bigtable order: families by name (the client's
// Row is a map), each family's items as the server sent them, so a wrong
// column or timestamp order shows up.
func fromRow(row bigtable.Row) []model.Cell {
	fams := make([]string, 0, len(row))
	for fam := range row {
		fams = append(fams, fam)
	}
	sort.Strings(fams)
	var out []model.Cell
	for _, fam := range fams {
		for _, it := range row[fam] {
			col := strings.TrimPrefix(it.Column, fam+":")
			out = append(out, model.Cell{Row: it.Row, Family: fam, Column: col, TS: int64(it.Timestamp), Value: string(it.Value)})
		}
	}
	return out
}

func (r *runner) compare(what string, want, got []model.Cell) error {
	r.stats.Reads++
	r.stats.CellsCompared += len(want)
	if equalCells(want, got) {
		return nil
	}
	return r.failCells(what, Diff(want, got), differing(want, got))
}

func cellList(cs []model.Cell) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.String())
	}
	return orNone(s)
}

// differing is the cells only one of want and got holds; all of both when
// only the order differs.
func differing(want, got []model.Cell) []model.Cell {
	w, g := map[model.Cell]int{}, map[model.Cell]int{}
	for _, c := range want {
		w[c]++
	}
	for _, c := range got {
		g[c]++
	}
	var out []model.Cell
	for _, c := range want {
		if w[c] > g[c] {
			out = append(out, c)
		}
	}
	for _, c := range got {
		if g[c] > w[c] {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return append(append(out, want...), got...)
	}
	return out
}

func equalCells(a, b []model.Cell) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Diff renders want against got: cells only the model has with "-", cells
// only the server returned with "+", and both in full when only the order
// differs.
func Diff(want, got []model.Cell) string {
	in := func(cs []model.Cell) map[model.Cell]int {
		m := map[model.Cell]int{}
		for _, c := range cs {
			m[c]++
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, c := range want {
		if g[c] > 0 {
			g[c]--
			continue
		}
		fmt.Fprintf(&b, "- %s (model only)\n", c)
	}
	for _, c := range got {
		if w[c] > 0 {
			w[c]--
			continue
		}
		fmt.Fprintf(&b, "+ %s (server only)\n", c)
	}
	if b.Len() == 0 {
		b.WriteString("same cells, different order\n")
	}
	fmt.Fprintf(&b, "model (%d cells):\n%sserver (%d cells):\n%s", len(want), indent(model.Format(want)), len(got), indent(model.Format(got)))
	return b.String()
}

func indent(s string) string {
	if s == "" {
		return "    (none)\n"
	}
	return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
}

// fullCheck reads every row unfiltered through the target and raw from the
// server: the target must return exactly the model's view, and the server
// must store only cells the model holds, missing only cells its GC may
// have collected.
func (r *runner) fullCheck() error {
	// On a replicated instance every cluster holds every write after a
	// Flush: the reads below must be the model's on any routing.
	if err := r.flush("full read"); err != nil {
		return err
	}
	t := r.now()
	var got []model.Cell
	err := r.cfg.Target.ReadRows(r.ctx, bigtable.InfiniteRange(""), nil, func(row bigtable.Row) bool {
		got = append(got, fromRow(row)...)
		return true
	})
	if err != nil {
		return r.fail("full read", err.Error())
	}
	var want []model.Cell
	for _, k := range r.m.RowKeys() {
		want = append(want, r.m.View(k, t)...)
	}
	what := fmt.Sprintf("full read at %d", t)
	if err := r.compare(what, want, got); err != nil {
		return err
	}
	// The full read is a read through the library: its refreshes land
	// before the raw read looks at what is stored.
	if err := r.afterRead(what, want, t); err != nil {
		return err
	}
	if r.cfg.Raw == nil {
		return nil
	}
	if err := r.checkStored("raw full read", r.cfg.Raw, want); err != nil {
		return err
	}
	if rep := r.cfg.Replication; rep != nil && rep.RawReplica != nil {
		// The full read's refreshes reach the replica too.
		if err := r.flush("raw full read of the replica"); err != nil {
			return err
		}
		r.stats.Replication.ReplicaChecks++
		return r.checkStored("raw full read of the replica", rep.RawReplica, want)
	}
	return nil
}

// checkStored reads tbl unfiltered: it must store only cells the model
// holds, and miss only cells its GC may have collected; want is the
// model's view at the full read (a stored cell outside it is counted as
// expired or excess).
func (r *runner) checkStored(what string, tbl *bigtable.Table, want []model.Cell) error {
	var stored []model.Cell
	err := tbl.ReadRows(r.ctx, bigtable.InfiniteRange(""), func(row bigtable.Row) bool {
		stored = append(stored, fromRow(row)...)
		return true
	})
	if err != nil {
		return r.fail(what, err.Error())
	}
	realNow := time.Now().UnixMicro()
	held := map[model.Cell]bool{}
	for _, k := range r.m.RowKeys() {
		for _, c := range r.m.StoredRaw(k) { // write-time companions included
			held[c] = true
		}
	}
	r.stats.MaxStored = max(r.stats.MaxStored, len(held))

	view := map[model.Cell]bool{}
	for _, c := range want {
		view[c] = true
	}
	seen := map[model.Cell]bool{}
	for _, c := range stored {
		if seen[c] {
			// bttest (and cbtemulator, built from it) forgets to drop a
			// column's name when its GC empties the column; a later write
			// adds the name again and unfiltered reads then return the
			// column twice. Reads through the library are not affected: the
			// TTL filter's Interleave rebuilds the columns.
			r.stats.ServerDuplicates++
			continue
		}
		seen[c] = true
		if !held[c] {
			return r.failCells(what, fmt.Sprintf("the server stores %s, which the model never wrote or has deleted (a duplicate with a shifted timestamp?)", c), []model.Cell{c})
		}
		delete(held, c)
		if !view[c] {
			r.stats.StoredExpired++
		}
	}
	for c := range held {
		if !r.m.Collectable(c.Row, c.Family, c.Column, c.TS, realNow) {
			return r.failCells(what, fmt.Sprintf("the server lost %s, which its GC may not collect yet", c), []model.Cell{c})
		}
		r.stats.Collected++
	}
	return nil
}

// expire draws a lifecycle operation: an Expire (of the newest live cell,
// or of one named by its timestamp) or an ExpireColumn, each with a drawn
// condition, an ExpireAt, a Persist, a SetKeepTTL or a MaxWriteTime;
// compares the library's answer (per-cell result, moved count, write
// time) with the model's, and reads a write time back. Its draws are
// fixed in number.
func (r *runner) expire(row string) error {
	clock := r.clock()
	fam := r.cfg.Families[r.u(len(r.cfg.Families))]
	col := r.column()
	ttl := r.ttl()
	// 0 newest, 1 a given timestamp, 2 the whole column, 3 ExpireAt, 4
	// Persist, 5 SetKeepTTL, 6 MaxWriteTime, 7 ReadRowAndExpire/Persist,
	// 8 ExpireColumnAt, 9 ExpireRow, 10 ExpireRowAt, 11 ReadRowAndExpireAt,
	// 12 SetColumns (of col and col2, with setCond; 3: SetColumnsKeepTTL)
	mode := r.u(13)
	col2, setCond := r.column(), r.u(4)
	pick := r.u(8)
	cond := model.Cond(r.u(6))
	past, sub := r.u(100) < 20, time.Duration(r.u(1000))*time.Microsecond
	whole := r.u(2) == 0 // MaxWriteTime of the row's family, or of col
	keepValue := fmt.Sprintf("%06d-k%d", r.step, r.u(1000))
	if r.u(4) != 0 {
		// Mostly a column holding a live cell: a drawn one is often empty
		// (TTLs are short), and an operation on nothing checks little.
		if live := r.m.Read(row, clock.UnixMicro(), model.ColumnRange(fam, "", "")); len(live) > 0 {
			col = live[pick%len(live)].Column
		}
	}
	ex, ok := r.cfg.Target.(Expirer)
	if !ok {
		r.record("expire: target has none")
		return nil
	}
	rowWide := mode == 7 || mode == 9 || mode == 10 || mode == 11
	if (mode != 6 && !rowWide && r.m.ExpireUndecidable(row, fam, col)) || (rowWide && r.m.RowUndecidable(row)) {
		r.stats.ExpireSkipped++
		r.record(fmt.Sprintf("expire %s %s:%s skipped: a version GC may have removed", row, fam, col))
		return nil
	}
	now := clock.UnixMicro()
	var at int64
	hasAt := false
	if mode == 1 {
		if live := r.m.Read(row, now, model.ColumnRange(fam, col, col+"\x00")); len(live) > 0 {
			at, hasAt = live[pick%len(live)].TS, true
		} else {
			at, hasAt = now, true // names no live cell
		}
	}
	what := fmt.Sprintf("Expire(%d) %s %s:%s ttl %s cond %d at %s", mode, row, fam, col, ttl, cond, clockString(clock))
	if hasAt {
		what += fmt.Sprintf(" cell %d", at)
	}
	r.stats.Expires++
	instant := clock.Add(ttl + sub)
	if past {
		instant = clock.Add(-ttl + sub)
	}
	switch mode {
	case 2, 8, 9, 10:
		var got int
		var err error
		var res []ttlclient.ExpireCellResult
		opts := append(columnCond(cond), ttlclient.ExpireResultsTo(&res))
		apply := func(m *model.Model) ([]model.CellRes, error) {
			switch mode {
			case 8:
				return m.ExpireColumnAt(row, fam, col, clock, instant, cond)
			case 9:
				return m.ExpireRow(row, clock, ttl, nil, cond)
			case 10:
				return m.ExpireRow(row, clock, 0, &instant, cond)
			}
			return m.ExpireColumnResults(row, fam, col, clock, ttl, cond)
		}
		switch mode {
		case 8:
			what = fmt.Sprintf("ExpireColumnAt %s %s:%s at %s cond %d at %s", row, fam, col, clockString(instant), cond, clockString(clock))
		case 9:
			what = fmt.Sprintf("ExpireRow %s ttl %s cond %d at %s", row, ttl, cond, clockString(clock))
		case 10:
			what = fmt.Sprintf("ExpireRowAt %s at %s cond %d at %s", row, clockString(instant), cond, clockString(clock))
		}
		r.record(what)
		want, wantErr := apply(r.m.CloneRow(row))
		switch mode {
		case 8:
			got, err = ex.ExpireColumnAt(r.ctx, row, fam, col, instant, opts...)
		case 9:
			got, err = ex.ExpireRow(r.ctx, row, ttl, opts...)
		case 10:
			got, err = ex.ExpireRowAt(r.ctx, row, instant, opts...)
		default:
			got, err = ex.ExpireColumn(r.ctx, row, fam, col, ttl, opts...)
		}
		if e := r.outcome(what, wantErr, err); e != nil {
			return e
		}
		if wantErr == nil {
			if got != model.Moved(want) {
				return r.fail(what, fmt.Sprintf("moved %d cells, the model %d", got, model.Moved(want)))
			}
			if d := diffResults(res, want); d != "" {
				return r.fail(what, d)
			}
			_, _ = apply(r.m)
			for _, c := range want {
				r.countResult(c.Res)
			}
		}
	case 0, 1:
		r.record(what)
		var res ttlclient.ExpireResult
		opts := append(expireCond(cond), ttlclient.ExpireResultTo(&res))
		if hasAt {
			opts = append(opts, ttlclient.ExpireCellAt(bigtable.Timestamp(at)))
		}
		probe := r.m.CloneRow(row)
		want, wantErr := probe.ExpireCond(row, fam, col, clock, ttl, at, hasAt, cond)
		got, err := ex.Expire(r.ctx, row, fam, col, ttl, opts...)
		if e := r.outcome(what, wantErr, err); e != nil {
			return e
		}
		if wantErr == nil {
			if int(res) != want || got != (want == model.ResSet) {
				return r.fail(what, fmt.Sprintf("applied %v result %d, the model %d", got, res, want))
			}
			_, _ = r.m.ExpireCond(row, fam, col, clock, ttl, at, hasAt, cond)
			r.countResult(want)
		}
	case 3, 4, 5:
		var want int
		var wantErr error
		var got ttlclient.ExpireResult
		var err error
		probe := r.m.CloneRow(row)
		switch mode {
		case 3:
			what = fmt.Sprintf("ExpireAt %s %s:%s at %s cond %d at %s", row, fam, col, clockString(instant), cond, clockString(clock))
			want, wantErr = probe.ExpireAt(row, fam, col, clock, instant, 0, false, cond)
			got, err = ex.ExpireAt(r.ctx, row, fam, col, instant, expireCond(cond)...)
		case 4:
			what = fmt.Sprintf("Persist %s %s:%s at %s", row, fam, col, clockString(clock))
			want, wantErr = probe.Persist(row, fam, col, clock)
			got, err = ex.Persist(r.ctx, row, fam, col)
		case 5:
			what = fmt.Sprintf("SetKeepTTL %s %s:%s %q at %s", row, fam, col, keepValue, clockString(clock))
			want, wantErr = probe.SetKeepTTL(row, fam, col, clock, keepValue)
			got, err = ex.SetKeepTTL(r.ctx, row, fam, col, []byte(keepValue))
		}
		r.record(what)
		if e := r.outcome(what, wantErr, err); e != nil {
			return e
		}
		if wantErr == nil {
			if int(got) != want {
				return r.fail(what, fmt.Sprintf("result %d, the model %d", got, want))
			}
			switch mode {
			case 3:
				_, _ = r.m.ExpireAt(row, fam, col, clock, instant, 0, false, cond)
			case 4:
				_, _ = r.m.Persist(row, fam, col, clock)
			case 5:
				_, _ = r.m.SetKeepTTL(row, fam, col, clock, keepValue)
			}
			r.countResult(want)
		}
	case 7, 11:
		persist := whole && mode == 7
		apply := func(m *model.Model) (int, error) {
			if mode == 11 {
				return m.ReadRowAndExpireAt(row, clock, instant)
			}
			return m.ReadRowAndMove(row, clock, ttl, persist)
		}
		what = fmt.Sprintf("ReadRowAndExpire %s ttl %s persist %v at %s", row, ttl, persist, clockString(clock))
		if mode == 11 {
			what = fmt.Sprintf("ReadRowAndExpireAt %s at %s at %s", row, clockString(instant), clockString(clock))
		}
		r.record(what)
		want, wantErr := apply(r.m.CloneRow(row))
		var got ttlclient.ExpireResult
		var err error
		switch {
		case mode == 11:
			_, got, err = ex.ReadRowAndExpireAt(r.ctx, row, nil, instant)
		case persist:
			_, got, err = ex.ReadRowAndPersist(r.ctx, row, nil)
		default:
			_, got, err = ex.ReadRowAndExpire(r.ctx, row, nil, ttl)
		}
		if e := r.outcome(what, wantErr, err); e != nil {
			return e
		}
		if wantErr == nil {
			if int(got) != want {
				return r.fail(what, fmt.Sprintf("result %d, the model %d", got, want))
			}
			_, _ = apply(r.m)
			r.countResult(want)
		}
	case 12:
		values := map[string]string{col: keepValue, col2: keepValue + "2"}
		what = fmt.Sprintf("SetColumns %s %s %q ttl %s cond %d at %s", row, fam, values, ttl, setCond, clockString(clock))
		if r.m.ExpireUndecidable(row, fam, col2) {
			r.stats.ExpireSkipped++
			r.record(what + " skipped: a version GC may have removed")
			return nil
		}
		bv := map[string][]byte{}
		for c, v := range values {
			bv[c] = []byte(v)
		}
		if setCond == 3 {
			what = fmt.Sprintf("SetColumnsKeepTTL %s %s %q at %s", row, fam, values, clockString(clock))
			r.record(what)
			want, wantErr := r.m.CloneRow(row).SetColumnsKeepTTL(row, fam, values, clock)
			got, err := ex.SetColumnsKeepTTL(r.ctx, row, fam, bv)
			if e := r.outcome(what, wantErr, err); e != nil {
				return e
			}
			if wantErr == nil {
				if int(got) != want {
					return r.fail(what, fmt.Sprintf("result %d, the model %d", got, want))
				}
				_, _ = r.m.SetColumnsKeepTTL(row, fam, values, clock)
				r.countResult(want)
			}
			break
		}
		r.record(what)
		want, wantErr := r.m.CloneRow(row).SetColumns(row, fam, values, ttl, setCond, clock)
		got, err := ex.SetColumns(r.ctx, row, fam, bv, ttl, ttlclient.SetCondition(setCond))
		if e := r.outcome(what, wantErr, err); e != nil {
			return e
		}
		if wantErr == nil {
			if got != want {
				return r.fail(what, fmt.Sprintf("applied %v, the model %v", got, want))
			}
			_, _ = r.m.SetColumns(row, fam, values, ttl, setCond, clock)
			r.stats.Writes++
			if !got {
				r.stats.NotMet++
			}
		}
	case 6:
		var cols []string
		if !whole {
			cols = []string{col}
		}
		what = fmt.Sprintf("MaxWriteTime %s %s %q at %s", row, fam, cols, clockString(clock))
		r.record(what)
		want, ok, wantErr := r.m.MaxWriteTime(row, fam, cols, clock)
		got, err := ex.MaxWriteTime(r.ctx, row, fam, cols...)
		if wantErr == nil && !ok {
			// No live cell: the library's ErrNoWriteTime, not a refusal.
			if !errors.Is(err, ttlclient.ErrNoWriteTime) {
				return r.fail(what, fmt.Sprintf("the model has no write time, the library: %v, %v", got, err))
			}
			return nil
		}
		if e := r.outcome(what, wantErr, err); e != nil {
			return e
		}
		if wantErr == nil {
			if got.UnixMicro() != want {
				return r.fail(what, fmt.Sprintf("max write time %d, the model %d", got.UnixMicro(), want))
			}
			r.stats.MaxWriteTimes++
		}
		return nil
	}
	return r.writeTime(ex, row, fam, col)
}

// diffResults compares ExpireResultsTo's answer with the model's: "" when
// they agree.
func diffResults(got []ttlclient.ExpireCellResult, want []model.CellRes) string {
	g := make([]model.CellRes, len(got))
	for i, c := range got {
		g[i] = model.CellRes{Family: c.Family, Column: c.Column, TS: int64(c.Timestamp), Res: int(c.Result)}
	}
	if len(want) == 0 && len(g) == 0 {
		return ""
	}
	if fmt.Sprint(g) != fmt.Sprint(want) {
		return fmt.Sprintf("per-cell results %v, the model %v", g, want)
	}
	return ""
}

// countResult counts a lifecycle result in the stats.
func (r *runner) countResult(res int) {
	switch res {
	case model.ResSet, model.ResDeleted:
		r.stats.Moved++
	case model.ResNotMet:
		r.stats.NotMet++
	}
}

// expireCond is the library's option for the model's condition.
func expireCond(c model.Cond) []ttlclient.ExpireOption {
	if o, ok := libCond(c); ok {
		return []ttlclient.ExpireOption{o}
	}
	return nil
}

func columnCond(c model.Cond) []ttlclient.ExpireColumnOption {
	if o, ok := libCond(c); ok {
		return []ttlclient.ExpireColumnOption{o}
	}
	return nil
}

func libCond(c model.Cond) (ttlclient.ExpireCondition, bool) {
	switch c {
	case model.CondNX:
		return ttlclient.OnlyIfNoTTL, true
	case model.CondXX:
		return ttlclient.OnlyIfTTL, true
	case model.CondGT:
		return ttlclient.OnlyIfLater, true
	case model.CondLT:
		return ttlclient.OnlyIfEarlier, true
	case model.CondXXLT:
		return ttlclient.OnlyIfTTLAndEarlier, true
	}
	return 0, false
}

// writeTime reads fam:col's newest live cell through the library and, on a
// write-time family, compares its write time with the model's.
func (r *runner) writeTime(ex Expirer, row, fam, col string) error {
	now := r.now()
	live := r.m.Read(row, now, model.ColumnRange(fam, col, col+"\x00"))
	if len(live) == 0 {
		return nil
	}
	c := live[0]
	want, ok := r.m.WriteTime(row, fam, col, c.TS)
	got, err := ex.WriteTime(r.ctx, bigtable.ReadItem{Row: row, Column: fam + ":" + col, Timestamp: bigtable.Timestamp(c.TS), Value: []byte(c.Value)})
	what := fmt.Sprintf("WriteTime %s", c)
	switch {
	case !ok && err == nil:
		return r.fail(what, fmt.Sprintf("the family records no write time, the library gave %s", got))
	case ok && err != nil:
		return r.fail(what, fmt.Sprintf("the library failed: %v", err))
	case ok && got.UnixMicro() != want:
		return r.fail(what, fmt.Sprintf("write time %d, the model %d", got.UnixMicro(), want))
	}
	if ok {
		r.stats.WriteTimes++
	}
	return nil
}
