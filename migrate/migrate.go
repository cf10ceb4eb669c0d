package migrate

import (
	"context"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/scan"
	"github.com/bttl/bttl/strategy"
)

// Plan is one migration: the cells of Family, written under From, are
// rewritten onto To, in place or copied into ToFamily. Its Validate says
// why a plan cannot run, Steps and NextStep the order of steps around it.
type Plan = migratejob.Plan

// TTLRule gives a TTL to the cells of rows whose key starts with Prefix
// ("" any row) in column Column ("" any column): a migration from real
// write times gives such a cell the expiry write time + TTL.
type TTLRule = migratejob.TTLRule

// TTLRules are tried in order; the first that matches a cell gives its
// TTL. Validate requires a last rule matching every cell.
type TTLRules = migratejob.TTLRules

// ExpiredAction is what an in-place run does with cells already expired
// under the target policy (Plan.Expired).
type ExpiredAction = migratejob.ExpiredAction

const (
	// KeepExpired (the default) leaves an expired cell as it is, counted:
	// reads through bttl hide it and GC collects it once the target's rule
	// is applied.
	KeepExpired = migratejob.KeepExpired
	// DeleteExpired deletes it (pinned, like a move), only with
	// Plan.ExpiredAsOf and Plan.ExpectExpired from a dry run.
	DeleteExpired = migratejob.DeleteExpired
)

// DefaultClockSkew is the clocks' error a plan allows for without
// Plan.ClockSkew.
const DefaultClockSkew = migratejob.DefaultClockSkew

// DefaultInflight is the number of conditional row mutations a Run keeps in
// flight per scan worker without WithInflight.
const DefaultInflight = migratejob.DefaultInflight

// Report is what Run did: its Stats, what earlier runs recorded in the
// checkpoint, the instant expiry was judged at, and the scan's summary.
type Report = migratejob.Report

// Stats counts what a run did to the cells it read: moved, already on the
// target, expired, ambiguous, changed by a writer meanwhile, and so on,
// with examples.
type Stats = migratejob.Stats

// Example is one cell a run changed or left ambiguous, as Stats keeps it.
type Example = migratejob.Example

// ReportCell is one cell in a JSON report (CopyCheck.Cells).
type ReportCell = migratejob.ReportCell

// CopyCheck is what CheckCopy found: the target family's cells set against
// the source's. Its Clean says the target serves nothing the source lacks.
type CopyCheck = migratejob.CopyCheck

// Mirror carries the deletions writers make in a copy's source family to
// the cells copied from them into the target family (NewMirror). Its
// methods mirror bigtable.Mutation's (Set, DeleteTimestampRange,
// DeleteCellsInColumn, DeleteCellsInFamily, and SetTarget,
// DeleteTargetTimestampRange for writers already switched), adding to the
// caller's mutation both the change and its mirror, so one row mutation
// stays atomic.
type Mirror = migratejob.Mirror

// Errors a plan, a TTL rule or a run gives.
var (
	// ErrInvalidPlan: a Plan that cannot run (a *PlanError).
	ErrInvalidPlan = migratejob.ErrInvalidPlan
	// ErrInvalidTTLRule: a TTL rule that does not parse or can never
	// apply (a *TTLRuleError).
	ErrInvalidTTLRule = migratejob.ErrInvalidTTLRule
	// ErrExpiredCount: a DeleteExpired run counted another number of
	// expired cells than the plan expects (an *ExpiredCountError); nothing
	// was deleted.
	ErrExpiredCount = migratejob.ErrExpiredCount
)

// PlanError is a Plan that cannot run; it wraps ErrInvalidPlan.
type PlanError = migratejob.PlanError

// TTLRuleError is an invalid TTL rule; it wraps ErrInvalidTTLRule.
type TTLRuleError = migratejob.TTLRuleError

// ExpiredCountError is a DeleteExpired run whose count of expired cells is
// not the plan's; it wraps ErrExpiredCount.
type ExpiredCountError = migratejob.ExpiredCountError

// ParseTTLRule reads one TTL rule in the form the CLI's -ttl takes:
// comma-separated key=value pairs, prefix, column and ttl (required), e.g.
// "prefix=user#,column=session,ttl=12h". Durations are Go durations with
// days (d) and weeks (w). TTLRules.Validate checks a list.
func ParseTTLRule(s string) (TTLRule, error) { return migratejob.ParseTTLRule(s) }

