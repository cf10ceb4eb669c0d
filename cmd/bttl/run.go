package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/audit"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/provision"
	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
)

// Exit statuses.
const (
	exitOK       = 0
	exitFindings = 1 // mismatch, refusal, not confirmed
	exitError    = 2 // usage, file or connection error
)

const usage = `usage: bttl -project P -instance I -schema FILE <command> [flags]

commands:
  verify   compare each table's families and GC rules with the schema (exit 1 on mismatch)
  plan     show the family and GC-rule changes apply would make
  apply    make them (asks for confirmation unless -yes; refuses a change that would
           delete or hide stored cells unless -force)
  audit    scan a table and report per family: live cells, expired cells not yet
           collected, real/server timestamps in one-second families, sequence cells
           beyond the N kept, rows over 100 MB (-json for machines)

BIGTABLE_EMULATOR_HOST points bttl at an emulator, as it does cbt.
`

// env is what a command needs.
type env struct {
	ctx     context.Context
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	schemas map[string]strategy.Schema
	tables  []string // the tables to act on, sorted
	data    *bigtable.Client
	admin   *gcrule.Admin
	now     func() time.Time
}

// run is the whole command, callable in-process by tests.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bttl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	project := fs.String("project", "", "project ID (required)")
	instance := fs.String("instance", "", "instance ID (required)")
	schemaPath := fs.String("schema", "", "schema file, JSON (.json) or YAML (required)")
	if err := fs.Parse(args); err != nil {
		return exitError
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitError
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	commands := map[string]func(*env, []string) int{"verify": verify, "plan": plan, "apply": apply, "audit": auditCmd}
	f, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(stderr, "bttl: unknown command %q\n", cmd)
		fs.Usage()
		return exitError
	}
	if *project == "" || *instance == "" || *schemaPath == "" {
		fmt.Fprintln(stderr, "bttl: -project, -instance and -schema are required")
		return exitError
	}
	schemas, err := schemafile.Load(*schemaPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	// The emulator logs every GC pass through the standard logger of the
	// process that embeds it; keep the command's output clean.
	log.SetOutput(io.Discard)
	cfg := bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}
	data, err := bigtable.NewClientWithConfig(ctx, *project, *instance, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "bttl: data client: %v\n", err)
		return exitError
	}
	defer data.Close()
	ac, err := bigtable.NewAdminClient(ctx, *project, *instance)
	if err != nil {
		fmt.Fprintf(stderr, "bttl: admin client: %v\n", err)
		return exitError
	}
	defer ac.Close()
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, schemas: schemas,
		data: data, admin: gcrule.NewAdmin(ac, *project, *instance), now: time.Now}
	return f(e, rest)
}

// flags parses a command's flags, with -table common to all.
func (e *env) flags(name string, args []string, define func(*flag.FlagSet)) bool {
	fs := flag.NewFlagSet("bttl "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	table := fs.String("table", "", "act on this table of the schema file only (default: all)")
	if define != nil {
		define(fs)
	}
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "bttl %s: unexpected arguments %q\n", name, fs.Args())
		return false
	}
	if *table != "" {
		if _, ok := e.schemas[*table]; !ok {
			fmt.Fprintf(e.stderr, "bttl %s: table %q is not in the schema file\n", name, *table)
			return false
		}
		e.tables = []string{*table}
		return true
	}
	for t := range e.schemas {
		e.tables = append(e.tables, t)
	}
	sort.Strings(e.tables)
	return true
}

func verify(e *env, args []string) int {
	if !e.flags("verify", args, nil) {
		return exitError
	}
	code := exitOK
	for _, t := range e.tables {
		err := e.admin.Verify(e.ctx, t, e.schemas[t])
		var ms gcrule.Mismatches
		switch {
		case errors.As(err, &ms):
			code = exitFindings
			fmt.Fprintf(e.stdout, "table %q: MISMATCH\n", t)
			for _, m := range ms {
				fmt.Fprintf(e.stdout, "  family %q (%s): %s: expected %s, actual %s\n", m.Family, m.Policy, m.Kind, m.Expected, m.Actual)
			}
		case err != nil:
			fmt.Fprintln(e.stderr, err)
			return exitError
		default:
			fmt.Fprintf(e.stdout, "table %q: ok\n", t)
		}
	}
	return code
}

