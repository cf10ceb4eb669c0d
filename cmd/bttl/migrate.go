package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/keytext"
	migrate "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/internal/throttle"
	"github.com/bttl/bttl/internal/timefmt"
	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
)

var migrateCommand = command{
	name: "migrate", needsSchema: true,
	synopsis: []string{"-table T -family F -from real|one-second|default-expiry:D [-to-family G] [-ttl D] [-ttl-rule R]... " +
		"[-first-switch T -written-before T [-clock-skew D] [-write-time-complete]] [-expired keep|delete [-expect-expired N -expired-as-of T]] " +
		"[-inflight N] [-workers N] [-shard I/N [-shard-keys FILE]] [-checkpoint FILE|bigtable://T [-allow-ttl-change]] [-dry-run] [-json] [-report bigtable://T/JOB] [-metrics-out FILE]",
		"-table T -family F -from real|one-second|default-expiry:D -to-family G [-ttl D] [-ttl-rule R]... -check-copy [-json]"},
	short: "move a family's stored cells onto its strategy (real timestamps to one-second, D to D')",
	help: `Moves the cells a family already holds onto the strategy the schema file gives
the target family (-family in place, or -to-family): real timestamps (-from
real) to one-second expiry, each cell expiring at its write time plus a TTL
(-ttl, or -ttl-rule per row-key prefix and column); one-second or
default-expiry D (-from default-expiry:D) to default expiry D' or one-second,
each cell keeping its expiry instant. In place only from real timestamps to
one-second; the other plans copy into a new family (-to-family), since there
a shifted timestamp cannot be told from an unshifted one.

In place, a cell is moved only when it is proven a real write time.
-first-switch (the instant the first writer started writing through bttl) and
-written-before (the instant the last one did) are required: a cell stamped
at or before -first-switch minus -clock-skew is a real write time (moved);
one after -written-before plus -clock-skew is a bttl expiry instant (left
alone); one in between is ambiguous unless its write-time companion proves
it a bttl cell (or -write-time-complete vouches that every bttl writer
recorded write times). Ambiguous cells are listed and never touched.

Cells already expired under the target are kept by default (listed; GC
collects them once the one-second rule is applied). They are deleted only
with -expired delete -expect-expired N -expired-as-of T, where N and T are
what a dry run printed; the run counts first and writes nothing when its
count differs.

A row's cells move by one conditional mutation pinning every old cell and
requiring every new slot free: a row changed meanwhile is retried cell by
cell, and what changed is skipped and counted; nothing is overwritten. A
second run changes nothing and says so. -dry-run prints what would change.
Exit 1 while any cell could not be moved (changed meanwhile, a collision,
too large to pin, ambiguous): with -checkpoint, a rerun reads again every
key range where a cell was left.

A sharded run (-shard i/n) reports its shard only: the next step is due
once every shard is done, which 'bttl migrate merge' of the shards' -json
reports says. -json prints the run's report (schema in docs/design.md#migrate:
every ambiguous cell, not only -examples of them); -report bigtable://T/JOB
writes it to a row of table T of the instance (one per job and shard), for
'bttl migrate merge bigtable://T/JOB' (a dry run writes none there: -json
prints it); -metrics-out writes its figures as
bttl_migrate_* gauges. 'bttl migrate resolve' moves or deletes
one ambiguous cell. With -checkpoint, a run whose TTL differs from an
earlier run of the same migration recorded in the checkpoint (the same
file, or any row of bigtable://T for the table) or in the -report table
(any job's report) is refused unless -allow-ttl-change: the cells would
get two different lives.

-check-copy (a copy, -to-family) writes nothing: it reads both families and
lists every cell of the target family that is not the copy of a stored
source cell (a deletion in the source that writers did not mirror with
migrate.Mirror), exit 1 when there is one. Exact while no writer writes the
target family yet (docs/design.md#migrate, the copy steps).
`,
	setup: func(fs *flag.FlagSet) invocation {
		a := &migrateArgs{}
		fs.StringVar(&a.table, "table", "", "the table (required)")
		fs.StringVar(&a.family, "family", "", "the family holding the cells (required)")
		fs.StringVar(&a.toFamily, "to-family", "", "copy into this family (its policy from the schema file) instead of migrating in place")
		fs.Var(fromFlag{&a.from, &a.fromSet}, "from", "how the family's timestamps are written now: `real`, one-second or default-expiry:D (required)")
		fs.Var(ttlFlag{&a.ttl}, "ttl", "TTL (a `duration`, e.g. 30d) of cells with real timestamps no -ttl-rule matches (default: the target's default TTL in the schema file)")
		fs.Var(ttlRuleFlag{&a.rules}, "ttl-rule", "a TTL for some cells with real timestamps, `prefix=P,column=C,ttl=D` (prefix and column optional; repeatable, first match wins)")
		fs.Var(timeFlag{&a.firstSwitch}, "first-switch", "in place (required): the `instant` (RFC 3339) the first writer of the family started writing through bttl")
		fs.Var(timeFlag{&a.writtenBefore}, "written-before", "in place (required): the `instant` (RFC 3339) the last writer started writing through bttl; run at least -clock-skew after it")
		a.clockSkew = migrate.DefaultClockSkew
		fs.Var(durationFlag{p: &a.clockSkew}, "clock-skew", "in place: how far writers' clocks may be off (a `duration`; 0 means the default); widens the window of ambiguous cells by as much on each side")
		fs.BoolVar(&a.writeTimeComplete, "write-time-complete", false, "in place: every bttl writer recorded write times since -first-switch (the schema's write_time): a cell in the window without a companion is a real write time")
		fs.Var(expiredFlag{&a.expired}, "expired", "in place, cells already expired under the target: keep (left for GC; bttl apply then needs -force) or `delete` (with -expect-expired and -expired-as-of)")
		fs.Var(countsFlag{&a.expectExpired, &a.expectGiven}, "expect-expired", "with -expired delete: the `count` of expired cells the dry run printed, or for a sharded job the counts per shard it printed (N0,N1,...: every index takes its own); a different count refuses before writing")
		fs.Var(timeFlag{&a.expiredAsOf}, "expired-as-of", "with -expired delete: the `instant` the dry run judged expiry at (it prints it); only cells expired then are deleted")
		a.inflight = migrate.DefaultInflight
		fs.Var(countFlag{&a.inflight, 1}, "inflight", "conditional row mutations in flight per worker")
		fs.BoolVar(&a.dryRun, "dry-run", false, "count and show what would change; write nothing")
		fs.BoolVar(&a.json, "json", false, "print the run's report as JSON (every ambiguous cell listed) instead of text, for bttl migrate merge")
		fs.StringVar(&a.report, "report", "", "also write the run's JSON report (as -json prints it) to a row of table T of the instance with `bigtable://T/JOB` "+
			"(created when missing; one row per job and shard; a dry run writes none), for bttl migrate merge bigtable://T/JOB")
		fs.StringVar(&a.metricsOut, "metrics-out", "", "also write the run's figures as bttl_migrate_* gauges to this `file` (Prometheus textfile format, replaced atomically)")
		fs.BoolVar(&a.allowTTLChange, "allow-ttl-change", false, "run although an earlier run of this migration in the -checkpoint store moved cells with another TTL")
		fs.BoolVar(&a.checkCopy, "check-copy", false, "with -to-family: write nothing; list every target cell that is not the copy of a stored source cell (exit 1 when any)")
		a.examples = 5
		fs.Var(countFlag{&a.examples, 0}, "examples", "show up to `n` changed cells")
		a.scan.register(fs, "migrate")
		fs.StringVar(&a.checkpoint, "checkpoint", "", "keep progress in this `file`, or in a row of table T of the instance with bigtable://T (created when missing): a rerun after a crash or Ctrl-C skips the key ranges finished (a record of another plan is refused)")
		fs.Var(durationFlag{p: &a.every, set: &a.progressSet}, "progress",
			"progress line `interval` on stderr, also when it is not a terminal (0: none; default: every 1s on a terminal)")
		return invocation{check: a.check, run: a.run, writes: a.writes, checkSchemas: func(schemas map[string]strategy.Schema) (err error) {
			a.p, err = a.plan(schemas)
			return err
		}}
	},
}

