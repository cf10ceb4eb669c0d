package provisionjob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/keytext"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
)

// ErrRealTimestamps: a family about to be put on one-second expiry holds
// cells whose timestamps are at or before now (*AdoptionError).
// It wraps ErrUnsafeAdoption.
var ErrRealTimestamps = fmt.Errorf("%w: one-second expiry would delete cells with real timestamps", ErrUnsafeAdoption)

// ErrPlanMismatch: Execute was given a schema other than the one its plan
// was made for; carrying it out could set a rule nobody planned.
var ErrPlanMismatch = errors.New("bttl: plan was made for a different schema")

// Caveat is docs/design.md#replication, printed when a change lowers or raises a rule.
const Caveat = "caveat (replicated tables): lowering a max-versions or max-age rule can take up to a week to reach every cluster, " +
	"and raising max age on a replicated table is limited to 90 days and can leave clusters out of sync; " +
	"reads through bttl stay filtered throughout."

// Action is what a Change does.
type Action uint8

const (
	// CreateFamily creates a missing family with its rule.
	CreateFamily Action = iota + 1
	// SetRule replaces an existing family's rule.
	SetRule
	// KeepRule changes nothing: the family's rule already matches, but
	// its declared strategy can hide stored cells, and the server keeps
	// no record of the strategy a rule was set for (Plan.Unchanged).
	KeepRule
)

// Change is one family's change.
type Change struct {
	Family string
	Action Action
	Policy strategy.Policy
	From   string // the actual rule ("missing family" for CreateFamily)
	To     string // the rule set
	Lowers bool   // a max age or max versions gets smaller (or appears)
	Raises bool   // a max age or max versions gets larger (or goes away)
	// OneSecondAdoption: an existing family is put on one-second expiry.
	OneSecondAdoption bool
	// Impact is what Plan's scan of the family found, for a change of an
	// existing family that lowers its rule (nil otherwise).
	Impact *Impact

	from gcrule.Normal // the current rule
}

func (c Change) String() string {
	switch c.Action {
	case CreateFamily:
		return fmt.Sprintf("create family %q with %s (%s)", c.Family, c.To, c.Policy)
	case KeepRule:
		return fmt.Sprintf("family %q (%s): rule %s unchanged", c.Family, c.Policy, c.From)
	}
	var dir []string
	if c.Lowers {
		dir = append(dir, "lowers")
	}
	if c.Raises {
		dir = append(dir, "raises")
	}
	s := fmt.Sprintf("family %q (%s): %s -> %s", c.Family, c.Policy, c.From, c.To)
	if len(dir) > 0 {
		s += " [" + strings.Join(dir, ", ") + "]"
	}
	return s
}

// Plan is what Apply would change on one table.
type Plan struct {
	Table       string
	CreateTable bool
	Changes     []Change
	// Unchanged are existing families whose rule already matches but
	// whose declared strategy can hide stored cells: sequence (real
	// timestamps outrank every sequence number) and write time (it hides
	// qualifiers from 0xFF 0xFF on). A rule does not say which strategy it
	// was set for, so the adoption scans check these too (Action
	// KeepRule), unless WithAssumeAdopted.
	Unchanged []Change
	// Assumed names the families WithAssumeAdopted left unchecked.
	Assumed []string
	// Stream is the change of the table's change stream, when the call
	// gave WithChangeStream and the table's stream differs (nil
	// otherwise).
	Stream *StreamChange
	// Notes are what PlanAndCheck's safety scans found that is not
	// refused but worth saying (cells WithWrittenBefore proved expiry
	// instants already passed, a sampled scan); Write prints them.
	Notes []string

	// families are the table's families when planned.
	families []string
	// streamPlanned: the call gave WithChangeStream.
	streamPlanned bool
	// scans are Plan's exact scans of the families whose rule a change
	// lowers: PlanAndCheck takes their findings instead of reading the
	// family again.
	scans map[string]*examination
}

// hidesData reports a strategy that can hide cells already stored under
// a rule that matches it.
func hidesData(pol strategy.Policy) bool {
	return pol.Kind() == strategy.KindSequence || pol.HasCompanions()
}

