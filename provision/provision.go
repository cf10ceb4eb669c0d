package provision

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

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// ErrRealTimestamps: a family about to be put on one-second expiry holds
// cells whose timestamps are at or before now; see *RealTimestampsError.
var ErrRealTimestamps = errors.New("bttl: one-second expiry would delete cells with real timestamps")

// ErrPlanMismatch: Execute was given a schema other than the one its plan
// was made for; carrying it out could set a rule nobody planned.
var ErrPlanMismatch = errors.New("bttl: plan was made for a different schema")

// RealTimestampsError names the family and the cells the sample scan found.
type RealTimestampsError struct {
	Table, Family string
	// Cells is how many such cells the sample held (a lower bound).
	Cells int64
	// Row, Column and Timestamp are the first one found.
	Row, Column string
	Timestamp   bigtable.Timestamp
	Now         bigtable.Timestamp
}

func (e *RealTimestampsError) Error() string {
	return fmt.Sprintf("%v: table %q, family %q: %d sampled cell(s) with timestamps at or before now %d (first: row %q, column %q, timestamp %d); "+
		"they would expire at once: move them first, or force", ErrRealTimestamps, e.Table, e.Family, e.Cells, e.Now, e.Row, e.Column, e.Timestamp)
}

func (e *RealTimestampsError) Unwrap() error { return ErrRealTimestamps }

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
}