type migrateArgs struct {
	p                       migrate.Plan // the plan the flags and schema give (checkSchemas)
	table, family, toFamily string
	from                    strategy.Policy
	fromSet                 bool
	ttl                     time.Duration
	rules                   migrate.TTLRules
	firstSwitch             time.Time
	writtenBefore           time.Time
	clockSkew               time.Duration
	writeTimeComplete       bool
	expired                 migrate.ExpiredAction
	expectExpired           []int64
	expectGiven             bool
	expiredAsOf             time.Time
	inflight                int64
	dryRun                  bool
	examples                int64
	scan                    scanFlags
	checkpoint              string
	every                   time.Duration
	progressSet             bool
	json                    bool
	report                  string
	metricsOut              string
	allowTTLChange          bool
	checkCopy               bool
}

func (a *migrateArgs) check() error {
	switch {
	case a.table == "":
		return errors.New("-table is required")
	case a.family == "":
		return errors.New("-family is required")
	case !a.fromSet:
		return errors.New("-from is required: real, one-second or default-expiry:D")
	case (a.ttl != 0 || len(a.rules) > 0) && a.from.Kind() != strategy.KindUnmanaged:
		return errors.New("-ttl and -ttl-rule apply to -from real only: other cells keep their expiry instant")
	case a.expired == migrate.DeleteExpired && !a.dryRun && (!a.expectSet() || a.expiredAsOf.IsZero()):
		return errors.New("-expired delete needs -expect-expired N and -expired-as-of T, the count and instant a dry run printed: nothing is deleted on a guess")
	case a.expired != migrate.DeleteExpired && (a.expectSet() || !a.expiredAsOf.IsZero()):
		return errors.New("-expect-expired and -expired-as-of go with -expired delete")
	case a.allowTTLChange && a.checkpoint == "" && a.report == "":
		return errors.New("-allow-ttl-change goes with -checkpoint or -report, where earlier runs are recorded")
	case a.checkCopy && a.toFamily == "":
		return errors.New("-check-copy checks a copy: give -to-family")
	case a.checkCopy && (a.dryRun || a.checkpoint != "" || a.metricsOut != "" || a.report != "" || a.expired == migrate.DeleteExpired):
		return errors.New("-check-copy writes nothing and reads the families whole: it excludes -dry-run, -checkpoint, -report, -metrics-out and -expired delete")
	}
	if a.report != "" {
		if _, err := parseReportDest(a.report); err != nil {
			return fmt.Errorf("-report: %w", err)
		}
	}
	if err := checkMetricsOut(a.metricsOut); err != nil {
		return err
	}
	// A dry run takes the job's flags as they are: without a task index
	// it reads the whole table (-shard-count and -shard-keys then say
	// nothing), and it keeps its own checkpoint (its job is marked a dry
	// run, so a real run never resumes it).
	a.scan.wholeOK = a.dryRun
	return a.scan.check()
}

