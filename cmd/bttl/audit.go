package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/bigtable"
	"golang.org/x/term"

	"github.com/bttl/bttl/audit"
	"github.com/bttl/bttl/internal/keytext"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/internal/throttle"
	"github.com/bttl/bttl/internal/timefmt"
)

// reportClaimed, when a test sets it, runs once an audit with -report
// has claimed its report's row and hidden the earlier report, before the
// scan: a test holds the audit there (until ctx ends) to read what a
// merge sees meanwhile, with no timing of its own.
var reportClaimed func(ctx context.Context)

var auditCommand = command{
	name: "audit", needsSchema: true,
	synopsis: []string{
		"[-table T] [-json] [-prefix P | -start K -end K] [-sample F] [-limit N] [-bytes] [-fail-on LIST] [-metrics-out FILE] [-progress D] " +
			"[-workers N] [-cells-per-second R] [-shard I/N [-shard-keys FILE]] [-checkpoint FILE|bigtable://T] [-report bigtable://T/JOB] [-now TIME]",
		"-table T -suggest-shard-keys N",
	},
	short: "scan tables and report expired, mis-timestamped and excess cells",
	help: `Scans each table and reports per family: live cells, expired cells not yet
collected (finding "expired"), managed families with no GC rule, whose
expired cells are never collected ("no-gc-rule"), families whose GC rule is
not the one their strategy needs ("not-on-rule": cells the strategy reads
as expired are kept by that rule, as before or during a migration, and are
counted as not on their rule, not as expired), real or server timestamps
in one-second families not yet on their rule (on it, those are expired
cells) and real times in sequence families ("real-timestamps"), other
timestamps that are not sequence numbers in sequence families
("not-sequence"), sequence numbers in age families ("sequence-numbers"),
cells beyond the N versions kept ("beyond-kept"), rows over 100 MB
("large-rows"), and in write-time families cells under the reserved
qualifiers that are not companions, hidden from reads ("hidden-reserved");
companions are counted apart from the data. Values are not read unless
-bytes asks for byte figures (expired and beyond-N bytes, rows over 100 MB):
without it the report counts cells only, as cbt count reads them. A sampled
(-sample) or limited (-limit) report says so.
-fail-on makes the named findings exit 1, for CI; -metrics-out writes the
figures for node_exporter's textfile collector. Progress (fraction of key
ranges done, ETA) goes to stderr when it is a terminal, or with -progress.
Ctrl-C stops the scan (exit 130), SIGTERM too (exit 143). A key range whose
read receives nothing for -stall is read once more from its last row, then
the audit fails (exit 2) naming the endpoint; -timeout bounds the whole
command (default none). Reads the audited tables only (ReadRows,
SampleRowKeys); -checkpoint bigtable://T and -report write to their table.

The table is cut at its SampleRowKeys points into key ranges, read by
-workers streams at once, at most -cells-per-second. -shard i/n reads the
i-th of n pieces of the scanned range, so n processes or machines share an
audit: run each with the same -now (and -shard-keys, if any) and -json, or
-report bigtable://T/JOB, which writes each shard's report to a row of table
T of the instance (one per job and shard; the checkpoint table will do),
then merge the reports with 'bttl audit merge' (the files, or
bigtable://T/JOB). The pieces are a function
of the flags alone: by default an even split of the key space, which suits
hashed keys; for keys with a common prefix, write keys once with
-suggest-shard-keys n and pass the file to every shard as -shard-keys.
-shard defaults from the job runner's task index and count (Cloud Run jobs,
Cloud Batch, Kubernetes Indexed Jobs with -shard-count; examples/jobs).
-checkpoint FILE records finished ranges (one file per shard and table), or
-checkpoint bigtable://T in table T of the instance (one row per job and
shard), so a worker restarted on another machine resumes; a run restarted
with the same flags skips them and reads unfinished ranges again. See
docs/design.md#scan-engine.
`,
	setup: func(fs *flag.FlagSet) invocation {
		a := &auditArgs{}
		a.table = tableFlag(fs)
		fs.BoolVar(&a.json, "json", false, "print JSON instead of a table")
		fs.StringVar(&a.prefix, "prefix", "", "scan only rows with this key prefix")
		fs.StringVar(&a.start, "start", "", "scan from this row key (inclusive)")
		fs.StringVar(&a.end, "end", "", "scan up to this row key (exclusive)")
		fs.Var(sampleFlag{&a.opt.Sample}, "sample", "scan only this `fraction` of rows, in (0,1] (default: every row)")
		fs.Var(countFlag{&a.opt.Limit, 0}, "limit", "stop after `n` rows (0: no limit)")
		fs.Var(durationFlag{p: &a.every, set: &a.progressSet}, "progress",
			"progress line `interval` on stderr, also when it is not a terminal (0: none; default: every 1s on a terminal)")
		fs.StringVar(&a.metricsOut, "metrics-out", "", "also write the reports as bttl_audit_* gauges to this `file` (Prometheus textfile format, replaced atomically)")
		a.scan.register(fs, "read")
		fs.Var(countFlag{&a.suggest, 0}, "suggest-shard-keys", "print `n`-1 shard keys for n shards, from the table's sample points, and exit (needs -table when the schema has several tables)")
		fs.StringVar(&a.report, "report", "", "also write the JSON report (as -json prints it) to a row of table T of the instance with `bigtable://T/JOB` "+
			"(created when missing; one row per job and shard), for bttl audit merge bigtable://T/JOB (needs -now)")
		fs.StringVar(&a.checkpoint, "checkpoint", "", "record finished key ranges in this `file`, or in a row of table T of the instance with bigtable://T (created when missing), and resume from it (needs -now and -table when the schema has several tables)")
		fs.BoolVar(&a.bytes, "bytes", false, "read values to report byte figures (expired and beyond-N bytes, rows over 100 MB); without it values are stripped server-side, as cbt count does, and the report has no byte figures (-metrics-out and -fail-on large-rows imply it)")
		fs.Var(timeFlag{&a.now}, "now", "audit at this `time` (RFC 3339, e.g. 2026-01-02T15:04:05Z) instead of the clock: the same for every shard and restart")
		fs.Var(failOnFlag{&a.failOn}, "fail-on", "exit 1 when any of these findings is present (a comma-separated `list`): "+strings.Join(allFindings, ",")+", or all")
		return invocation{check: a.check, run: a.run, writes: func() bool { return strings.HasPrefix(a.checkpoint, scan.BigtableScheme) || a.report != "" }}
	},
}

