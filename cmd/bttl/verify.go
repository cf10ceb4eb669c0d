package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/gcrule"
	migrate "github.com/bttl/bttl/internal/migratejob"
	provision "github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/internal/timefmt"
	"github.com/bttl/bttl/strategy"
)

var verifyCommand = command{
	name: "verify", needsSchema: true,
	synopsis: []string{"[-table T] [-assume-adopted]"},
	short:    "compare each table's families and GC rules with the schema file",
	help: `Compares each table's column families and GC rules with the schema file.
A missing table or family, or a rule other than the strategy needs, is a
mismatch (exit 1); every table is checked. A GC rule does not say which
strategy it was set for, so the stored cells of each sequence or write-time
family whose rule matches are read too (values stripped), as apply's
adoption scan reads them: real timestamps in a sequence family, or columns
under the reserved qualifiers of a write-time family, are a mismatch
(exit 1). -assume-adopted skips that scan: then only GetTable is called.
A table the schema file gives a change_stream_retention is also checked for
its change stream: off, or another retention, is a mismatch.
`,
	setup: func(fs *flag.FlagSet) invocation {
		only := tableFlag(fs)
		assume := assumeAdoptedFlag(fs)
		return invocation{run: func(e *env) int { return verify(e, *only, *assume) }}
	},
}

// assumeAdoptedFlag is -assume-adopted (provision.WithAssumeAdopted).
func assumeAdoptedFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("assume-adopted", false, "do not read the stored cells of sequence and write-time families whose GC rule already matches "+
		"(their data was checked before and written only through bttl since); a rule change is still checked")
}

var planCommand = command{
	name: "plan", needsSchema: true,
	synopsis: []string{"[-table T] [-family F,G] [-workers N] [-assume-adopted] [-written-before TIME [-clock-skew D]]"},
	short:    "show the changes apply would make, with exact counts, and those it would refuse",
	help: `Shows the family and GC-rule changes apply would make, how many stored cells
a lowering change makes collectable (an exact count: each such family is
read whole, once, and that one read also decides refusal), and the changes
apply would refuse without -force, including a sequence or
write-time family whose rule already matches but whose stored cells the
strategy would hide (-assume-adopted skips that scan). Changes nothing.
Exit status 1 when apply would refuse a change (as apply then exits), 0
otherwise. -family plans the named families only, as apply -family makes
them. -written-before tells cells whose expiry has passed from real
timestamps, as apply takes it. A table the schema file gives a
change_stream_retention has its change stream planned too (not with
-family); disabling it or shortening its retention is refused like a
change that deletes cells.
`,
	setup: func(fs *flag.FlagSet) invocation {
		only := tableFlag(fs)
		fams := familiesFlag(fs)
		fs.Bool("exact", false, "no effect: the count is always exact (kept so that scripts still run)")
		workers := int64(1)
		fs.Var(countFlag{&workers, 1}, "workers", "read this many key ranges of a family at once (`n` streams)")
		assume := assumeAdoptedFlag(fs)
		var lw legacyWindow
		lw.register(fs)
		return invocation{check: func() error { return lw.checkFor(*only, *fams) }, run: func(e *env) int { return plan(e, *only, *fams, int(workers), *assume, lw.options()...) }}
	},
}

var applyCommand = command{
	name: "apply", needsSchema: true,
	synopsis: []string{"[-table T] [-family F,G] [-yes] [-force] [-assume-adopted] [-written-before TIME [-clock-skew D]]"},
	short:    "make those changes (asks first; refuses data loss unless -force)",
	help: `Creates missing tables and families and sets the GC rules the schema's
strategies need, after showing the plan and asking for confirmation (-yes:
don't ask). Refuses (exit 1, nothing changed) a rule change that would
delete or hide stored cells unless -force; the scan that decides this reads
every row of the family.
A rule does not say which strategy it was set for, so the scan also reads
sequence and write-time families whose rule already matches, and refuses
the same way (-assume-adopted skips them). A refusal holds back every change
of the run: -family F,G applies the named families' changes only, so a safe
change need not wait for a refused one (the families not named are left as
they are).
A table the schema file gives a change_stream_retention (1d to 7d, or off)
has its change stream enabled, changed or disabled to match (not with
-family, which changes families only); disabling it or shortening its
retention drops records Bigtable kept, refused unless -force.
A timestamp alone does not say whether a cell at or before now is a real
write time (one-second expiry would delete it) or an expiry instant already
passed (a cell bttl wrote or bttl migrate moved, which the rule collects as
expired): after a migration, -written-before T (and -clock-skew), the
instant migrate was given, with migrate's -table and -family, says no real
timestamp was written in that family after T, so
cells stamped after T plus the skew are counted as expired, not refused;
those at or before it are still refused (docs/design.md#apply-after-migrate).
`,
	setup: func(fs *flag.FlagSet) invocation {
		only := tableFlag(fs)
		fams := familiesFlag(fs)
		assume := assumeAdoptedFlag(fs)
		yes := fs.Bool("yes", false, "do not ask for confirmation")
		force := fs.Bool("force", false, "make changes that delete or hide stored cells (real timestamps under one-second expiry, sequence numbers under an age rule, real timestamps under sequence, reserved columns under write times) or change stream records (disabling the stream or shortening its retention)")
		sample := int64(10_000)
		fs.Var(countFlag{&sample, 1}, "sample-rows", "no effect: the count of cells a lowering change makes collectable is exact (kept so that scripts still run)")
		var lw legacyWindow
		lw.register(fs)
		return invocation{check: func() error { return lw.checkFor(*only, *fams) }, run: func(e *env) int { return apply(e, *only, *fams, *yes, *force, *assume, lw.options()...) }}
	},
}