// Empty reports a table that already matches its schema.
func (p *Plan) Empty() bool { return !p.CreateTable && len(p.Changes) == 0 && p.Stream == nil }

// NeedsCaveat reports a change that lowers or raises an existing rule.
func (p *Plan) NeedsCaveat() bool {
	for _, c := range p.Changes {
		if c.Lowers || c.Raises {
			return true
		}
	}
	return false
}

// Write prints the plan: one line per change, with what a lowering change
// makes collectable (Change.Impact), "no change" when empty, and the
// replication caveat when a rule is lowered or raised.
func (p *Plan) Write(w io.Writer) {
	defer p.writeAssumed(w)
	if p.Empty() {
		what := "every family matches the schema"
		if p.streamPlanned {
			what = "every family and the change stream match the schema"
		}
		fmt.Fprintf(w, "table %q: no change (%s)\n", p.Table, what)
		return
	}
	fmt.Fprintf(w, "table %q:\n", p.Table)
	if p.CreateTable {
		fmt.Fprintf(w, "  create table %q\n", p.Table)
	}
	for _, c := range p.Changes {
		fmt.Fprintf(w, "  %s\n", c)
		if c.Impact != nil {
			fmt.Fprintf(w, "    %s\n", c.Impact)
		}
	}
	if p.Stream != nil {
		fmt.Fprintf(w, "  %s\n", p.Stream)
	}
	if p.NeedsCaveat() {
		fmt.Fprintln(w, Caveat)
	}
}