type auditArgs struct {
	table              *string
	json               bool
	prefix, start, end string
	opt                auditScope
	every              time.Duration
	progressSet        bool
	failOn             []string
	metricsOut         string
	scan               scanFlags
	suggest            int64
	checkpoint         string
	report             string
	now                time.Time
	bytes              bool
}

// auditScope is what -sample and -limit set.
type auditScope struct {
	Sample float64
	Limit  int64
}

func (a *auditArgs) check() error {
	switch {
	case a.prefix != "" && (a.start != "" || a.end != ""):
		return errors.New("-prefix excludes -start and -end")
	case a.end != "" && a.start >= a.end:
		return fmt.Errorf("-start %q must sort before -end %q", a.start, a.end)
	case a.opt.Limit > 0 && (a.scan.workers > 1 || a.scan.sharded() || a.checkpoint != ""):
		return errors.New("-limit reads a table's first rows: it excludes -workers above 1, -shard and -checkpoint")
	case a.checkpoint != "" && a.now.IsZero():
		return errors.New("-checkpoint needs -now, so that a restart audits at the same time")
	case a.report != "" && a.now.IsZero():
		return errors.New("-report needs -now, so that every shard and restart audits at the same time and the reports merge")
	case a.report != "" && (a.opt.Limit > 0 || a.suggest > 0):
		return errors.New("-report keeps a shard's report for audit merge: it excludes -limit (a limited report does not merge) and -suggest-shard-keys")
	case a.suggest == 1:
		return errors.New("-suggest-shard-keys: want at least 2 shards")
	}
	if a.report != "" {
		if _, err := parseReportDest(a.report); err != nil {
			return fmt.Errorf("-report: %w", err)
		}
	}
	if a.metricsOut != "" {
		if err := checkWritableFile(a.metricsOut); err != nil {
			return fmt.Errorf("-metrics-out: %w", err)
		}
	}
	return a.scan.check()
}

// checkWritableFile checks, before a scan, that a file can be written at
// path as the metrics file is (a temporary file in its directory, renamed
// over it): a bad path is found before the scan, not after it.
func checkWritableFile(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".bttl-check-*")
	if err != nil {
		return err
	}
	return errors.Join(f.Close(), os.Remove(f.Name()))
}