// plan builds the migration plan from the flags and the schema file: a
// usage error (exit 2) when they do not make one.
func (a *migrateArgs) plan(schemas map[string]strategy.Schema) (migrate.Plan, error) {
	schema, ok := schemas[a.table]
	if !ok {
		return migrate.Plan{}, fmt.Errorf("-table: table %q is not in the schema file", a.table)
	}
	target, flagName := a.family, "-family"
	if a.toFamily != "" {
		target, flagName = a.toFamily, "-to-family"
	}
	to, ok := schema[target]
	if !ok {
		return migrate.Plan{}, fmt.Errorf("%s: family %q is not in the schema file's table %q, which gives the target strategy", flagName, target, a.table)
	}
	p := migrate.Plan{Family: a.family, From: a.from, To: to, ToFamily: a.toFamily, FirstSwitch: a.firstSwitch, WrittenBefore: a.writtenBefore,
		WriteTimeComplete: a.writeTimeComplete, Expired: a.expired, ExpiredAsOf: a.expiredAsOf}
	switch n := len(a.expectExpired); {
	case n == 1:
		p.ExpectExpired = a.expectExpired[0]
	case n > 1 && (!a.scan.sharded() || n != a.scan.shard.Count):
		return migrate.Plan{}, fmt.Errorf("-expect-expired: %d counts, one per shard, but this run is %s", n, map[bool]string{true: "shard " + a.scan.shard.String(), false: "not sharded"}[a.scan.sharded()])
	case n > 1:
		p.ExpectExpired = a.expectExpired[a.scan.shard.Index]
	}
	if a.toFamily == "" {
		p.ClockSkew = a.clockSkew
	}
	// -from says how the timestamps are written; whether the source
	// records write times (companions, not data: a copy leaves them) is
	// the schema's source family's.
	if sp, ok := schema[a.family]; ok && sp.HasCompanions() && a.toFamily != "" {
		switch a.from.Kind() {
		case strategy.KindOneSecond:
			p.From = strategy.OneSecond(strategy.WithWriteTime())
		case strategy.KindDefaultExpiry:
			p.From = strategy.DefaultExpiry(a.from.DefaultTTL(), strategy.WithWriteTime())
		}
	}
	if a.expired == migrate.DeleteExpired && a.dryRun && a.expiredAsOf.IsZero() {
		p.Expired = migrate.KeepExpired // a dry run counts the cells expired now either way
	}
	if a.from.Kind() == strategy.KindUnmanaged {
		p.TTL = append(p.TTL, a.rules...)
		ttl := a.ttl
		if ttl == 0 {
			ttl = to.DefaultTTL()
		}
		if ttl == 0 {
			return migrate.Plan{}, fmt.Errorf("-ttl is required: cells with real timestamps carry no TTL and the schema gives family %q no default TTL", target)
		}
		p.TTL = append(p.TTL, migrate.TTLRule{TTL: ttl})
	}
	if err := p.Validate(); err != nil {
		return migrate.Plan{}, flagError(err)
	}
	return p, nil
}

