package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/internal/keytext"
	migrate "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
)

// checkEarlierRuns refuses a run whose TTL differs from an earlier run of
// the same migration recorded where -checkpoint keeps its records: the
// same file, or any checkpoint row of this table in bigtable://T. done
// says the command ends with code.
func (a *migrateArgs) checkEarlierRuns(e *env, m *migrate.Migrator) (code int, done bool) {
	records := map[string][]byte{}
	read := func(flag, id, prefix string) error {
		ctx, cancel := e.step()
		recs, err := scan.ReadBigtableRecords(ctx, e.write, id, prefix)
		cancel()
		if status.Code(err) == codes.NotFound {
			return nil // no such table yet: no earlier run
		}
		if err != nil {
			return fmt.Errorf("%s: reading earlier runs' records: %w", flag, err)
		}
		for k, v := range recs {
			records[scan.BigtableScheme+id+"/"+k] = v
		}
		return nil
	}
	if a.report != "" {
		d, _ := parseReportDest(a.report) // checked
		if err := read("-report", d.table, migrateReportPrefix); err != nil {
			return e.fail(err), true
		}
	}
	if id, ok := strings.CutPrefix(a.checkpoint, scan.BigtableScheme); ok {
		if err := read("-checkpoint", id, a.table+"#"); err != nil {
			return e.fail(err), true
		}
	} else if a.checkpoint != "" {
		b, err := os.ReadFile(a.checkpoint)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return e.fail(fmt.Errorf("-checkpoint: %w", err)), true
		}
		if err == nil {
			records[a.checkpoint] = b
		}
	}
	if err := m.CheckEarlierRuns(records); err != nil {
		fmt.Fprintf(e.stderr, "bttl migrate: %s; to run anyway, add -allow-ttl-change\n", onePrefix(err.Error()))
		return exitFindings, true
	}
	return 0, false
}

// runCheckCopy is -check-copy: every target cell without its source.
func (a *migrateArgs) runCheckCopy(e *env, m *migrate.Migrator) int {
	sopts, err := a.scan.options()
	if err != nil {
		fmt.Fprintf(e.stderr, "bttl migrate: %v\n", err)
		return exitError
	}
	chk, err := m.CheckCopy(e.ctx, sopts...)
	if err != nil {
		return e.fail(fmt.Errorf("table %q: %w", a.table, err))
	}
	if a.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(chk); err != nil {
			return e.fail(err)
		}
	} else {
		fmt.Fprintf(e.stdout, "table %q: family %q against its source %q: %d row(s), %d target cell(s), %d the copy of a stored source cell\n",
			a.table, a.toFamily, a.family, chk.Rows, chk.TargetCells, chk.Matched)
		if chk.OnlyInTarget > 0 {
			fmt.Fprintf(e.stdout, "  %d cell(s) only in %q: their source is not stored (deleted after the copy without the mirror, or written to %q by a writer already switched)\n", chk.OnlyInTarget, a.toFamily, a.toFamily)
		}
		if chk.ValueDiffers > 0 {
			fmt.Fprintf(e.stdout, "  %d cell(s) whose source holds another value (overwritten after the copy without the mirror)\n", chk.ValueDiffers)
		}
		for _, c := range chk.Cells {
			fmt.Fprintf(e.stdout, "  %s: row %s, column %s, timestamp %d (%s)\n", strings.ReplaceAll(c.What, "_", " "), keytext.Quote(reportKey(c.Row, c.Quoted)), keytext.Quote(reportKey(c.Column, c.Quoted)), c.Timestamp, c.Time)
		}
	}
	if !chk.Clean() {
		fmt.Fprintf(e.stderr, "bttl migrate: %d cell(s) of family %q are not the copy of a stored source cell: the new family would serve them; "+
			"delete each with bttl migrate resolve -delete once it is known to be a revived deletion (docs/design.md#migrate)\n", chk.OnlyInTarget+chk.ValueDiffers, a.toFamily)
		return exitFindings
	}
	return exitOK
}