// bounds is the scanned key range: [lo, hi), hi "" for the table's end.
func (a *auditArgs) bounds() (lo, hi string) {
	if a.prefix != "" {
		return a.prefix, prefixEnd(a.prefix)
	}
	return a.start, a.end
}

// prefixEnd is the first key after every key with prefix.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

func (a *auditArgs) run(e *env) int {
	tables, err := e.tables(*a.table)
	if err != nil {
		return e.fail(err)
	}
	if len(tables) > 1 && (a.checkpoint != "" || a.suggest > 0) {
		return e.fail(errors.New("-checkpoint and -suggest-shard-keys act on one table: give -table"))
	}
	start, end := a.bounds()
	sopts, err := a.scan.options()
	if err != nil {
		return e.fail(err)
	}
	sopts = append(sopts, scan.WithRange(start, end))
	if s := a.opt.Sample; s > 0 && s < 1 { // 1: every row, no sample filter
		sopts = append(sopts, scan.WithFilter(bigtable.RowSampleFilter(s)))
	}
	if a.opt.Limit > 0 {
		sopts = append(sopts, scan.WithLimit(a.opt.Limit))
	}
	if a.checkpoint != "" {
		sopts = append(sopts, scan.WithCheckpoint(a.checkpoint, nil))
	}
	withBytes := a.withBytes()
	if !withBytes {
		// Counting needs keys, columns and timestamps only: the values
		// stay on the server, as cbt count's do.
		sopts = append(sopts, scan.WithFilter(bigtable.StripValueFilter()))
	}
	// The report's row is claimed before the scan: a second worker on the
	// same shard that starts later takes it, and this one's write fails.
	var store scan.CheckpointStore
	if a.report != "" {
		d, _ := parseReportDest(a.report) // checked
		sh := a.scan.shard
		if !a.scan.sharded() {
			sh = scan.Shard{Index: 0, Count: 1}
		}
		ctx, cancel := e.step()
		store, err = scan.NewBigtableStore(ctx, e.write, e.adminClient, d.table, d.key(sh))
		if err == nil {
			// An earlier report of this shard goes with the claim, in the
			// same write: until this audit writes its own, the row reads
			// as not written, so merge does not take the earlier one for
			// this one, even if this audit stops right after.
			err = scan.ClaimEmpty(ctx, store)
		}
		cancel()
		if err != nil {
			return e.fail(fmt.Errorf("-report: %w", err))
		}
		if reportClaimed != nil {
			reportClaimed(e.ctx)
		}
	}
	tty := isTerminal(e.stderr)
	every := a.every
	if !a.progressSet && tty {
		every = time.Second
	}
	if a.checkpoint == "" && every == 0 {
		// The scan's default cut (at least 64 ranges) serves checkpoints
		// and progress; with neither, each range is only one more
		// ReadRows to set up, on both sides (BENCHMARKS.md#audit-pace):
		// 4 per worker still balance the workers.
		sopts = append(sopts, scan.WithRanges(4*max(int(a.scan.workers), 1)))
	}
	var reports []*audit.Report
	for _, t := range tables {
		// No probe before the scan: its first call (SampleRowKeys, which
		// the emulator answers by walking the whole table) fails within
		// -stall or -timeout on an unreachable endpoint.
		if a.suggest > 0 {
			ctx, cancel := e.step()
			keys, err := scan.SuggestShardKeys(ctx, e.data.Open(t), start, end, int(a.suggest))
			cancel()
			if err != nil {
				return e.fail(fmt.Errorf("table %q: %w", t, err))
			}
			for _, k := range keys {
				fmt.Fprintln(e.stdout, strconv.Quote(k))
			}
			return exitOK
		}
		var pr *progress
		topts := sopts
		if every > 0 {
			pr = &progress{w: e.stderr, tty: tty, limit: a.opt.Limit, pace: e.pace}
			topts = append(slices.Clip(sopts), scan.WithProgress(every, pr.update))
		}
		now := bigtable.Timestamp(e.now().UnixMicro())
		if !a.now.IsZero() {
			now = bigtable.Timestamp(a.now.UnixMicro()) // not bigtable.Time: UnixNano wraps past 2262
		}
		rep, err := audit.Scan(e.ctx, e.data.Open(t), t, e.schemas[t], now, topts...)
		pr.done()
		if err != nil {
			return e.fail(fmt.Errorf("table %q: %w", t, err))
		}
		// The rules say what the figures mean: expired cells of a family
		// with no rule are never collected; a one-second family already on
		// its rule holds expired cells, not real timestamps.
		ctx, cancel := e.step()
		fams, err := e.admin.Families(ctx, t)
		cancel()
		if err != nil {
			fmt.Fprintf(e.stderr, "bttl audit: table %q: GC rules not read (%v): findings are not classified by the families' rules\n", t, onePrefix(err.Error()))
		} else {
			rep.NoteGCRules(fams)
		}
		reports = append(reports, rep)
		if !a.json {
			writeReportBytes(e.stdout, rep, withBytes)
			if s := a.scope(rep); s != "" {
				fmt.Fprintf(e.stdout, "partial: %s\n", s)
			}
		}
	}
	out := auditOutput{Tables: reports, Sample: a.opt.Sample, Limit: a.opt.Limit, NoBytes: !withBytes}
	// The shard's report first: an output failing after it (the metrics
	// file) does not lose the scan the merge needs.
	if store != nil {
		b, err := out.encode()
		if err == nil {
			ctx, cancel := e.step()
			err = store.Save(ctx, b)
			cancel()
		}
		if err != nil {
			return e.fail(fmt.Errorf("-report: %w", err))
		}
	}
	if a.metricsOut != "" {
		write := func(w io.Writer) error { return audit.WriteMetrics(w, reports) }
		if err := writeMetricsWithPace(a.metricsOut, write, e.pace, "audit"); err != nil {
			return e.fail(fmt.Errorf("-metrics-out: %w", err))
		}
	}
	return finishOutput(e, out, a.json, a.failOn)
}