// writeAssumed says which families WithAssumeAdopted left unchecked (the
// others of Plan.Unchanged are checked by CheckAdoptions, which reports
// what it refuses).
func (p *Plan) writeAssumed(w io.Writer) {
	for _, n := range p.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	if len(p.Assumed) > 0 {
		fmt.Fprintf(w, "  stored data of family(ies) %s not checked against the declared strategy (assumed adopted)\n", strings.Join(quoteAll(p.Assumed), ", "))
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures a Provisioner, as New builds it.
type Option func(*options)

// options are what the Options set: apart from the Provisioner, so that an
// Option cannot change a Provisioner in use.
type options struct {
	force      bool
	noImpact   bool
	workers    int
	clock      strategy.Clock
	sampleRows int
	out        io.Writer
	// sampledSafety: the safety scans read a sample (WithSampledSafetyScan).
	sampledSafety bool
	// assumeAdopted: Plan leaves out families whose rule matches
	// (WithAssumeAdopted).
	assumeAdopted bool
	// stall and callTimeout bound the scans and each other call
	// (WithStall, WithCallTimeout); 0: the context only.
	stall, callTimeout time.Duration
	// pacer paces the scans' cells (WithPacer); nil: unpaced.
	pacer scan.Pacer
	// writtenBefore and skew are WithWrittenBefore's (writtenBefore zero:
	// not given).
	writtenBefore    time.Time
	skew             time.Duration
	hasWrittenBefore bool
}

// ErrInvalidOption reports an option the Provisioner cannot act on (a
// WithWrittenBefore with no instant or a negative clock skew), before any
// RPC.
var ErrInvalidOption = errors.New("bttl: invalid provision option")

// WithWrittenBefore gives the evidence that tells, in a family the change
// puts on one-second expiry, cells whose expiry instant has passed from
// real write times (docs/design.md#apply-after-migrate): no writer has
// stored a real or server timestamp in the family since t, on a clock
// within skew of this one, as the operator told bttl migrate
// (-written-before, -clock-skew). A cell stamped after t + skew and at or
// before now is then an expiry instant already passed (a bttl write, or a
// cell migrate moved), which the one-second rule collects as it collects
// any expired cell: counted and reported (Plan.Notes, Execute's output),
// not refused. Cells stamped at or before t + skew are refused as before:
// nothing tells a real write time there from an expiry instant. A zero t
// or a negative skew is refused with ErrInvalidOption.
func WithWrittenBefore(t time.Time, skew time.Duration) Option {
	return func(p *options) { p.writtenBefore, p.skew, p.hasWrittenBefore = t, skew, true }
}

// legacyBound is WithWrittenBefore's t + skew as a timestamp (ok false
// without it), saturating at the largest timestamp.
func (o *options) legacyBound() (bigtable.Timestamp, bool) {
	if !o.hasWrittenBefore {
		return 0, false
	}
	t := o.writtenBefore.Add(o.skew)
	if t.Before(o.writtenBefore) { // overflow of time.Time's range
		return strategy.MaxTimestamp, true
	}
	// UnixMicro, not bigtable.Time: exact past 2262.
	return bigtable.Timestamp(t.UnixMicro()), true
}

// validate refuses options that cannot be acted on, before any RPC.
func (o *options) validate() error {
	switch {
	case !o.hasWrittenBefore:
		return nil
	case o.writtenBefore.IsZero():
		return fmt.Errorf("%w: WithWrittenBefore: no instant (the zero time)", ErrInvalidOption)
	case o.skew < 0:
		return fmt.Errorf("%w: WithWrittenBefore: clock skew %s is negative", ErrInvalidOption, o.skew)
	}
	return nil
}

// WithForce lets Execute and Apply make a change the safety scans refuse
// (ErrUnsafeAdoption): one-second expiry over real timestamps or an age
// rule over sequence numbers (those cells are deleted), the sequence
// strategy over timestamps that are not sequence numbers (they hide new
// writes). What is lost is printed to the output.
func WithForce() Option { return func(p *options) { p.force = true } }

// WithoutImpact makes Plan read no data for the changes that lower a rule:
// Change.Impact stays nil. For callers that need the changes and
// Plan.Unchanged only (bttl verify), since the exact count reads every row
// of the family. The safety scans are not affected.
func WithoutImpact() Option { return func(p *options) { p.noImpact = true } }

// WithWorkers sets how many key ranges each scan of a family reads at once
// (default 1: one stream, the load a plain ReadRows puts on the cluster);
// see scan.WithWorkers.
func WithWorkers(n int) Option { return func(p *options) { p.workers = max(n, 1) } }

// WithPacer paces the cells each scan of a family reads with p
// (scan.WithPacer): bttl plan and apply give the adaptive pace that lowers
// its rate when the server answers RESOURCE_EXHAUSTED. Default: unpaced.
func WithPacer(p scan.Pacer) Option { return func(o *options) { o.pacer = p } }

// WithClock sets the clock the sample scans compare timestamps with
// (default: the system clock).
func WithClock(c strategy.Clock) Option { return func(p *options) { p.clock = c } }

// WithSampleRows sets how many rows of the family the safety scans read
// with WithSampledSafetyScan (default 10,000), spread over the table's
// sampled row-key ranges. Nothing else samples: Plan's count of what a
// lowering change makes collectable reads every row.
func WithSampleRows(n int) Option { return func(p *options) { p.sampleRows = n } }

// WithSampledSafetyScan makes the safety scans that decide refusal
// (CheckAdoptions, Execute, Apply) read a sample of WithSampleRows rows
// instead of every row. Unsafe: the sample may miss cells the change
// deletes or hides, and the change then goes ahead; refusals and Execute's
// output say the scan was sampled and not exhaustive.
func WithSampledSafetyScan() Option { return func(p *options) { p.sampledSafety = true } }

// WithAssumeAdopted skips the adoption scans of families whose rule
// already matches (Plan.Unchanged): a sequence or write-time family whose
// stored cells were checked before (by an earlier apply, verify or audit)
// and written only through bttl since. The scans before a rule change
// still run (WithForce overrides their refusals). Plan.Write names the
// families left unchecked.
func WithAssumeAdopted() Option { return func(p *options) { p.assumeAdopted = true } }

// WithStall bounds each full scan by what it receives rather than by its
// length: a key range whose read receives nothing for d fails the scan
// (scan.WithStall), however long the whole scan takes. Default 0: the
// context only.
func WithStall(d time.Duration) Option { return func(p *options) { p.stall = max(d, 0) } }

// WithCallTimeout bounds each call that is not a full scan (the admin
// calls, and each read of a sampled scan) by d. Default 0: the context
// only. With WithStall, the caller's context then need not bound a scan
// whose length it cannot know.
func WithCallTimeout(d time.Duration) Option { return func(p *options) { p.callTimeout = max(d, 0) } }

// call is the context of one call that is not a full scan.
func (p *Provisioner) call(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.callTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, p.callTimeout)
}

// WithOutput sets where Apply prints what it changes (default: nowhere).
func WithOutput(w io.Writer) Option { return func(p *options) { p.out = w } }

// Provisioner plans and applies GC-rule changes.
type Provisioner struct {
	admin *gcrule.Admin
	data  *bigtable.Client
	options
}

// New returns a Provisioner using admin for the rules and data for the
// one-second safety scan.
func New(admin *gcrule.Admin, data *bigtable.Client, opts ...Option) *Provisioner {
	p := &Provisioner{admin: admin, data: data, options: options{clock: systemClock{}, workers: 1, sampleRows: 10_000, out: io.Discard}}
	for _, o := range opts {
		o(&p.options)
	}
	return p
}

// Plan compares the table with schema (and, with WithChangeStream, its
// change stream) and returns the changes Apply makes.
func (p *Provisioner) Plan(ctx context.Context, table string, schema strategy.Schema, opts ...PlanOption) (*Plan, error) {
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	po, err := planConfig(opts)
	if err != nil {
		return nil, err
	}
	cctx, cancel := p.call(ctx)
	fams, err := p.admin.Families(cctx, table)
	cancel()
	plan := &Plan{Table: table, streamPlanned: po.stream}
	switch {
	case status.Code(err) == codes.NotFound:
		plan.CreateTable = true
		fams = nil
	case err != nil:
		return nil, bttlerr.Wrap(err, "read GC rules of table %q", table)
	}
	for f := range fams {
		plan.families = append(plan.families, f)
	}
	names := make([]string, 0, len(schema))
	for f := range schema {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		pol := schema[f]
		m := gcrule.Check(table, f, pol, fams[f])
		if m == nil {
			if plan.CreateTable || !hidesData(pol) {
				continue
			}
			if p.assumeAdopted {
				plan.Assumed = append(plan.Assumed, f)
				continue
			}
			rule := fams[f].GetGcRule()
			plan.Unchanged = append(plan.Unchanged, Change{Family: f, Action: KeepRule, Policy: pol, From: gcrule.Describe(rule), To: gcrule.Describe(rule), from: gcrule.Normalize(rule)})
			continue
		}
		c := Change{Family: f, Policy: pol, From: m.Actual, To: gcrule.ExpectedString(pol)}
		if !pol.Managed() {
			c.To = "no GC rule"
		}
		if m.Kind == gcrule.MissingFamily {
			c.Action = CreateFamily
		} else {
			c.Action = SetRule
			c.from = gcrule.Normalize(fams[f].GetGcRule())
			c.Lowers, c.Raises = direction(c.from, gcrule.Normalize(gcrule.Expected(pol)))
			c.OneSecondAdoption = pol.Kind() == strategy.KindOneSecond
			if c.Lowers && !p.noImpact {
				// One exact scan gives the count and the safety
				// findings (PlanAndCheck takes them from the plan).
				x, err := p.examine(ctx, table, plan.families, c, p.now(), true, false)
				if err != nil {
					return nil, err
				}
				c.Impact = x.impact()
				if plan.scans == nil {
					plan.scans = map[string]*examination{}
				}
				plan.scans[f] = x
			}
		}
		plan.Changes = append(plan.Changes, c)
	}
	if err := p.planStream(ctx, plan, po); err != nil {
		return nil, err
	}
	return plan, nil
}

func (p *Provisioner) now() bigtable.Timestamp {
	return bigtable.Timestamp(p.clock.Now().UnixMicro())
}

// direction compares each limit: a limit that appears or shrinks lowers,
// one that disappears or grows raises.
func direction(from, to gcrule.Normal) (lowers, raises bool) {
	cmp := func(hasFrom bool, f int64, hasTo bool, t int64) {
		switch {
		case hasTo && (!hasFrom || t < f):
			lowers = true
		case hasFrom && (!hasTo || t > f):
			raises = true
		}
	}
	cmp(from.HasAge, int64(from.Age), to.HasAge, int64(to.Age))
	cmp(from.HasVersions, from.Versions, to.HasVersions, to.Versions)
	return lowers, raises
}

// Apply makes the table match schema and returns the plan it carried out.
// It refuses a change that would delete or hide stored cells
// (ErrUnsafeAdoption; see CheckAdoptions) unless forced, before changing
// anything.
func (p *Provisioner) Apply(ctx context.Context, table string, schema strategy.Schema, opts ...PlanOption) (*Plan, error) {
	plan, err := p.Plan(ctx, table, schema, opts...)
	if err != nil {
		return nil, err
	}
	return plan, p.Execute(ctx, plan, schema)
}

// CheckAdoptions runs the safety scans for every change of an existing
// family's rule in plan, and for every family of plan.Unchanged. They read every row of the family (values
// stripped), stopping only once they have found enough offending cells to
// refuse (the count is then a lower bound, and says so); with
// WithSampledSafetyScan, a sample of rows instead. It returns nil, a scan error, or the refusals joined
// (errors.Join), each an *AdoptionError wrapping ErrUnsafeAdoption and
// the sentinel of its finding:
//   - ErrRealTimestamps: one-second expiry over cells at or before now;
//   - ErrAgeOverSequence: an age rule over sequence numbers (timestamps
//     before strategy.RealTimeFloor), or over cells past the new max age
//     when the current rule is max versions;
//   - ErrNotSequenceNumbers: the sequence strategy over timestamps that
//     are not seq*1000 below strategy.RealTimeFloor;
//   - ErrHiddenColumns: write times over qualifiers from 0xFF 0xFF on
//     that are not write-time companions;
//   - ErrChangeStreamLoss: a plan that disables the change stream or
//     shortens its retention (WithChangeStream).
//
// Refusals are returned also when forced (marked Forced, saying what is
// lost), so callers can show them; Execute then goes ahead.
func (p *Provisioner) CheckAdoptions(ctx context.Context, plan *Plan) error {
	_, err := p.checkAdoptions(ctx, plan, append(append([]Change(nil), plan.Changes...), plan.Unchanged...), false)
	if err != nil && !errors.Is(err, ErrUnsafeAdoption) {
		return err
	}
	return errors.Join(err, p.streamRefusal(plan))
}

// PlanAndCheck is Plan followed by CheckAdoptions, reading each family
// once: a family whose rule a change lowers was read whole by Plan (for
// Change.Impact), and its safety findings are taken from that scan, made
// at the plan's time, instead of reading it again. The plan is returned
// with the refusals too (a scan error returns no plan). Execute reads
// again, as it acts.
func (p *Provisioner) PlanAndCheck(ctx context.Context, table string, schema strategy.Schema, opts ...PlanOption) (*Plan, error) {
	plan, err := p.Plan(ctx, table, schema, opts...)
	if err != nil {
		return nil, err
	}
	notes, err := p.checkAdoptions(ctx, plan, append(append([]Change(nil), plan.Changes...), plan.Unchanged...), true)
	plan.Notes = notes
	if err != nil && !errors.Is(err, ErrUnsafeAdoption) {
		return nil, err
	}
	if err = errors.Join(err, p.streamRefusal(plan)); err != nil {
		return plan, err
	}
	return plan, nil
}

// CheckUnchanged runs the safety scans of plan.Unchanged only: whether the
// stored cells of the families whose rule already matches fit their
// declared strategy (what bttl verify adds to the rule check).
func (p *Provisioner) CheckUnchanged(ctx context.Context, plan *Plan) error {
	_, err := p.checkAdoptions(ctx, plan, plan.Unchanged, false)
	return err
}

// checkAdoptions is CheckAdoptions over changes, also returning, for a
// sampled safety scan, a note per family saying it was not exhaustive.
// planned takes the findings of Plan's exact scans where there are some.
func (p *Provisioner) checkAdoptions(ctx context.Context, plan *Plan, changes []Change, planned bool) (notes []string, err error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	var errs []error
	now := p.now()
	for _, c := range changes {
		if c.Action == CreateFamily || !c.Policy.Managed() {
			continue
		}
		x := plan.scans[c.Family]
		if !planned || x == nil {
			if x, err = p.examine(ctx, plan.Table, plan.families, c, now, false, p.sampledSafety); err != nil {
				return nil, err
			}
		}
		if x.sampled && !x.exact {
			notes = append(notes, fmt.Sprintf("safety scan of table %q, family %q: sampled %d row(s), not exhaustive: cells outside the sample were not checked",
				plan.Table, c.Family, x.rows))
		}
		if f := x.passed; f.cells > 0 {
			bound, _ := p.legacyBound()
			notes = append(notes, fmt.Sprintf("table %q, family %q: %d cell(s) stamped after %s (-written-before plus the clock skew) and at or before now %s "+
				"(first: row %s, column %s, timestamp %s): expiry instants already passed (bttl writes, or cells bttl migrate moved), not real timestamps; "+
				"the one-second rule collects them as expired (docs/design.md#apply-after-migrate)",
				plan.Table, c.Family, f.cells, formatTimestamp(bound), formatTimestamp(x.now), keytext.Quote(f.row), keytext.Quote(f.column), formatTimestamp(f.ts)))
		}
		errs = append(errs, x.refusals(plan.Table, c, x.now, p.force)...)
	}
	return notes, errors.Join(errs...)
}

// Execute carries out plan (from Plan, for schema) and prints it. A schema
// whose policy for a planned family differs from the plan's is refused with
// ErrPlanMismatch before anything changes.
func (p *Provisioner) Execute(ctx context.Context, plan *Plan, schema strategy.Schema) error {
	for _, c := range plan.Changes {
		if pol, ok := schema[c.Family]; !ok || pol != c.Policy {
			return fmt.Errorf("%w: table %q, family %q planned as %s, schema has %s", ErrPlanMismatch, plan.Table, c.Family, c.Policy, describePolicy(pol, ok))
		}
	}
	notes, err := p.checkAdoptions(ctx, plan, append(append([]Change(nil), plan.Changes...), plan.Unchanged...), false)
	if err == nil || errors.Is(err, ErrUnsafeAdoption) {
		err = errors.Join(err, p.streamRefusal(plan))
	}
	if err != nil {
		if !p.force || !errors.Is(err, ErrUnsafeAdoption) {
			return err
		}
		// Each refusal is marked Forced and says what is lost.
		fmt.Fprintf(p.out, "%v\n", err)
	}
	for _, n := range notes {
		fmt.Fprintln(p.out, n)
	}
	ac := p.admin.Client()
	if plan.CreateTable {
		cctx, cancel := p.call(ctx)
		err := ac.CreateTable(cctx, plan.Table)
		cancel()
		if err != nil {
			return bttlerr.Wrap(err, "create table %q", plan.Table)
		}
	}
	for _, c := range plan.Changes {
		pol := c.Policy
		var err error
		cctx, cancel := p.call(ctx)
		switch {
		case c.Action == CreateFamily && pol.Managed():
			err = ac.CreateColumnFamilyWithConfig(cctx, plan.Table, c.Family, bigtable.Family{GCPolicy: pol.GCPolicy()})
		case c.Action == CreateFamily:
			err = ac.CreateColumnFamily(cctx, plan.Table, c.Family)
		default:
			err = ac.SetGCPolicy(cctx, plan.Table, c.Family, pol.GCPolicy())
		}
		cancel()
		if err != nil {
			return bttlerr.Wrap(err, "%s", c)
		}
	}
	if err := p.executeStream(ctx, ac, plan); err != nil {
		return err
	}
	plan.Write(p.out)
	return nil
}

// splitRanges turns sampled split keys into the ranges between them.
func splitRanges(keys []string) []bigtable.RowRange {
	var out []bigtable.RowRange
	start := ""
	for _, k := range keys {
		if k == "" || k <= start {
			continue
		}
		out = append(out, bigtable.NewRange(start, k))
		start = k
	}
	return append(out, bigtable.InfiniteRange(start))
}

func describePolicy(pol strategy.Policy, ok bool) string {
	if !ok {
		return "no such family"
	}
	return pol.String()
}