// reportKey is a report cell's key or qualifier as stored: a Go-quoted
// one (not UTF-8, ReportCell.Quoted) is unquoted, so that every key is
// printed through keytext alike (quoted and cut,
// docs/design.md#keys-in-messages). One that does not unquote is shown
// quoted as the report has it.
func reportKey(s string, quoted bool) string {
	if !quoted {
		return s
	}
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

var migrateMergeCommand = command{
	name: "migrate merge", offline: true, args: "SOURCE...",
	online:   readsReportsToCheck,
	synopsis: []string{"[-json] [-metrics-out FILE] FILE|bigtable://TABLE/JOB..."},
	short:    "merge the -json reports of a migration's shards into the job's result",
	help: `Merges the reports of every shard of one migration job into the job's
result. Each SOURCE is a file, one shard's bttl migrate -json output (its
latest run), or bigtable://TABLE/JOB: every shard's report that bttl
migrate -report bigtable://TABLE/JOB wrote to table TABLE of the instance
(then -project and -instance are needed); a shard claimed but not written
yet is a missing shard, and a report whose table no longer holds the
last cell the shard moved in a key range (the table restored from a
backup or re-created since) is refused, naming the shard to rerun. A
file carrying such witnesses (a run with -checkpoint) is checked the
same way, so it too needs -project and -instance. The result has the counts summed (cells moved by
every run of the job included), every ambiguous cell, and whether the job
is done. The reports must be of the
same table, families and plan (-ttl, window, ...), all dry runs or none,
one per shard of the same count, their key pieces following each other
with no gap or overlap: otherwise nothing is merged and the command exits
1 saying why. A shard with something left to move makes the job not done:
the result names it and exits 1. Only a done job prints the next step
(bttl apply, in place). Needs no -schema. Flags go before the sources.
`,
	setup: func(fs *flag.FlagSet) invocation {
		m := &migrateMergeArgs{fs: fs}
		fs.BoolVar(&m.json, "json", false, "print the job's result as JSON")
		fs.StringVar(&m.metricsOut, "metrics-out", "", "also write the job's figures as bttl_migrate_* gauges (shard=\"all\") to this `file` (Prometheus textfile format, replaced atomically)")
		return invocation{check: m.check, run: m.run, readsRecords: true}
	},
}

type migrateMergeArgs struct {
	fs         *flag.FlagSet
	json       bool
	metricsOut string
}

func (m *migrateMergeArgs) check() error {
	if m.fs.NArg() == 0 {
		return errors.New("give every shard's report: the files bttl migrate -json wrote, or bigtable://TABLE/JOB (bttl migrate -report)")
	}
	for _, a := range m.fs.Args() {
		if strings.HasPrefix(a, scan.BigtableScheme) {
			if _, err := parseReportDest(a); err != nil {
				return err
			}
		}
	}
	return checkMetricsOut(m.metricsOut)
}

func (m *migrateMergeArgs) run(e *env) int {
	var reports []*migrate.ShardReport
	for _, src := range e.args {
		if strings.HasPrefix(src, scan.BigtableScheme) {
			d, _ := parseReportDest(src) // checked
			rs, err := readMigrateReports(e, d)
			var mm *mergeMismatch
			if errors.As(err, &mm) {
				fmt.Fprintf(e.stderr, "bttl migrate merge: %s\n", onePrefix(err.Error()))
				return exitFindings
			}
			if err != nil {
				return e.fail(err)
			}
			reports = append(reports, rs...)
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return e.fail(err)
		}
		r, err := parseShardReport(src, b)
		if err != nil {
			return e.fail(err)
		}
		if len(r.Witnesses) > 0 { // online then (readsReportsToCheck)
			err = checkWitnesses(e, src, r)
			var mm *mergeMismatch
			if errors.As(err, &mm) {
				fmt.Fprintf(e.stderr, "bttl migrate merge: %s\n", onePrefix(err.Error()))
				return exitFindings
			}
			if err != nil {
				return e.fail(err)
			}
		}
		reports = append(reports, r)
	}
	res, err := migrate.Merge(reports...)
	if err != nil {
		fmt.Fprintf(e.stderr, "bttl migrate merge: %s\n", onePrefix(err.Error()))
		return exitFindings
	}
	if m.metricsOut != "" {
		if err := migrate.WriteMetricsFile(m.metricsOut, res.Series()); err != nil {
			return e.fail(fmt.Errorf("-metrics-out: %w", err))
		}
	}
	if m.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return e.fail(err)
		}
	} else {
		writeJobResult(e, res)
	}
	if !res.Complete {
		fmt.Fprintf(e.stderr, "bttl migrate merge: the job is not done: shard(s) %s left cells to move; rerun them (with their -checkpoint) until each exits 0\n", strings.Join(res.Incomplete, ", "))
		return exitFindings
	}
	return exitOK
}