// withBytes reports whether the audit reads values: -bytes, or an output
// that needs byte figures.
func (a *auditArgs) withBytes() bool {
	if a.bytes || a.metricsOut != "" {
		return true
	}
	for _, f := range a.failOn {
		if f == findLargeRows {
			return true
		}
	}
	return false
}

// auditOutput is audit's JSON output, which audit merge reads back.
type auditOutput struct {
	Tables []*audit.Report `json:"tables"`
	// Sample and Limit say a report is partial; Findings lists the
	// kinds present, as -fail-on names them.
	Sample   float64  `json:"sample,omitempty"`
	Limit    int64    `json:"limit,omitempty"`
	Findings []string `json:"findings"`
	// NoBytes: values were not read (audit without -bytes), so the byte
	// figures (and rows over 100 MB) are zero, not measured.
	NoBytes bool `json:"no_bytes,omitempty"`
}

// encode is the output as -json prints it, its findings filled in.
func (out auditOutput) encode() ([]byte, error) {
	out.Findings = findings(out.Tables)
	if out.Findings == nil {
		out.Findings = []string{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	err := enc.Encode(out)
	return b.Bytes(), err
}

// finishOutput is finish for an output whose other fields are set.
func finishOutput(e *env, out auditOutput, asJSON bool, failOn []string) int {
	found := findings(out.Tables)
	if asJSON {
		b, err := out.encode()
		if err == nil {
			_, err = e.stdout.Write(b)
		}
		if err != nil {
			return e.fail(err)
		}
	}
	var failing []string
	for _, f := range failOn {
		for _, g := range found {
			if f == g {
				failing = append(failing, f)
			}
		}
	}
	if len(failing) > 0 {
		fmt.Fprintf(e.stderr, "bttl %s: findings named by -fail-on: %s\n", e.name, strings.Join(failing, ", "))
		return exitFindings
	}
	return exitOK
}

// scope says how a report is partial ("" when it covers every row of the
// scanned range).
func (a *auditArgs) scope(r *audit.Report) string {
	var parts []string
	if a.opt.Sample > 0 && a.opt.Sample < 1 {
		parts = append(parts, fmt.Sprintf("sampled about %g%% of rows (-sample %g): counts are of the sample", a.opt.Sample*100, a.opt.Sample))
	}
	if r.Shard != nil {
		var covered []string
		for _, rg := range r.Ranges {
			covered = append(covered, rg.String())
		}
		parts = append(parts, fmt.Sprintf("shard %s, key range %s: merge the shards' -json reports with bttl audit merge", r.Shard, strings.Join(covered, " ")))
	}
	if a.opt.Limit > 0 && r.Rows >= a.opt.Limit {
		parts = append(parts, fmt.Sprintf("stopped at the row limit (-limit %d): later rows not read", a.opt.Limit))
	}
	return strings.Join(parts, "; ")
}

// findings lists the kinds of finding present in reports, in -fail-on's
// order.
func findings(reports []*audit.Report) []string {
	has := map[string]bool{}
	for _, r := range reports {
		if r.RowsOver100MB > 0 {
			has[findLargeRows] = true
		}
		for _, f := range r.Families {
			has[findExpired] = has[findExpired] || f.Expired > 0
			has[findRealTimestamps] = has[findRealTimestamps] || (f.AtOrBeforeNow > 0 && !f.Adopted()) || f.RealTimes > 0
			has[findNoGCRule] = has[findNoGCRule] || f.NeverCollected()
			// A family with no rule is "no-gc-rule" already.
			has[findNotOnRule] = has[findNotOnRule] || (f.NotOnItsRule() && !f.NeverCollected())
			has[findNotSequence] = has[findNotSequence] || f.NotSequence > 0
			has[findSequenceNumbers] = has[findSequenceNumbers] || f.SequenceNumbers > 0
			has[findBeyondKept] = has[findBeyondKept] || f.BeyondKept > 0
			has[findHiddenReserved] = has[findHiddenReserved] || f.HiddenReserved > 0
		}
	}
	var out []string
	for _, k := range allFindings {
		if has[k] {
			out = append(out, k)
		}
	}
	return out
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress writes the scan's progress: rows and cells read, the fraction
// of the key ranges (weighted by the table's sample points) done, and an
// ETA. On a terminal the line is rewritten in place; elsewhere each update
// is a line of its own. The scan calls update from one goroutine.
type progress struct {
	w       io.Writer
	tty     bool
	limit   int64
	pace    *throttle.Controller // the pace shown, if any
	printed bool
}

func (p *progress) line(s scan.Progress) string {
	line := fmt.Sprintf("scanned %d rows, %d cells", s.Rows, s.Cells)
	f := s.Fraction
	if p.limit > 0 {
		f = max(f, float64(s.Rows)/float64(p.limit))
	}
	line += fmt.Sprintf(", about %.0f%% (%d of %d key ranges)", 100*f, s.RangesDone, s.Ranges)
	if s.ETA > 0 {
		line += fmt.Sprintf(", ETA %s", s.ETA)
	}
	return line + rateText(p.pace)
}

func (p *progress) update(s scan.Progress) {
	line := p.line(s)
	p.printed = true
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line) // \x1b[K clears the rest of a longer previous line
		return
	}
	fmt.Fprintln(p.w, line)
}

// done ends a terminal's progress line.
func (p *progress) done() {
	if p != nil && p.tty && p.printed {
		fmt.Fprintln(p.w)
	}
}

// readShardKeys reads -shard-keys: one key per line; a line in double
// quotes is a Go-quoted string (binary keys), as -suggest-shard-keys
// writes them; blank lines are skipped.
func readShardKeys(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []string
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSuffix(l, "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		if strings.HasPrefix(l, `"`) {
			k, err := strconv.Unquote(l)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
			l = k
		}
		keys = append(keys, l)
	}
	return keys, nil
}

func ts(t bigtable.Timestamp) string {
	if t == 0 {
		return "-"
	}
	return timefmt.Instant(time.UnixMicro(int64(t))) // fixed width: columns line up
}

// writeReportBytes writes the report, its byte figures only when they
// were measured (audit -bytes; without it values were stripped and the
// figures are not known).
func writeReportBytes(w io.Writer, r *audit.Report, withBytes bool) {
	num := func(n int64) string {
		if !withBytes {
			return "-"
		}
		return strconv.FormatInt(n, 10)
	}
	bytesOf := func(n int64) string {
		if !withBytes {
			return ""
		}
		return fmt.Sprintf(", %d bytes", n)
	}
	if withBytes {
		fmt.Fprintf(w, "table %q at %s: %d rows, %d cells, %d rows over 100 MB (largest %d bytes)\n",
			r.Table, ts(r.Now), r.Rows, r.Cells, r.RowsOver100MB, r.LargestRowBytes)
	} else {
		fmt.Fprintf(w, "table %q at %s: %d rows, %d cells (values not read: no byte figures; -bytes reads them)\n", r.Table, ts(r.Now), r.Rows, r.Cells)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FAMILY\tSTRATEGY\tCELLS\tLIVE\tEXPIRED\tEXPIRED BYTES\tOLDEST EXPIRY\tNOT ON RULE\tAT/BEFORE NOW\tBEYOND N")
	for _, f := range r.Families {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\n", f.Family, f.Strategy, f.Cells, f.Live, f.Expired, num(f.ExpiredBytes), ts(f.OldestExpiry), f.NotOnRule, f.AtOrBeforeNow, f.BeyondKept)
	}
	_ = tw.Flush()
	for _, f := range r.Families {
		if f.AtOrBeforeNow > 0 && !f.Adopted() {
			x := f.AtOrBeforeNowExample
			fmt.Fprintf(w, "! family %q (one-second): %d cell(s) with timestamps at or before now, as real or server timestamps are "+
				"(first: row %s, column %s, %s): a one-second adoption would delete them at once\n", f.Family, f.AtOrBeforeNow, keytext.Quote(x.Row), keytext.Quote(x.Column), ts(x.Timestamp))
		}
		switch {
		case f.NeverCollected() && f.NotOnRule > 0:
			fmt.Fprintf(w, "! family %q: %d cell(s)%s its strategy reads as expired, never collected: the family has no GC rule (bttl apply sets the rule its strategy needs)\n",
				f.Family, f.NotOnRule, bytesOf(f.NotOnRuleBytes))
		case f.NeverCollected():
			fmt.Fprintf(w, "! family %q: no GC rule: cells that expire will never be collected (bttl apply sets the rule its strategy needs)\n", f.Family)
		case f.NotOnItsRule():
			// Not GC lag: GC follows the rule the family carries.
			fmt.Fprintf(w, "! family %q: not on its rule yet: its GC rule is %s, not the one %s needs", f.Family, f.GCRule, f.Strategy)
			if f.NotOnRule > 0 {
				fmt.Fprintf(w, "; %d cell(s)%s its strategy reads as expired are kept by that rule (legacy real timestamps, or a migration under way), not expired stock GC failed to collect", f.NotOnRule, bytesOf(f.NotOnRuleBytes))
			}
			fmt.Fprintf(w, " (bttl plan shows what setting the rule does; bttl migrate moves legacy cells first)\n")
		case f.Expired > 0:
			fmt.Fprintf(w, "! family %q: %d expired cell(s)%s, not yet collected by GC (oldest expired %s)\n", f.Family, f.Expired, bytesOf(f.ExpiredBytes), ts(f.OldestExpiry))
		}
		if f.NotSequence > 0 {
			x := f.NotSequenceExample
			fmt.Fprintf(w, "! family %q (sequence): %d cell(s) whose timestamps are not sequence numbers, %d of them real times "+
				"(first: row %s, column %s, %s): they outrank every sequence number and hide later writes\n", f.Family, f.NotSequence, f.RealTimes, keytext.Quote(x.Row), keytext.Quote(x.Column), ts(x.Timestamp))
		}
		if f.SequenceNumbers > 0 {
			x := f.SequenceNumbersExample
			// A sequence number is not a time: printed raw.
			fmt.Fprintf(w, "! family %q: %d cell(s) whose timestamps are sequence numbers (first: row %s, column %s, timestamp %d): the age rule deletes them\n",
				f.Family, f.SequenceNumbers, keytext.Quote(x.Row), keytext.Quote(x.Column), x.Timestamp)
		}
		if f.BeyondKept > 0 {
			fmt.Fprintf(w, "! family %q: %d cell(s)%s, beyond the %d versions kept per column\n", f.Family, f.BeyondKept, bytesOf(f.BeyondKeptBytes), f.Versions)
		}
		if f.Companions > 0 {
			fmt.Fprintf(w, "family %q (write time): %d write-time companion cell(s)%s, stored beside the data and counted apart from it\n", f.Family, f.Companions, bytesOf(f.CompanionBytes))
		}
		if f.HiddenReserved > 0 {
			x := f.HiddenReservedExample
			fmt.Fprintf(w, "! family %q (write time): %d cell(s)%s, under reserved qualifiers (0xFF 0xFF...) that are not write-time companions "+
				"(first: row %s, column %s, %s): hidden from every read through bttl\n", f.Family, f.HiddenReserved, bytesOf(f.HiddenReservedBytes), keytext.Quote(x.Row), keytext.Quote(x.Column), ts(x.Timestamp))
		}
	}
	if withBytes && r.RowsOver100MB > 0 {
		fmt.Fprintf(w, "! %d row(s) over 100 MB\n", r.RowsOver100MB)
	}
}
