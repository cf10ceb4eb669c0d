package provision

import (
	"context"
	"io"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/scan"
	"github.com/bttl/bttl/strategy"
)

// Plan is what Apply would change on one table: the table to create, one
// Change per family, the families whose rule already matches but whose
// strategy can hide stored cells (Unchanged), the change stream's change
// (Stream). Empty reports a table that matches; Write prints the plan.
type Plan = provisionjob.Plan

// Change is one family's change: its Action, the rule before and after,
// whether it lowers or raises a limit, and (for a lowering change of an
// existing family) the Impact Plan's scan found.
type Change = provisionjob.Change

// Action is what a Change does.
type Action = provisionjob.Action

const (
	// CreateFamily creates a missing family with its rule.
	CreateFamily = provisionjob.CreateFamily
	// SetRule replaces an existing family's rule.
	SetRule = provisionjob.SetRule
	// KeepRule changes nothing: the family's rule already matches, but
	// its declared strategy can hide stored cells, and the server keeps
	// no record of the strategy a rule was set for (Plan.Unchanged).
	KeepRule = provisionjob.KeepRule
)

// Impact is what Plan's scan of a family found for a change that lowers
// its rule: the cells and bytes collectable at once, and invisible through
// bttl, and the first of them. The scan reads every row holding the
// family: the counts are exact, never estimated.
type Impact = provisionjob.Impact

// StreamChange is a change of the table's change stream (Plan.Stream):
// the retention before and after, 0 for a disabled stream.
type StreamChange = provisionjob.StreamChange

// AdoptionError is one refusal of a change that would delete or hide
// stored data: the table, the family, the finding (Err, one sentinel per
// kind, each wrapping ErrUnsafeAdoption; errors.Is matches both) and the
// evidence the scan found (the count, how it was counted, the first
// cell). CheckAdoptions, PlanAndCheck, Execute and Apply return one per
// finding, joined (errors.Join); errors.As finds the first.
type AdoptionError = provisionjob.AdoptionError

// FindAdoptionError returns the first *AdoptionError in err's tree (as
// errors.As walks it, through joins) whose finding is finding, one of the
// sentinels (ErrRealTimestamps, ErrHiddenColumns...), or nil if there is
// none. A refusal joins one AdoptionError per finding, so errors.As finds
// only the first, whatever its kind; this finds the one of a kind.
// ErrUnsafeAdoption finds the first of any kind.
func FindAdoptionError(err, finding error) *AdoptionError {
	return provisionjob.FindAdoptionError(err, finding)
}

// Caveat is docs/design.md#replication, printed when a change lowers or
// raises a rule.
const Caveat = provisionjob.Caveat

var (
	// ErrUnsafeAdoption is wrapped by every refusal of a rule change, or
	// of a declared strategy over an unchanged rule, that would delete or
	// hide stored cells, and of a change stream change that drops
	// records: WithForce overrides exactly these.
	ErrUnsafeAdoption = provisionjob.ErrUnsafeAdoption
	// ErrRealTimestamps: a family about to be put on one-second expiry
	// holds cells whose timestamps are at or before now.
	ErrRealTimestamps = provisionjob.ErrRealTimestamps
	// ErrAgeOverSequence: an age rule (one-second or default expiry) is
	// about to be put on a family whose cells are sequence numbers
	// (timestamps before strategy.RealTimeFloor) or whose current rule is
	// max versions.
	ErrAgeOverSequence = provisionjob.ErrAgeOverSequence
	// ErrNotSequenceNumbers: a family about to be put on the sequence
	// strategy holds cells whose timestamps are not sequence numbers.
	ErrNotSequenceNumbers = provisionjob.ErrNotSequenceNumbers
	// ErrHiddenColumns: a family about to have write times
	// (strategy.WithWriteTime) holds cells under qualifiers from 0xFF 0xFF
	// on that are not write-time companions.
	ErrHiddenColumns = provisionjob.ErrHiddenColumns
	// ErrChangeStreamLoss: the plan disables a table's change stream or
	// shortens its retention, dropping records Bigtable kept.
	ErrChangeStreamLoss = provisionjob.ErrChangeStreamLoss
	// ErrPlanMismatch: Execute was given a schema other than the one its
	// plan was made for.
	ErrPlanMismatch = provisionjob.ErrPlanMismatch
	// ErrInvalidOption reports an option the Provisioner cannot act on (a
	// WithWrittenBefore with no instant or a negative clock skew, a
	// WithChangeStream retention out of range), before any RPC.
	ErrInvalidOption = provisionjob.ErrInvalidOption
)

// Option configures a Provisioner, as New builds it.
type Option = provisionjob.Option

// PlanOption configures one Plan, PlanAndCheck or Apply call (Option
// configures the Provisioner). The interface is closed.
type PlanOption = provisionjob.PlanOption

// WithChangeStream makes the plan set the table's change stream
// (docs/design.md#change-stream-config): enabled with retention, between 1
// and 7 days (Bigtable's bounds, truncated to microseconds as Bigtable
// truncates it), or disabled when retention is 0, as
// bigtable.TableConf.ChangeStreamRetention takes it. Without it the plan
// leaves the stream as it is. A retention out of range is refused with
// ErrInvalidOption before any RPC. Disabling the stream or shortening its
// retention drops records Bigtable kept: refused (ErrChangeStreamLoss)
// unless WithForce.
func WithChangeStream(retention time.Duration) PlanOption {
	return provisionjob.WithChangeStream(retention)
}