func writeJobResult(e *env, res *migrate.JobResult) {
	w := e.stdout
	t := res.Total
	if res.DryRun {
		fmt.Fprintln(w, "dry runs: nothing written")
	}
	fmt.Fprintf(w, "table %q, %s, %d shard(s), figures as of %s\n", res.Table, res.Job, res.Shards, res.Now)
	fmt.Fprintf(w, "read %d row(s), %d cell(s)\n", t.Rows, t.Cells)
	what := "moved to their new timestamp"
	if res.ToFamily != "" {
		what = fmt.Sprintf("copied into family %q", res.ToFamily)
	}
	for _, l := range []struct {
		n    int64
		what string
	}{
		{t.MovedByJob(), what + " by the job"},
		{t.OnTarget, "on the target when last read (bttl writes, and cells moved by runs that recorded nothing: killed mid-range)"},
		{t.DeletedByJob(), "expired, deleted by the job"},
		{t.ExpiredLeft, "expired under the target, left as they are"},
		{t.Ambiguous, "ambiguous (listed below; bttl migrate resolve moves or deletes one)"},
		{t.Changed, "changed or removed by a writer meanwhile"},
		{t.Collisions, "not moved: another cell holds the new timestamp"},
		{t.TooLargeToPin, "not moved: too large to pin"},
		{t.OutOfRange, "not moved: new timestamp out of range"},
		{t.NotRealTimes, "not moved: timestamp before 2000"},
	} {
		if l.n > 0 {
			fmt.Fprintf(w, "  %d cell(s) %s\n", l.n, l.what)
		}
	}
	for _, c := range res.Ambiguous {
		fmt.Fprintf(w, "  ambiguous: row %s, column %s, timestamp %d (%s)\n", keytext.Quote(reportKey(c.Row, c.Quoted)), keytext.Quote(reportKey(c.Column, c.Quoted)), c.Timestamp, c.Time)
	}
	switch {
	case !res.Complete:
		fmt.Fprintf(w, "not done: shard(s) %s left cells to move\n", strings.Join(res.Incomplete, ", "))
	case res.DryRun:
		fmt.Fprintln(w, "the job would be done by these runs")
	case res.ToFamily == "":
		fmt.Fprintf(w, "the job is done: every shard left nothing to move. next: %s\n", nextInPlace)
	default:
		fmt.Fprintln(w, "the job is done: every shard left nothing to move (the next copy step follows, docs/design.md#migrate)")
	}
}

// nextInPlace is the step after an in-place migration (Plan.NextStep).
var nextInPlace = migrate.Plan{Family: "f", From: strategy.Unmanaged(), To: strategy.OneSecond()}.NextStep()

var migrateResolveCommand = command{
	name:     "migrate resolve",
	synopsis: []string{"-table T -family F -row R -column C -timestamp TS (-ttl D | -to TS | -delete) [-dry-run]"},
	short:    "move or delete one cell (an ambiguous one migrate listed), pinned against concurrent change",
	help: `Resolves one cell by hand, as bttl migrate lists ambiguous cells (its -json
report gives row, column and timestamp_micros): -ttl D moves it as a real
write time expiring D later (the timestamp becomes TS + D, as migrate
moves a legacy cell), -to TS2 moves it to timestamp TS2, -delete deletes
that one cell (cbt can only delete a whole column or row). The cell is
read and written with one conditional mutation that pins it (that column,
millisecond and value) and, for a move, requires the target millisecond
free: a cell changed, deleted or written over meanwhile is left as it is
and the command exits 1. -row and -column take a Go-quoted string ("...")
for bytes that are not UTF-8, as the report writes them; -timestamp takes
microseconds or an RFC 3339 time. -dry-run reads the cell and says what
would be done.
`,
	setup: func(fs *flag.FlagSet) invocation {
		a := &resolveArgs{}
		fs.StringVar(&a.table, "table", "", "the table (required)")
		fs.StringVar(&a.family, "family", "", "the cell's family (required)")
		fs.StringVar(&a.row, "row", "", "the cell's row key (required)")
		fs.StringVar(&a.column, "column", "", "the cell's column qualifier")
		fs.StringVar(&a.ts, "timestamp", "", "the cell's timestamp: `microseconds` or RFC 3339 (required)")
		fs.Var(ttlFlag{&a.ttl}, "ttl", "move it as a real write time: to its timestamp plus this `duration`")
		fs.StringVar(&a.to, "to", "", "move it to this `timestamp` (microseconds or RFC 3339, whole milliseconds)")
		fs.BoolVar(&a.delete, "delete", false, "delete the one cell")
		fs.BoolVar(&a.dryRun, "dry-run", false, "read the cell and say what would be done; write nothing")
		return invocation{check: a.check, run: a.run, writes: always}
	},
}

type resolveArgs struct {
	table, family, row, column, ts, to string
	ttl                                time.Duration
	delete, dryRun                     bool
	cell                               migrate.CellRef
	target                             bigtable.Timestamp
}