// NewMirror returns the Mirror of a copy plan (Plan.ToFamily set); in place
// nothing is copied, and it refuses (ErrInvalidPlan).
func NewMirror(p Plan) (*Mirror, error) { return migratejob.NewMirror(p) }

// An Option configures a Migrator, as New builds it.
type Option = migratejob.Option

// WithClock sets the clock that decides which cells are expired (default:
// the system clock).
func WithClock(c strategy.Clock) Option { return migratejob.WithClock(c) }

// WithDryRun makes the Migrator count and collect examples of what it
// would change, and write nothing.
func WithDryRun() Option { return migratejob.WithDryRun() }

// WithCheckpoint makes Run keep its progress in the file at path,
// recording the plan as the checkpoint's job: a restarted Run skips the
// ranges finished, and a checkpoint written for another plan (or a dry
// run) is refused.
func WithCheckpoint(path string) Option { return migratejob.WithCheckpoint(path) }

// WithWriteTimeout bounds each conditional write Run sends: one that gets
// no answer within d fails Run with a *scan.StallError, as a read that
// stalls does (scan.WithStall, which watches reads only). 0, the default:
// no bound but the context's.
func WithWriteTimeout(d time.Duration) Option { return migratejob.WithWriteTimeout(d) }

// WithExamples keeps up to n examples of changed cells, and as many of
// ambiguous ones, in Stats (default 5).
func WithExamples(n int) Option { return migratejob.WithExamples(n) }

// WithAllAmbiguous keeps every ambiguous cell the run reads in
// Stats.AmbiguousExamples, not only the first WithExamples. Each takes
// memory (its row key and column) until the Migrator is dropped.
func WithAllAmbiguous() Option { return migratejob.WithAllAmbiguous() }

// WithInflight sets how many rows' conditional mutations Run keeps in
// flight per scan worker (default DefaultInflight).
func WithInflight(n int) Option { return migratejob.WithInflight(n) }

// WithWriteTable sends the moves (CheckAndMutateRow), and the reads that
// must see the latest writes, through w instead of New's table, which then
// serves the scan only: w is the same table opened on a client with
// another app profile (production allows CheckAndMutateRow only through a
// single-cluster profile that allows transactional writes, while a Data
// Boost profile suits the scan; docs/design.md#app-profiles).
func WithWriteTable(w *bigtable.Table) Option { return migratejob.WithWriteTable(w) }

// A Migrator runs one Plan on one table (New).
type Migrator struct{ m *migratejob.Migrator }

// New checks plan (Plan.Validate; and, in place, that WrittenBefore plus
// the clock skew and ExpiredAsOf are not after now) and returns a Migrator
// for tbl, named table (for the checkpoint). Expiry is judged at the
// clock's time when New is called, the same for every cell of the run
// (Report.Now).
func New(tbl *bigtable.Table, table string, plan Plan, opts ...Option) (*Migrator, error) {
	m, err := migratejob.New(tbl, table, plan, opts...)
	if err != nil {
		return nil, err
	}
	return &Migrator{m: m}, nil
}

// Run scans the table (opts set the workers, the cells/s limit, the shard
// and the key range) and migrates every row. With WithCheckpoint (or
// scan.WithCheckpoint, which records the plan the same way) a
// restarted run skips the ranges finished and reads the others again,
// which moves nothing twice; a range where a cell was left unmoved
// (Stats.Unmoved) is not recorded finished. Under DeleteExpired, Run first
// counts the expired cells (a read-only pass) and returns an
// *ExpiredCountError, having written nothing, unless the count is
// Plan.ExpectExpired. The Report is returned also with an error.
func (m *Migrator) Run(ctx context.Context, opts ...scan.Option) (*Report, error) {
	return m.m.Run(ctx, opts...)
}

// CheckCopy reads the source and target families of a copy plan and
// reports every target cell that is not the copy of a stored source cell:
// the proof that the target serves nothing the source lacks. It writes
// nothing, and is exact while the target is written by the copy alone.
// scan options as for Run, but a checkpoint is refused (*scan.OptionError):
// the check is read again whole every time.
func (m *Migrator) CheckCopy(ctx context.Context, opts ...scan.Option) (*CopyCheck, error) {
	return m.m.CheckCopy(ctx, opts...)
}