func (e *env) provisioner(opts ...provision.Option) *provision.Provisioner {
	return provision.New(e.admin, e.data, append([]provision.Option{provision.WithOutput(e.stdout)}, opts...)...)
}

// plans computes every table's plan and prints it, with the one-second
// adoptions apply would refuse (refusal) unless forced.
func (e *env) plans(p *provision.Provisioner) (plans []*provision.Plan, refusal, err error) {
	for _, t := range e.tables {
		pl, err := p.Plan(e.ctx, t, e.schemas[t])
		if err != nil {
			return nil, nil, err
		}
		pl.Write(e.stdout)
		if err := p.CheckAdoptions(e.ctx, pl); err != nil {
			if !errors.Is(err, provision.ErrUnsafeAdoption) {
				return nil, nil, err
			}
			fmt.Fprintf(e.stdout, "  ! %v\n", err)
			refusal = errors.Join(refusal, err)
		}
		plans = append(plans, pl)
	}
	return plans, refusal, nil
}

func plan(e *env, args []string) int {
	var exact bool
	if !e.flags("plan", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&exact, "exact", false, "count what a lowering change makes collectable over every row, not a sample")
	}) {
		return exitError
	}
	var opts []provision.Option
	if exact {
		opts = append(opts, provision.WithExactCounts())
	}
	_, refusal, err := e.plans(e.provisioner(opts...))
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return exitError
	}
	if refusal != nil {
		fmt.Fprintln(e.stdout, "apply will refuse the change(s) marked ! above without -force")
	}
	return exitOK
}

func apply(e *env, args []string) int {
	var yes, force bool
	var sample int
	if !e.flags("apply", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
		fs.BoolVar(&force, "force", false, "make changes that delete or hide stored cells (real timestamps under one-second expiry, sequence numbers under an age rule, real timestamps under sequence)")
		fs.IntVar(&sample, "sample-rows", 10_000, "rows the one-second safety scan reads per family")
	}) {
		return exitError
	}
	opts := []provision.Option{provision.WithSampleRows(sample)}
	if force {
		opts = append(opts, provision.WithForce())
	}
	p := e.provisioner(opts...)
	plans, refusal, err := e.plans(p)
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return exitError
	}
	if refusal != nil && !force {
		fmt.Fprintln(e.stderr, "bttl apply: refused: a rule change would delete or hide stored cells (marked ! above); nothing changed (use -force to go ahead)")
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
		if err := p.Execute(e.ctx, pl, e.schemas[pl.Table]); err != nil {
			fmt.Fprintln(e.stderr, err)
			if errors.Is(err, provision.ErrUnsafeAdoption) {
				return exitFindings
			}
			return exitError
		}
	}
	return exitOK
}