func (a *resolveArgs) check() error {
	n := 0
	for _, set := range []bool{a.ttl != 0, a.to != "", a.delete} {
		if set {
			n++
		}
	}
	switch {
	case a.table == "":
		return errors.New("-table is required")
	case a.family == "":
		return errors.New("-family is required")
	case a.row == "":
		return errors.New("-row is required")
	case a.ts == "":
		return errors.New("-timestamp is required")
	case n != 1:
		return errors.New("give one of -ttl D (move as a real write time), -to TS (move there) or -delete")
	}
	row, err := unquoteKey(a.row)
	if err != nil {
		return fmt.Errorf("-row: %w", err)
	}
	col, err := unquoteKey(a.column)
	if err != nil {
		return fmt.Errorf("-column: %w", err)
	}
	ts, err := parseTimestamp(a.ts)
	if err != nil {
		return fmt.Errorf("-timestamp: %w", err)
	}
	a.cell = migrate.CellRef{Row: row, Family: a.family, Column: col, Timestamp: ts}
	switch {
	case a.ttl != 0:
		a.target = strategy.Millis(ts) + bigtable.Timestamp(a.ttl/time.Microsecond)
		if a.target < ts {
			return errors.New("-ttl: the new timestamp overflows")
		}
	case a.to != "":
		if a.target, err = parseTimestamp(a.to); err != nil {
			return fmt.Errorf("-to: %w", err)
		}
		if a.target != strategy.Millis(a.target) {
			return errors.New("-to: want whole milliseconds (stored timestamps are)")
		}
	}
	return nil
}

// unquoteKey reads a key as given, or Go-quoted ("...") when it starts
// with a double quote.
func unquoteKey(s string) (string, error) {
	if strings.HasPrefix(s, `"`) {
		return strconv.Unquote(s)
	}
	return s, nil
}

// parseTimestamp reads microseconds since the epoch or an RFC 3339 time.
func parseTimestamp(s string) (bigtable.Timestamp, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || bigtable.Timestamp(n) > strategy.MaxTimestamp {
			return 0, errors.New("out of range")
		}
		return bigtable.Timestamp(n), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, errors.New("want microseconds since the epoch or an RFC 3339 time such as 2026-01-02T15:04:05.123Z")
	}
	return bigtable.Timestamp(t.UnixMicro()), nil
}

func (a *resolveArgs) run(e *env) int {
	// Point reads and a write: the write profile's (Data Boost serves
	// neither).
	tbl := e.write.Open(a.table)
	ctx, cancel := e.step()
	defer cancel()
	what := "delete"
	if !a.delete {
		what = "move to " + formatTS(a.target)
	}
	if a.dryRun {
		r, err := tbl.ReadRow(ctx, a.cell.Row, bigtable.RowFilter(bigtable.ChainFilters(
			bigtable.ColumnRangeFilter(a.cell.Family, a.cell.Column, a.cell.Column+"\x00"),
			bigtable.TimestampRangeFilterMicros(strategy.Millis(a.cell.Timestamp), strategy.MilliEnd(a.cell.Timestamp)),
			bigtable.StripValueFilter())))
		if err != nil {
			return e.fail(err)
		}
		if len(r[a.cell.Family]) == 0 {
			fmt.Fprintf(e.stderr, "bttl migrate resolve: %s: nothing stored there\n", a.cell)
			return exitFindings
		}
		fmt.Fprintf(e.stdout, "dry run: would %s: %s\n", what, a.cell)
		return exitOK
	}
	var err error
	if a.delete {
		err = migrate.DeleteCell(ctx, tbl, a.cell)
	} else {
		err = migrate.MoveCell(ctx, tbl, a.cell, a.target)
	}
	var ce *migrate.CellError
	if errors.As(err, &ce) {
		fmt.Fprintf(e.stderr, "bttl migrate resolve: %s\n", onePrefix(err.Error()))
		if errors.Is(err, migrate.ErrInvalidCell) {
			return exitError
		}
		return exitFindings
	}
	if err != nil {
		return e.fail(err)
	}
	done := "deleted"
	if !a.delete {
		done = "moved to " + formatTS(a.target)
	}
	fmt.Fprintf(e.stdout, "%s: %s\n", done, a.cell)
	return exitOK
}

// Migration reports kept in Bigtable (migrate -report bigtable://T/JOB):
// a row per job and shard, keyed migrateReportPrefix+JOB+"/"+i/n, laid
// out as audit's reports are (report.go), in the same table if wanted:
// an audit report's key starts with "audit/", a checkpoint's with the
// scanned table's ID and "#".
const migrateReportPrefix = "migrate/"