func verify(e *env, only string, assumeAdopted bool) int {
	tables, err := e.tables(only)
	if err != nil {
		return e.fail(err)
	}
	// Only Plan.Unchanged is used: no count of what a change would make
	// collectable, which reads every row of the family.
	opts := []provision.Option{provision.WithoutImpact()}
	if assumeAdopted {
		opts = append(opts, provision.WithAssumeAdopted())
	}
	p := provision.New(e.admin, e.data, append(e.provisionBounds(), opts...)...)
	code := exitOK
	for _, t := range tables {
		ctx, cancel := e.step()
		err := e.admin.Verify(ctx, t, e.schemas[t])
		cancel()
		ctx, cancel = e.scanStep()
		var ms gcrule.Mismatches
		var stream *provision.StreamChange
		if err == nil || errors.As(err, &ms) {
			// The families whose rule matches: does their data fit? And
			// the change stream, where the file sets it.
			var pl *provision.Plan
			pl, err = p.Plan(ctx, t, e.schemas[t], e.streamOption(t)...)
			if pl != nil {
				stream = pl.Stream
			}
			if err == nil {
				err = p.CheckUnchanged(ctx, pl)
			}
			if err != nil && !errors.Is(err, provision.ErrUnsafeAdoption) {
				err = fmt.Errorf("checking the stored cells of sequence and write-time families (-assume-adopted skips it): %w", err)
			}
			if err == nil && ms != nil {
				err = ms
			}
		}
		cancel()
		switch {
		case errors.As(err, &ms) || errors.Is(err, provision.ErrUnsafeAdoption) || err == nil && stream != nil:
			code = worst(code, exitFindings)
			fmt.Fprintf(e.stdout, "table %q: MISMATCH\n", t)
			for _, m := range ms {
				fmt.Fprintf(e.stdout, "  family %q (%s): %s: expected %s, actual %s\n", m.Family, m.Policy, m.Kind, m.Expected, m.Actual)
			}
			if stream != nil {
				fmt.Fprintf(e.stdout, "  change stream: expected %s, actual %s (bttl apply sets it)\n", describeRetention(stream.To), describeRetention(stream.From))
			}
			if errors.Is(err, provision.ErrUnsafeAdoption) {
				for _, x := range unwrapJoined(err) {
					fmt.Fprintf(e.stdout, "  ! %v\n", x)
				}
			}
		case status.Code(err) == codes.NotFound && !e.interrupted():
			code = worst(code, exitFindings)
			fmt.Fprintf(e.stdout, "table %q: MISMATCH\n  missing table (bttl apply creates it)\n", t)
		case err != nil:
			code = worst(code, e.fail(fmt.Errorf("table %q: %w", t, err)))
			if e.ctx.Err() != nil {
				return code
			}
		default:
			fmt.Fprintf(e.stdout, "table %q: ok\n", t)
		}
	}
	return code
}

func (e *env) provisioner(opts ...provision.Option) *provision.Provisioner {
	return provision.New(e.admin, e.data, append(append(e.provisionBounds(), provision.WithOutput(e.stdout)), opts...)...)
}