// flagError names the flag behind a plan error.
func flagError(err error) error {
	var pe *migrate.PlanError
	if errors.As(err, &pe) {
		flag := map[string]string{"Family": "-family", "ToFamily": "-to-family", "From": "-from", "To": "-schema",
			"FirstSwitch": "-first-switch", "WrittenBefore": "-written-before", "ClockSkew": "-clock-skew",
			"WriteTimeComplete": "-write-time-complete", "TTL": "-ttl", "Expired": "-expired",
			"ExpiredAsOf": "-expired-as-of", "ExpectExpired": "-expect-expired", "Inflight": "-inflight"}[pe.Field]
		return fmt.Errorf("%s: %s", flag, strings.TrimPrefix(err.Error(), "bttl: "))
	}
	if errors.Is(err, migrate.ErrInvalidTTLRule) {
		return fmt.Errorf("-ttl-rule: %s", strings.TrimPrefix(err.Error(), "bttl: "))
	}
	return err
}

func (a *migrateArgs) run(e *env) int {
	p := a.p
	tbl := e.data.Open(a.table)
	// The first call, bounded by -timeout: an unreachable endpoint or a
	// missing table fails here.
	ctx, cancel := e.step()
	_, err := tbl.SampleRowKeys(ctx)
	cancel()
	if err != nil {
		return e.fail(fmt.Errorf("table %q: %w", a.table, err))
	}
	// The families must exist before anything is read, in a dry run too:
	// a copy into a family not created yet would otherwise scan the whole
	// table and fail at its first write.
	ctx, cancel = e.step()
	fams, err := e.admin.Families(ctx, a.table)
	cancel()
	if err != nil {
		return e.fail(fmt.Errorf("table %q: %w", a.table, err))
	}
	for _, f := range []struct{ name, flag string }{{a.family, "-family"}, {a.toFamily, "-to-family"}} {
		if _, ok := fams[f.name]; f.name != "" && !ok {
			fmt.Fprintf(e.stderr, "bttl migrate: %s: table %q has no family %q: run bttl apply -table %s -family %s first (it creates the family with the schema file's GC rule)\n",
				f.flag, a.table, f.name, a.table, f.name)
			return exitError
		}
	}
	// The versions the family's own rule made dead (GC is lazy) are not
	// moved, nor copied into a family keeping more (Plan.SourceMaxVersions).
	if nr := gcrule.Normalize(fams[a.family].GetGcRule()); nr.HasVersions && !nr.Intersection && !nr.Unrecognized {
		p.SourceMaxVersions = int(nr.Versions)
	}
	if err := a.checkDataBoostLag(e); err != nil {
		fmt.Fprintf(e.stderr, "bttl migrate: %v\n", err)
		return exitFindings // a refusal: the profile cannot serve this run
	}
	// -stall bounds each write too: the scan's watches reads only.
	opts := []migrate.Option{migrate.WithClock(clockFunc(e.now)), migrate.WithExamples(int(a.examples)), migrate.WithInflight(int(a.inflight)),
		migrate.WithWriteTimeout(a.scan.stall), migrate.WithWriteTable(e.write.Open(a.table))}
	if a.dryRun || a.checkCopy {
		opts = append(opts, migrate.WithDryRun())
	}
	if a.json {
		opts = append(opts, migrate.WithAllAmbiguous())
	}
	// A whole-table dry run given a sharded job's flags runs the shards in
	// turn: a Bigtable checkpoint keeps a row per shard, a file would be
	// one record for all of them, so it is not kept then.
	byShard := a.dryRun && a.scan.unindexed && a.scan.shardCount > 1
	if a.checkpoint != "" && (!byShard || strings.HasPrefix(a.checkpoint, scan.BigtableScheme)) {
		opts = append(opts, migrate.WithCheckpoint(a.checkpoint))
	}
	m, err := migrate.New(tbl, a.table, p, opts...)
	if err != nil {
		fmt.Fprintf(e.stderr, "bttl migrate: %v\n", flagError(err))
		return exitError
	}
	if a.checkCopy {
		return a.runCheckCopy(e, m)
	}
	if (a.checkpoint != "" || a.report != "") && !a.allowTTLChange {
		if code, done := a.checkEarlierRuns(e, m); done {
			return code
		}
	}
	// A dry run writes nothing, its report included: in the job's rows
	// it would replace a shard's real report (or add a whole-table one)
	// and the job's merge would refuse.
	if a.dryRun && a.report != "" {
		fmt.Fprintf(e.stderr, "bttl migrate: -report %s: a dry run writes no report there (the job's reports are its real runs'); -json prints this one\n", a.report)
	}
	store, err := a.claimReport(e)
	if err != nil {
		return e.fail(fmt.Errorf("-report: %w", err))
	}
	text := e.stdout
	if a.json {
		text = io.Discard
	}
	fmt.Fprintf(text, "table %q, %s\n", a.table, p)
	if !p.WrittenBefore.IsZero() {
		legacy, bttl := p.Window()
		fmt.Fprintf(text, "timestamps at or before %s are real write times (moved); after %s expiry instants (left alone); in between ambiguous unless proven\n",
			formatRFC3339(legacy), formatRFC3339(bttl))
	}
	sopts, err := a.scan.options()
	if err != nil {
		fmt.Fprintf(e.stderr, "bttl migrate: %v\n", err)
		return exitError
	}
	tty := isTerminal(e.stderr)
	every := a.every
	if !a.progressSet && tty {
		every = time.Second
	}
	var pl *progressLine
	if every > 0 {
		pl = &progressLine{w: e.stderr, tty: tty, m: m, pace: e.pace}
		sopts = append(sopts, scan.WithProgress(every, pl.update))
	}
	var rep *migrate.Report
	var perShard []int64
	if byShard {
		rep, perShard, err = a.everyShard(e, tbl, p, opts, m.Now(), sopts, pl)
	} else {
		rep, err = m.Run(e.ctx, sopts...)
	}
	pl.done()
	if err != nil {
		if errors.Is(err, migrate.ErrExpiredCount) {
			fmt.Fprintf(e.stderr, "bttl migrate: %v\n", strings.TrimPrefix(err.Error(), "bttl: "))
			return exitFindings
		}
		if errors.Is(err, scan.ErrOption) || errors.Is(err, scan.ErrCheckpoint) {
			fmt.Fprintf(e.stderr, "bttl migrate: %v\n", err)
			return exitError
		}
		return e.fail(fmt.Errorf("table %q: %w", a.table, err))
	}
	st := rep.Stats
	report := m.ShardReport(rep)
	if a.metricsOut != "" {
		write := func(w io.Writer) error { return migrate.WriteMetrics(w, report.Series()) }
		if err := writeMetricsWithPace(a.metricsOut, write, e.pace, "migrate"); err != nil {
			return e.fail(fmt.Errorf("-metrics-out: %w", err))
		}
	}
	if store != nil {
		b, err := json.MarshalIndent(report, "", "  ")
		if err == nil {
			ctx, cancel := e.step()
			err = store.Save(ctx, append(b, '\n'))
			cancel()
		}
		if err != nil {
			return e.fail(fmt.Errorf("-report: %w", err))
		}
	}
	if a.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return e.fail(err)
		}
	} else {
		a.writeText(e.stdout, p, rep, perShard)
	}
	if n := st.Unmoved(); n > 0 {
		fmt.Fprintf(e.stderr, "bttl migrate: %d cell(s) not moved (see above); run bttl migrate again once they are dealt with (with -checkpoint, the rerun reads again every key range where a cell was left)\n", n)
		return exitFindings
	}
	return exitOK
}