func auditCmd(e *env, args []string) int {
	var asJSON bool
	var prefix, start, end string
	var opt audit.Options
	if !e.flags("audit", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
		fs.StringVar(&prefix, "prefix", "", "scan only rows with this key prefix")
		fs.StringVar(&start, "start", "", "scan from this row key (inclusive)")
		fs.StringVar(&end, "end", "", "scan up to this row key (exclusive)")
		fs.Float64Var(&opt.Sample, "sample", 0, "scan only this fraction of rows, in (0,1)")
		fs.Int64Var(&opt.Limit, "limit", 0, "stop after this many rows")
		fs.DurationVar(&opt.ProgressEvery, "progress", time.Second, "progress line interval on stderr (0: none)")
	}) {
		return exitError
	}
	switch {
	case prefix != "" && (start != "" || end != ""):
		fmt.Fprintln(e.stderr, "bttl audit: -prefix excludes -start/-end")
		return exitError
	case prefix != "":
		opt.Rows = bigtable.PrefixRange(prefix)
	case end != "":
		opt.Rows = bigtable.NewRange(start, end)
	case start != "":
		opt.Rows = bigtable.InfiniteRange(start)
	}
	progressed := false
	if opt.ProgressEvery > 0 {
		opt.Progress = func(rows, cells int64) {
			progressed = true
			fmt.Fprintf(e.stderr, "\rscanned %d rows, %d cells", rows, cells)
		}
	}
	var reports []*audit.Report
	for _, t := range e.tables {
		now := bigtable.Timestamp(e.now().UnixMicro())
		rep, err := audit.Scan(e.ctx, e.data.Open(t), t, e.schemas[t], now, opt)
		if progressed {
			fmt.Fprintln(e.stderr)
			progressed = false
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "bttl audit: table %q: %v\n", t, err)
			return exitError
		}
		reports = append(reports, rep)
		if !asJSON {
			writeReport(e.stdout, rep)
		}
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Tables []*audit.Report `json:"tables"`
		}{reports}); err != nil {
			fmt.Fprintln(e.stderr, err)
			return exitError
		}
	}
	return exitOK
}

func ts(t bigtable.Timestamp) string {
	if t == 0 {
		return "-"
	}
	return t.Time().UTC().Format(time.RFC3339Nano)
}

func writeReport(w io.Writer, r *audit.Report) {
	fmt.Fprintf(w, "table %q at %s: %d rows, %d cells, %d rows over 100 MB (largest %d bytes)\n",
		r.Table, ts(r.Now), r.Rows, r.Cells, r.RowsOver100MB, r.LargestRowBytes)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FAMILY\tSTRATEGY\tCELLS\tLIVE\tEXPIRED\tEXPIRED BYTES\tOLDEST EXPIRY\tAT/BEFORE NOW\tBEYOND N")
	for _, f := range r.Families {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", f.Family, f.Strategy, f.Cells, f.Live, f.Expired, f.ExpiredBytes, ts(f.OldestExpiry), f.AtOrBeforeNow, f.BeyondKept)
	}
	_ = tw.Flush()
	for _, f := range r.Families {
		if f.AtOrBeforeNow > 0 {
			x := f.AtOrBeforeNowExample
			fmt.Fprintf(w, "! family %q (one-second): %d cell(s) with timestamps at or before now, as real or server timestamps are "+
				"(first: row %q, column %q, %s): a one-second adoption would delete them at once\n", f.Family, f.AtOrBeforeNow, x.Row, x.Column, ts(x.Timestamp))
		}
		if f.Expired > 0 {
			fmt.Fprintf(w, "! family %q: %d expired cell(s), %d bytes, not yet collected by GC (oldest expired %s)\n", f.Family, f.Expired, f.ExpiredBytes, ts(f.OldestExpiry))
		}
		if f.NotSequence > 0 {
			x := f.NotSequenceExample
			fmt.Fprintf(w, "! family %q (sequence): %d cell(s) whose timestamps are not sequence numbers, %d of them real times "+
				"(first: row %q, column %q, %s): they outrank every sequence number and hide later writes\n", f.Family, f.NotSequence, f.RealTimes, x.Row, x.Column, ts(x.Timestamp))
		}
		if f.SequenceNumbers > 0 {
			x := f.SequenceNumbersExample
			fmt.Fprintf(w, "! family %q: %d cell(s) whose timestamps are sequence numbers (first: row %q, column %q, timestamp %d): the age rule deletes them\n",
				f.Family, f.SequenceNumbers, x.Row, x.Column, x.Timestamp)
		}
		if f.BeyondKept > 0 {
			fmt.Fprintf(w, "! family %q: %d cell(s), %d bytes, beyond the %d versions kept per column\n", f.Family, f.BeyondKept, f.BeyondKeptBytes, f.Versions)
		}
	}
	if r.RowsOver100MB > 0 {
		fmt.Fprintf(w, "! %d row(s) over 100 MB\n", r.RowsOver100MB)
	}
}