// WithWrittenBefore gives the evidence that tells, in a family the change
// puts on one-second expiry, cells whose expiry instant has passed from
// real write times (docs/design.md#apply-after-migrate): no writer has
// stored a real or server timestamp in the family since t, on a clock
// within skew of this one, as the operator told bttl migrate
// (-written-before, -clock-skew). A cell stamped after t + skew and at or
// before now is then an expiry instant already passed, counted and
// reported (Plan.Notes, Execute's output), not refused. Cells stamped at
// or before t + skew are refused as before. A zero t or a negative skew is
// refused with ErrInvalidOption.
func WithWrittenBefore(t time.Time, skew time.Duration) Option {
	return provisionjob.WithWrittenBefore(t, skew)
}

// WithForce lets Execute and Apply make a change the safety scans refuse
// (ErrUnsafeAdoption). What is lost is printed to the output.
func WithForce() Option { return provisionjob.WithForce() }

// WithWorkers sets how many key ranges each scan of a family reads at once
// (default 1: one stream, the load a plain ReadRows puts on the cluster);
// see scan.WithWorkers.
func WithWorkers(n int) Option { return provisionjob.WithWorkers(n) }

// WithPacer paces the cells each scan of a family reads with p
// (scan.WithPacer). Default: unpaced.
func WithPacer(p scan.Pacer) Option { return provisionjob.WithPacer(p) }

// WithClock sets the clock the scans compare timestamps with (default: the
// system clock).
func WithClock(c strategy.Clock) Option { return provisionjob.WithClock(c) }

// WithSampleRows sets how many rows of the family the safety scans read
// with WithSampledSafetyScan (default 10,000), spread over the table's
// sampled row-key ranges. Nothing else samples: Plan's count of what a
// lowering change makes collectable reads every row.
func WithSampleRows(n int) Option { return provisionjob.WithSampleRows(n) }

// WithSampledSafetyScan makes the safety scans that decide refusal
// (CheckAdoptions, Execute, Apply) read a sample of WithSampleRows rows
// instead of every row. Unsafe: the sample may miss cells the change
// deletes or hides, and the change then goes ahead; refusals and Execute's
// output say the scan was sampled and not exhaustive.
func WithSampledSafetyScan() Option { return provisionjob.WithSampledSafetyScan() }

// WithAssumeAdopted skips the adoption scans of families whose rule
// already matches (Plan.Unchanged): a sequence or write-time family whose
// stored cells were checked before and written only through bttl since.
// The scans before a rule change still run. Plan.Write names the families
// left unchecked.
func WithAssumeAdopted() Option { return provisionjob.WithAssumeAdopted() }

// WithStall bounds each full scan by what it receives rather than by its
// length: a key range whose read receives nothing for d fails the scan
// (scan.WithStall), however long the whole scan takes. Default 0: the
// context only.
func WithStall(d time.Duration) Option { return provisionjob.WithStall(d) }

// WithCallTimeout bounds each call that is not a full scan (the admin
// calls, and each read of a sampled scan) by d. Default 0: the context
// only.
func WithCallTimeout(d time.Duration) Option { return provisionjob.WithCallTimeout(d) }

// WithOutput sets where Apply prints what it changes (default: nowhere).
func WithOutput(w io.Writer) Option { return provisionjob.WithOutput(w) }

// Provisioner plans and applies GC-rule and change stream changes.
type Provisioner struct{ p *provisionjob.Provisioner }

// New returns a Provisioner using admin for the rules and data for the
// safety scans.
func New(admin *gcrule.Admin, data *bigtable.Client, opts ...Option) *Provisioner {
	return &Provisioner{p: provisionjob.New(admin, data, opts...)}
}

// Plan compares the table with schema (and, with WithChangeStream, its
// change stream) and returns the changes Apply makes. For a change that
// lowers an existing family's rule it reads every row of the family to
// count what becomes collectable (Change.Impact).
func (p *Provisioner) Plan(ctx context.Context, table string, schema strategy.Schema, opts ...PlanOption) (*Plan, error) {
	return p.p.Plan(ctx, table, schema, opts...)
}

// CheckAdoptions runs the safety scans for every change of an existing
// family's rule in plan, and for every family of plan.Unchanged, reading
// every row of the family (a sample with WithSampledSafetyScan). It
// returns nil, a scan error, or the refusals joined (errors.Join), one
// *AdoptionError per finding. Refusals are returned also when forced
// (marked Forced, saying what is lost); Execute then goes ahead.
func (p *Provisioner) CheckAdoptions(ctx context.Context, plan *Plan) error {
	return p.p.CheckAdoptions(ctx, plan)
}

// PlanAndCheck is Plan followed by CheckAdoptions, reading each family
// once: the safety findings of a family Plan read whole are taken from
// that scan. The plan is returned with the refusals too (a scan error
// returns no plan).
func (p *Provisioner) PlanAndCheck(ctx context.Context, table string, schema strategy.Schema, opts ...PlanOption) (*Plan, error) {
	return p.p.PlanAndCheck(ctx, table, schema, opts...)
}

// Execute carries out plan (from Plan, for schema) and prints it. It runs
// the safety scans again and refuses (ErrUnsafeAdoption) unless forced,
// before changing anything; a schema whose policy for a planned family
// differs from the plan's is refused with ErrPlanMismatch.
func (p *Provisioner) Execute(ctx context.Context, plan *Plan, schema strategy.Schema) error {
	return p.p.Execute(ctx, plan, schema)
}

// Apply makes the table match schema and returns the plan it carried out
// (Plan, then Execute).
func (p *Provisioner) Apply(ctx context.Context, table string, schema strategy.Schema, opts ...PlanOption) (*Plan, error) {
	return p.p.Apply(ctx, table, schema, opts...)
}