// writeText writes the run's report as text.
func (a *migrateArgs) writeText(w io.Writer, p migrate.Plan, rep *migrate.Report, perShard []int64) {
	st := rep.Stats
	if a.scan.sharded() {
		fmt.Fprintf(w, "shard %s: keys %s\n", a.scan.shard, rep.Scan.Piece)
	}
	if rep.Undone > 0 {
		fmt.Fprintf(w, "read again: %d key range(s) %s records finished no longer hold the last cell moved there (the table was restored or re-created since, or a writer or GC removed that cell)\n",
			rep.Undone, a.checkpoint)
	}
	if rep.Unproven > 0 {
		fmt.Fprintf(w, "read again: %d key range(s) %s records finished moved nothing, so nothing proves they still need nothing\n", rep.Unproven, a.checkpoint)
	}
	if n := resumed(rep.Scan); n > 0 {
		fmt.Fprintf(w, "resumed from %s: %d of %d key range(s) finished by an earlier run, not read again (they moved %d cell(s), deleted %d)\n",
			a.checkpoint, n, len(rep.Scan.Ranges), rep.Earlier.Moved+rep.Earlier.MovedBefore, rep.Earlier.ExpiredDeleted+rep.Earlier.DeletedBefore)
	}
	st.AmbiguousExamples = st.AmbiguousExamples[:min(len(st.AmbiguousExamples), int(a.examples))]
	writeMigrateStats(w, st, a.dryRun, rep.Now, a.toFamily)
	if rep.Scan != nil && (resumed(rep.Scan) > 0 || st.MovedBefore > 0 || st.DeletedBefore > 0) {
		total := st.Moved + st.MovedBefore + rep.Earlier.Moved + rep.Earlier.MovedBefore
		del := st.ExpiredDeleted + st.DeletedBefore + rep.Earlier.ExpiredDeleted + rep.Earlier.DeletedBefore
		what := "moved"
		if a.toFamily != "" {
			what = "copied"
		}
		fmt.Fprintf(w, "this job so far: %d cell(s) %s, %d deleted, as the checkpoint records them (runs killed mid-range record nothing for it: the cells they %s there are counted as already on the target)\n",
			total, what, del, what)
	}
	if perShard != nil && p.ToFamily == "" && (st.ExpiredLeft > 0 || st.ExpiredDeleted > 0) {
		counts := make([]string, len(perShard))
		for i, n := range perShard {
			counts[i] = strconv.FormatInt(n, 10)
		}
		fmt.Fprintf(w, "expired per shard (index 0 to %d): %s; to delete them (after checking the examples), give every index of the job -expired delete -expect-expired %s -expired-as-of %s\n",
			len(perShard)-1, strings.Join(counts, ", "), strings.Join(counts, ","), formatRFC3339(rep.Now))
	} else if st.ExpiredLeft > 0 && p.ToFamily == "" && a.expired == migrate.KeepExpired {
		fmt.Fprintf(w, "to delete the %d expired cell(s) (after checking the examples): add -expired delete -expect-expired %d -expired-as-of %s\n",
			st.ExpiredLeft, st.ExpiredLeft, formatRFC3339(rep.Now))
	}
	if st.Changes() > 0 || st.Unmoved() > 0 || a.dryRun {
		fmt.Fprintln(w, "\nsteps for a live system (this command is the migration step):")
		for i, s := range p.Steps() {
			fmt.Fprintf(w, "  %d. %s\n", i+1, s)
		}
		if a.scan.sharded() && st.Unmoved() == 0 && !a.dryRun {
			fmt.Fprintf(w, "shard %s is done; the job is done once every shard's run exits 0: bttl migrate merge of the shards' -json reports says so\n", a.scan.shard)
		}
	} else if next := p.NextStep(); next != "" {
		if a.scan.sharded() {
			// Other shards may still run: the next step is the job's, due
			// once every shard is done.
			fmt.Fprintf(w, "shard %s is done; once every shard is (bttl migrate merge of the shards' -json reports says so), next: %s\n", a.scan.shard, next)
		} else {
			fmt.Fprintf(w, "next: %s\n", next)
		}
	}
}