func (c Change) String() string {
	if c.Action == CreateFamily {
		return fmt.Sprintf("create family %q with %s (%s)", c.Family, c.To, c.Policy)
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
}

// Empty reports a table that already matches its schema.
func (p *Plan) Empty() bool { return !p.CreateTable && len(p.Changes) == 0 }

// NeedsCaveat reports a change that lowers or raises an existing rule.
func (p *Plan) NeedsCaveat() bool {
	for _, c := range p.Changes {
		if c.Lowers || c.Raises {
			return true
		}
	}
	return false
}

// Write prints the plan: one line per change, "no change" when empty, and
// the replication caveat when a rule is lowered or raised.
func (p *Plan) Write(w io.Writer) {
	if p.Empty() {
		fmt.Fprintf(w, "table %q: no change (every family matches the schema)\n", p.Table)
		return
	}
	fmt.Fprintf(w, "table %q:\n", p.Table)
	if p.CreateTable {
		fmt.Fprintf(w, "  create table %q\n", p.Table)
	}
	for _, c := range p.Changes {
		fmt.Fprintf(w, "  %s\n", c)
	}
	if p.NeedsCaveat() {
		fmt.Fprintln(w, Caveat)
	}
}

// Clock tells the time the sample scan compares timestamps with.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures a Provisioner.
type Option func(*Provisioner)

// WithForce lets Apply put a family holding real timestamps on one-second
// expiry: those cells are deleted.
func WithForce() Option { return func(p *Provisioner) { p.force = true } }

// WithClock sets the clock (default: the system clock).
func WithClock(c Clock) Option { return func(p *Provisioner) { p.clock = c } }

// WithSampleRows sets how many rows the one-second safety scan reads
// (default 10,000), spread over the table's sampled row-key ranges.
func WithSampleRows(n int) Option { return func(p *Provisioner) { p.sampleRows = n } }

// WithOutput sets where Apply prints what it changes (default: nowhere).
func WithOutput(w io.Writer) Option { return func(p *Provisioner) { p.out = w } }

// Provisioner plans and applies GC-rule changes.
type Provisioner struct {
	admin      *gcrule.Admin
	data       *bigtable.Client
	force      bool
	clock      Clock
	sampleRows int
	out        io.Writer
}

// New returns a Provisioner using admin for the rules and data for the
// one-second safety scan.
func New(admin *gcrule.Admin, data *bigtable.Client, opts ...Option) *Provisioner {
	p := &Provisioner{admin: admin, data: data, clock: systemClock{}, sampleRows: 10_000, out: io.Discard}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Plan compares the table with schema and returns the changes Apply makes.
func (p *Provisioner) Plan(ctx context.Context, table string, schema strategy.Schema) (*Plan, error) {
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	fams, err := p.admin.Families(ctx, table)
	plan := &Plan{Table: table}
	switch {
	case status.Code(err) == codes.NotFound:
		plan.CreateTable = true
		fams = nil
	case err != nil:
		return nil, fmt.Errorf("bttl: read GC rules of table %q: %w", table, err)
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
			c.Lowers, c.Raises = direction(gcrule.Normalize(fams[f].GetGcRule()), gcrule.Normalize(gcrule.Expected(pol)))
			c.OneSecondAdoption = pol.Kind() == strategy.KindOneSecond
		}
		plan.Changes = append(plan.Changes, c)
	}
	return plan, nil
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
// It refuses a one-second adoption over real timestamps (see
// RealTimestampsError) unless forced, before changing anything.
func (p *Provisioner) Apply(ctx context.Context, table string, schema strategy.Schema) (*Plan, error) {
	plan, err := p.Plan(ctx, table, schema)
	if err != nil {
		return nil, err
	}
	return plan, p.Execute(ctx, plan, schema)
}

// CheckAdoptions runs the one-second safety scan for every adoption in
// plan: nil, or a *RealTimestampsError (also when forced, so callers can
// show it; Execute ignores it when forced).
func (p *Provisioner) CheckAdoptions(ctx context.Context, plan *Plan) error {
	for _, c := range plan.Changes {
		if !c.OneSecondAdoption {
			continue
		}
		if err := p.scan(ctx, plan.Table, c.Family); err != nil {
			return err
		}
	}
	return nil
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
	if err := p.CheckAdoptions(ctx, plan); err != nil {
		var rt *RealTimestampsError
		if !p.force || !errors.As(err, &rt) {
			return err
		}
		fmt.Fprintf(p.out, "forced: %v\n", err)
	}
	ac := p.admin.Client()
	if plan.CreateTable {
		if err := ac.CreateTable(ctx, plan.Table); err != nil {
			return fmt.Errorf("bttl: create table %q: %w", plan.Table, err)
		}
	}
	for _, c := range plan.Changes {
		pol := c.Policy
		var err error
		switch {
		case c.Action == CreateFamily && pol.Managed():
			err = ac.CreateColumnFamilyWithConfig(ctx, plan.Table, c.Family, bigtable.Family{GCPolicy: pol.GCPolicy()})
		case c.Action == CreateFamily:
			err = ac.CreateColumnFamily(ctx, plan.Table, c.Family)
		default:
			err = ac.SetGCPolicy(ctx, plan.Table, c.Family, pol.GCPolicy())
		}
		if err != nil {
			return fmt.Errorf("bttl: %s: %w", c, err)
		}
	}
	plan.Write(p.out)
	return nil
}

// scan looks for cells of family with timestamps at or before now in a
// sample of rows holding the family, spread over the table's row-key
// ranges.
func (p *Provisioner) scan(ctx context.Context, table, family string) error {
	tbl := p.data.Open(table)
	now := bigtable.Timestamp(p.clock.Now().UnixMicro())
	// Timestamps are checked here, not by a server-side range: with a
	// range filter LimitRows would count only matching rows and a clean
	// table would be read to its end.
	f := bigtable.ChainFilters(bigtable.FamilyFilter(filters.FamilyRegex(family)), bigtable.StripValueFilter())
	keys, err := tbl.SampleRowKeys(ctx)
	if err != nil {
		return fmt.Errorf("bttl: sample row keys of %q: %w", table, err)
	}
	ranges := splitRanges(keys)
	per := p.sampleRows / len(ranges)
	if per < 1 {
		per = 1
	}
	found := &RealTimestampsError{Table: table, Family: family, Now: now}
	for _, rr := range ranges {
		err := tbl.ReadRows(ctx, rr, func(r bigtable.Row) bool {
			for _, it := range r[family] {
				if it.Timestamp > now {
					continue
				}
				if found.Cells == 0 {
					found.Row, found.Column, found.Timestamp = it.Row, strings.TrimPrefix(it.Column, family+":"), it.Timestamp
				}
				found.Cells++
			}
			return true
		}, bigtable.RowFilter(f), bigtable.LimitRows(int64(per)))
		if err != nil {
			return fmt.Errorf("bttl: sample scan of %q: %w", table, err)
		}
	}
	if found.Cells > 0 {
		return found
	}
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