// provisionBounds bound provision's calls without bounding its scans by
// their length, which grows with the table: each scan by -stall's default
// (what it receives), each other call by stepTimeout. -timeout, when
// given, bounds the whole command as well.
func (e *env) provisionBounds() []provision.Option {
	opts := []provision.Option{provision.WithStall(defaultStall), provision.WithCallTimeout(stepTimeout)}
	if e.pace != nil {
		opts = append(opts, provision.WithPacer(e.pace))
	}
	return opts
}

// streamOption is the table's change stream as the schema file sets it
// (none when the file does not).
func (e *env) streamOption(table string) []provision.PlanOption {
	if cs, ok := e.streams[table]; ok {
		return []provision.PlanOption{provision.WithChangeStream(cs.Retention)}
	}
	return nil
}

// describeRetention is a change stream's retention as verify prints it.
func describeRetention(d time.Duration) string {
	if d == 0 {
		return "off"
	}
	return "retention " + timefmt.Duration(d)
}

// plans computes every table's plan and prints it, with the one-second
// adoptions apply would refuse (refusal) unless forced. withStreams plans
// the tables' change streams too (not with -family, which changes the
// named families only).
func (e *env) plans(p *provision.Provisioner, tables []string, schemas map[string]strategy.Schema, withStreams bool) (plans []*provision.Plan, refusal, err error) {
	for _, t := range tables {
		ctx, cancel := e.scanStep()
		var opts []provision.PlanOption
		if withStreams {
			opts = e.streamOption(t)
		}
		// One read of each lowered family gives its count and its
		// refusals (apply's Execute reads again before it acts).
		pl, err := p.PlanAndCheck(ctx, t, schemas[t], opts...)
		if pl != nil {
			pl.Write(e.stdout)
		}
		cancel()
		if err != nil {
			if !errors.Is(err, provision.ErrUnsafeAdoption) {
				return nil, nil, err
			}
			// One marked line per finding: PlanAndCheck joins them (the
			// families' and the change stream's, nested).
			for _, x := range unwrapJoined(err) {
				fmt.Fprintf(e.stdout, "  ! %v\n", x)
			}
			refusal = errors.Join(refusal, err)
		}
		plans = append(plans, pl)
	}
	return plans, refusal, nil
}

// unwrapJoined is the errors errors.Join joined, a join inside a join
// flattened (err itself otherwise).
func unwrapJoined(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, x := range j.Unwrap() {
		out = append(out, unwrapJoined(x)...)
	}
	return out
}

// familiesFlag adds -family, common to plan and apply.
func familiesFlag(fs *flag.FlagSet) *[]string {
	var fams []string
	fs.Func("family", "act on these families only (a comma-separated `list`; default: every family of the schema)", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				return errors.New("want family names, comma-separated")
			}
			fams = append(fams, f)
		}
		return nil
	})
	return &fams
}

// familyTables is tables(only) with each table's schema cut to families
// (all of it when families is empty). A table holding none of the named
// families is left out; a family no table of the run names is an error.
func (e *env) familyTables(only string, families []string) ([]string, map[string]strategy.Schema, error) {
	tables, err := e.tables(only)
	if err != nil || len(families) == 0 {
		return tables, e.schemas, err
	}
	schemas := map[string]strategy.Schema{}
	var kept []string
	found := map[string]bool{}
	for _, t := range tables {
		cut := strategy.Schema{}
		for _, f := range families {
			if p, ok := e.schemas[t][f]; ok {
				cut[f], found[f] = p, true
			}
		}
		if len(cut) > 0 {
			schemas[t] = cut
			kept = append(kept, t)
		}
	}
	for _, f := range families {
		if !found[f] {
			return nil, nil, fmt.Errorf("-family: family %q is in no table of the schema file acted on", f)
		}
	}
	return kept, schemas, nil
}

// legacyWindow is -written-before and -clock-skew of plan and apply
// (provision.WithWrittenBefore), as migrate takes them.
type legacyWindow struct {
	writtenBefore time.Time
	clockSkew     time.Duration
	skewSet       bool
}

func (l *legacyWindow) register(fs *flag.FlagSet) {
	fs.Var(timeFlag{&l.writtenBefore}, "written-before", "the `instant` (RFC 3339) after which no writer stored a real or server timestamp in the families (migrate's -written-before): "+
		"a one-second family's cells stamped after it (plus -clock-skew) and at or before now are expiry instants already passed, not refused")
	l.clockSkew = migrate.DefaultClockSkew
	fs.Var(durationFlag{p: &l.clockSkew, set: &l.skewSet}, "clock-skew", "with -written-before: how far writers' clocks may be off (a `duration`; 0 means the default)")
}