func (a *migrateArgs) expectSet() bool { return a.expectGiven }

// countsFlag is -expect-expired: one count, or one per shard (N0,N1,...),
// remembered as given (0 is a count too).
type countsFlag struct {
	p   *[]int64
	set *bool
}

func (f countsFlag) Set(s string) error {
	var out []int64
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%q: want a count of 0 or more, or one per shard separated by commas", s)
		}
		out = append(out, n)
	}
	*f.p, *f.set = out, true
	return nil
}

func (f countsFlag) String() string {
	if f.p == nil || f.set == nil || !*f.set {
		return ""
	}
	parts := make([]string, len(*f.p))
	for i, n := range *f.p {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(parts, ",")
}

// expectFlag is a count, remembered as given (0 is a count too).
type expectFlag struct {
	p   *int64
	set *bool
}

func (f expectFlag) Set(s string) error {
	if err := (countFlag{f.p, 0}).Set(s); err != nil {
		return err
	}
	*f.set = true
	return nil
}

func (f expectFlag) String() string {
	if f.p == nil || f.set == nil || !*f.set {
		return ""
	}
	return strconv.FormatInt(*f.p, 10)
}

// everyShard is a whole-table dry run given a sharded job's flags (no task
// index): it runs the job's shards one after another, each judged at the
// same instant (now), and returns their counts summed and each shard's
// expired cells, the per-shard counts a deleting job's indexes check.
func (a *migrateArgs) everyShard(e *env, tbl *bigtable.Table, p migrate.Plan, opts []migrate.Option, now time.Time, sopts []scan.Option, pl *progressLine) (*migrate.Report, []int64, error) {
	n := int(a.scan.shardCount)
	if a.scan.shardKeys != "" {
		keys, err := readShardKeys(a.scan.shardKeys)
		if err != nil {
			return nil, nil, fmt.Errorf("-shard-keys: %w", err)
		}
		sopts = append(sopts, scan.WithShardKeys(keys...))
	}
	opts = append(opts, migrate.WithClock(clockFunc(func() time.Time { return now })))
	all := &migrate.Report{Now: now, Scan: &scan.Summary{Table: a.table, Shard: scan.Shard{Index: 0, Count: 1}}}
	per := make([]int64, n)
	for i := 0; i < n; i++ {
		m, err := migrate.New(tbl, a.table, p, opts...)
		if err != nil {
			return nil, nil, err
		}
		if pl != nil {
			pl.m = m
		}
		rep, err := m.Run(e.ctx, append(sopts, scan.WithShard(i, n))...)
		if err != nil {
			return nil, nil, err
		}
		per[i] = rep.ExpiredLeft + rep.ExpiredDeleted
		ex, amb := all.Examples, all.AmbiguousExamples
		all.Stats = all.Stats.Plus(rep.Stats)
		all.Examples = append(ex, rep.Examples[:min(len(rep.Examples), max(int(a.examples)-len(ex), 0))]...)
		all.AmbiguousExamples = append(amb, rep.AmbiguousExamples[:min(len(rep.AmbiguousExamples), max(int(a.examples)-len(amb), 0))]...)
		all.Earlier = all.Earlier.Plus(rep.Earlier)
		all.Scan.Ranges = append(all.Scan.Ranges, rep.Scan.Ranges...)
		all.Scan.Rows += rep.Scan.Rows
		all.Scan.Cells += rep.Scan.Cells
	}
	return all, per, nil
}

// resumed counts the ranges an earlier run finished.
func resumed(s *scan.Summary) int {
	n := 0
	for _, r := range s.Ranges {
		if r.Resumed {
			n++
		}
	}
	return n
}

// progressLine writes the scan's progress with the migration's counts: on
// a terminal rewritten in place, elsewhere a line per update.
type progressLine struct {
	w       io.Writer
	tty     bool
	m       *migrate.Migrator
	pace    *throttle.Controller // the pace shown, if any
	printed bool
}

func (p *progressLine) update(pr scan.Progress) {
	st := p.m.Stats()
	line := fmt.Sprintf("read %d rows, %d cells; moved %d, deleted %d; %.0f%% of %d key ranges", st.Rows, st.Cells, st.Moved, st.ExpiredDeleted, 100*pr.Fraction, pr.Ranges)
	if pr.ETA > 0 {
		line += fmt.Sprintf(", ETA %s", pr.ETA.Round(time.Second))
	}
	line += rateText(p.pace)
	p.printed = true
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progressLine) done() {
	if p != nil && p.tty && p.printed {
		fmt.Fprintln(p.w)
	}
}

func writeMigrateStats(w io.Writer, st migrate.Stats, dry bool, now time.Time, toFamily string) {
	would := ""
	if dry {
		would = "would be "
		fmt.Fprintln(w, "dry run: nothing written")
	}
	fmt.Fprintf(w, "read %d row(s), %d cell(s)\n", st.Rows, st.Cells)
	moved := would + "moved to their new timestamp"
	if toFamily != "" {
		// A copy leaves the source cell where it is.
		moved = fmt.Sprintf("%scopied into family %q at their new timestamp (the source cells stay)", would, toFamily)
	}
	if st.Changes() == 0 && st.Unmoved() == 0 {
		fmt.Fprintf(w, "nothing to migrate: %d cell(s) already on the target, %d expired cell(s) left for GC\n", st.OnTarget, st.ExpiredLeft)
	}
	for _, l := range []struct {
		n    int64
		what string
	}{
		{st.Moved, moved},
		{st.MovedBefore, "moved by earlier runs in the key ranges read again (found on the target now, counted there too if still stored)"},
		{st.DeletedBefore, "deleted by earlier runs in the key ranges read again"},
		{st.OnTarget, "already on the target (nothing to do)"},
		{st.ExpiredDeleted, "expired under the target, " + would + "deleted"},
		{st.ExpiredLeft, "expired under the target as of " + formatRFC3339(now) + ": left as they are, neither moved nor copied"},
		{st.Ambiguous, "not moved: ambiguous, stamped between -first-switch and -written-before (plus -clock-skew) with nothing proving which writer wrote them (never touched)"},
		{st.Changed, "changed by a writer meanwhile: skipped (a rerun picks up what is left)"},
		{st.Gone, "deleted by a writer meanwhile: nothing left to do"},
		{st.Collisions, "not moved: another cell holds the new timestamp in that column (never overwritten)"},
		{st.TooLargeToPin, "not moved: value over about 10 KB, too large to pin in a predicate (never moved unpinned)"},
		{st.OutOfRange, "not moved: new timestamp out of range"},
		{st.NotRealTimes, "not moved: timestamp before 2000, a sequence number rather than a write time"},
	} {
		if l.n > 0 {
			fmt.Fprintf(w, "  %d cell(s) %s\n", l.n, l.what)
		}
	}
	if len(st.AmbiguousExamples) > 0 {
		fmt.Fprintln(w, "ambiguous cells (a real write time, or a bttl expiry instant?):")
		for _, x := range st.AmbiguousExamples {
			fmt.Fprintf(w, "  row %s, column %s: %s\n", keytext.Quote(x.Row), keytext.Quote(x.Column), formatTS(x.Old))
		}
	}
	if len(st.Examples) > 0 {
		fmt.Fprintln(w, "examples:")
		for _, x := range st.Examples {
			if x.Deleted {
				fmt.Fprintf(w, "  row %s, column %s: %s %sdeleted (expired)\n", keytext.Quote(x.Row), keytext.Quote(x.Column), formatTS(x.Old), would)
				continue
			}
			if x.Expired {
				fmt.Fprintf(w, "  row %s, column %s: %s expired, kept\n", keytext.Quote(x.Row), keytext.Quote(x.Column), formatTS(x.Old))
				continue
			}
			fmt.Fprintf(w, "  row %s, column %s: %s -> %s\n", keytext.Quote(x.Row), keytext.Quote(x.Column), formatTS(x.Old), formatTS(x.New))
		}
	}
}

// formatRFC3339 is t in RFC 3339 UTC at fixed width (internal/timefmt).
func formatRFC3339(t time.Time) string { return timefmt.Instant(t) }

func formatTS(t bigtable.Timestamp) string { return formatRFC3339(time.UnixMicro(int64(t))) }

type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// fromFlag is real, one-second or default-expiry:D.
type fromFlag struct {
	p   *strategy.Policy
	set *bool
}

func (f fromFlag) Set(s string) error {
	switch {
	case s == "real":
		*f.p = strategy.Unmanaged()
	case s == "one-second":
		*f.p = strategy.OneSecond()
	case strings.HasPrefix(s, "default-expiry:"):
		d, err := schemafile.ParseDuration(strings.TrimPrefix(s, "default-expiry:"))
		if err != nil {
			return err
		}
		p := strategy.DefaultExpiry(d)
		if err := p.Validate(); err != nil {
			return err
		}
		*f.p = p
	default:
		return errors.New("want real, one-second or default-expiry:D (e.g. default-expiry:48h)")
	}
	*f.set = true
	return nil
}

func (f fromFlag) String() string {
	if f.p == nil || f.set == nil || !*f.set {
		return ""
	}
	if f.p.Kind() == strategy.KindUnmanaged {
		return "real"
	}
	if f.p.Kind() == strategy.KindDefaultExpiry {
		return "default-expiry:" + f.p.DefaultTTL().String()
	}
	return f.p.Kind().String()
}

// ttlFlag is a TTL of at least 1ms in whole milliseconds, days and weeks
// allowed.
type ttlFlag struct{ p *time.Duration }

func (f ttlFlag) Set(s string) error {
	d, err := schemafile.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < time.Millisecond || d%time.Millisecond != 0 {
		return errors.New("must be a positive whole number of milliseconds, e.g. 30d")
	}
	*f.p = d
	return nil
}

func (f ttlFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return ""
	}
	return f.p.String()
}

// ttlRuleFlag appends one rule per use.
type ttlRuleFlag struct{ p *migrate.TTLRules }

func (f ttlRuleFlag) Set(s string) error {
	r, err := migrate.ParseTTLRule(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "bttl: "))
	}
	*f.p = append(*f.p, r)
	return nil
}

func (f ttlRuleFlag) String() string { return "" }

// expiredFlag is delete or keep.
type expiredFlag struct{ p *migrate.ExpiredAction }

func (f expiredFlag) Set(s string) error {
	switch s {
	case "delete":
		*f.p = migrate.DeleteExpired
	case "keep":
		*f.p = migrate.KeepExpired
	default:
		return errors.New("want delete or keep")
	}
	return nil
}

func (f expiredFlag) String() string {
	if f.p == nil {
		return "" // the zero flag: -h then shows the default, keep
	}
	return f.p.String()
}