func migrateReportKey(d reportDest, sh scan.Shard) string {
	return migrateReportPrefix + d.job + "/" + sh.String()
}

// claimReport claims the shard's report row before the run (an earlier
// report of the shard goes with the claim, so merge never takes it for
// this run's); nil without -report, and for a dry run, which writes
// nothing.
func (a *migrateArgs) claimReport(e *env) (scan.CheckpointStore, error) {
	if a.report == "" || a.dryRun {
		return nil, nil
	}
	d, _ := parseReportDest(a.report) // checked
	sh := a.scan.shard
	if !a.scan.sharded() {
		sh = scan.Shard{Index: 0, Count: 1}
	}
	ctx, cancel := e.step()
	defer cancel()
	store, err := scan.NewBigtableStore(ctx, e.write, e.adminClient, d.table, migrateReportKey(d, sh))
	if err == nil {
		err = scan.ClaimEmpty(ctx, store) // the claim and the earlier report's removal in one write
	}
	return store, err
}

// readMigrateReports reads every shard's report of job d. A shard whose
// row is claimed but not written (its run going on, or stopped) is a
// mismatch, as a missing shard is; a job with no row at all exits 2.
func readMigrateReports(e *env, d reportDest) ([]*migrate.ShardReport, error) {
	ctx, cancel := e.step()
	defer cancel()
	recs, err := scan.ReadBigtableRecords(ctx, e.write, d.table, migrateReportPrefix+d.job+"/")
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s: %w of job %q in table %q (bttl migrate -report %s writes them)", d, errNoReports, d.job, d.table, d)
	}
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*migrate.ShardReport
	for _, k := range keys {
		name := scan.BigtableScheme + d.table + "/" + k
		if recs[k] == nil {
			return nil, &mergeMismatch{fmt.Errorf("%s: no report yet: that shard's run is going on, or stopped before it finished", name)}
		}
		r, err := parseShardReport(name, recs[k])
		if err != nil {
			return nil, err
		}
		if migrateReportKey(d, r.Shard) != k {
			return nil, &mergeMismatch{fmt.Errorf("%s: holds the report of shard %s: not where bttl migrate writes it", name, r.Shard)}
		}
		if err := checkWitnesses(e, name, r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// readsReportsToCheck says whether merge needs the instance: to read
// bigtable:// reports, or to check the witnesses a report file carries
// (a file is no proof that the table still holds what it moved). A file
// that cannot be read or parsed is left to run, which names it.
func readsReportsToCheck(args []string) bool {
	if readsBigtable(args) {
		return true
	}
	for _, a := range args {
		b, err := os.ReadFile(a)
		if err != nil {
			continue
		}
		if r, err := parseShardReport(a, b); err == nil && len(r.Witnesses) > 0 {
			return true
		}
	}
	return false
}

// checkWitnesses refuses (a mismatch) a report whose table no longer
// holds a cell the shard moved: restored from a backup or re-created
// since, the table is not the one the report describes, and its "done"
// would send the operator to bttl apply with the cells unmoved.
func checkWitnesses(e *env, name string, r *migrate.ShardReport) error {
	tbl := e.write.Open(r.Table) // the latest writes, by point reads
	for _, w := range r.Witnesses {
		ctx, cancel := e.step()
		stored, err := w.Stored(ctx, tbl)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: table %q: %w", name, r.Table, err)
		}
		if !stored {
			return &mergeMismatch{fmt.Errorf("%s: the report no longer describes table %q: the last cell shard %s moved in a key range (row %s, family %q, column %s) is no longer stored "+
				"(the table was restored or re-created since, or a writer deleted that cell); rerun shard %s with its -checkpoint (it reads that range again)",
				name, r.Table, r.Shard, keytext.Quote(string(w.Row)), w.Family, keytext.Quote(string(w.Column)), r.Shard)}
		}
	}
	return nil
}

func parseShardReport(name string, b []byte) (*migrate.ShardReport, error) {
	var r migrate.ShardReport
	err := json.NewDecoder(bytes.NewReader(b)).Decode(&r)
	if err == nil && (r.Version == 0 || r.Table == "") {
		err = errors.New("no version or table")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: not a bttl migrate -json report: %w", name, err)
	}
	return &r, nil
}

// checkMetricsOut refuses, before anything is read, a -metrics-out whose
// directory does not exist: found after a whole scan, it would lose the
// run's figures.
func checkMetricsOut(path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("-metrics-out %s: directory %s does not exist", path, dir)
	}
	return nil
}