// checkFor checks the flags with -table's table and -family's families:
// -written-before states when the writers of the families one migration
// moved switched, so it is refused for others (a family whose legacy
// writers still write would have its real timestamps after it counted as
// expiry instants passed, and collected).
func (l *legacyWindow) checkFor(table string, families []string) error {
	switch {
	case l.skewSet && l.writtenBefore.IsZero():
		return errors.New("-clock-skew needs -written-before")
	case !l.writtenBefore.IsZero() && (table == "" || len(families) == 0):
		return errors.New("-written-before needs -table and -family: it says when the writers of the families bttl migrate moved switched (its -table and -family), not those of other families")
	}
	return nil
}

func (l *legacyWindow) options() []provision.Option {
	if l.writtenBefore.IsZero() {
		return nil
	}
	skew := l.clockSkew
	if skew == 0 {
		skew = migrate.DefaultClockSkew
	}
	return []provision.Option{provision.WithWrittenBefore(l.writtenBefore, skew)}
}

func plan(e *env, only string, families []string, workers int, assumeAdopted bool, extra ...provision.Option) int {
	tables, schemas, err := e.familyTables(only, families)
	if err != nil {
		return e.fail(err)
	}
	opts := append([]provision.Option{provision.WithWorkers(workers)}, extra...)
	if assumeAdopted {
		opts = append(opts, provision.WithAssumeAdopted())
	}
	_, refusal, err := e.plans(e.provisioner(opts...), tables, schemas, len(families) == 0)
	if err != nil {
		return e.fail(err)
	}
	if readProfileDataBoost(e) {
		fmt.Fprintf(e.stderr, "bttl plan: note: app profile %q (-app-profile) is a Data Boost profile, whose reads may miss the writes of the last %s: "+
			"the counts above leave them out, and bttl apply refuses to check a change through it (unless -force)\n", e.g.appProfile, timefmt.Duration(dataBoostLag))
	}
	if refusal != nil {
		fmt.Fprintln(e.stdout, "apply will refuse the change(s) marked ! above without -force (apply -family applies the others alone)")
		return exitFindings
	}
	return exitOK
}

func apply(e *env, only string, families []string, yes, force, assumeAdopted bool, extra ...provision.Option) int {
	tables, schemas, err := e.familyTables(only, families)
	if err != nil {
		return e.fail(err)
	}
	opts := extra
	if force {
		opts = append(opts, provision.WithForce())
	}
	if assumeAdopted {
		opts = append(opts, provision.WithAssumeAdopted())
	}
	p := e.provisioner(opts...)
	plans, refusal, err := e.plans(p, tables, schemas, len(families) == 0)
	if err != nil {
		return e.fail(err)
	}
	if refusal != nil && !force {
		fmt.Fprintln(e.stderr, "bttl apply: refused: a rule change, or a declared strategy over the cells already stored, would delete or hide stored cells, or a change stream change would drop its records (marked ! above); nothing changed (use -force to go ahead, or -family to apply the other families alone)")
		return exitFindings
	}
	pending := 0
	for _, pl := range plans {
		if !pl.Empty() {
			pending++
		}
	}
	if pending == 0 {
		return exitOK
	}
	// The check of what the rules would collect scans the families; a
	// Data Boost profile's scan may miss the last half hour's cells, so
	// its "none" proves nothing.
	if !force && readProfileDataBoost(e) {
		fmt.Fprintf(e.stderr, "bttl apply: app profile %q (-app-profile) is a Data Boost profile, whose reads may miss the writes of the last %s: "+
			"the check of what the rules would collect cannot see every stored cell through it; nothing changed "+
			"(scan through a single-cluster profile, or -force to apply unchecked)\n", e.g.appProfile, timefmt.Duration(dataBoostLag))
		return exitFindings // apply refused
	}
	if !yes {
		fmt.Fprintf(e.stdout, "Apply these changes to %d table(s)? [y/N]: ", pending)
		line, _ := bufio.NewReader(e.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(e.stdout, "aborted: nothing changed")
			return exitFindings
		}
	}
	fmt.Fprintln(e.stdout, "applying:")
	for _, pl := range plans {
		if pl.Empty() {
			continue
		}
		ctx, cancel := e.scanStep()
		err := p.Execute(ctx, pl, schemas[pl.Table])
		cancel()
		if err != nil {
			if errors.Is(err, provision.ErrUnsafeAdoption) {
				fmt.Fprintln(e.stderr, err)
				return exitFindings
			}
			return e.fail(err)
		}
	}
	return exitOK
}
