package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// checkpointListCommand and checkpointRmCommand show and remove the rows
// of a table keeping bttl's state (-checkpoint bigtable://T, audit
// -report bigtable://T/JOB).
var checkpointListCommand = command{
	name: "checkpoint list", args: "bigtable://TABLE",
	synopsis: []string{"[-table T | -report JOB] [-json] bigtable://TABLE"},
	short:    "list the checkpoints and audit reports kept in a table of the instance",
	help: `Lists the rows of TABLE, a table keeping bttl's state in the instance
(what -checkpoint bigtable://TABLE and audit -report bigtable://TABLE/JOB
write): each checkpoint (the scanned table, the shard, key ranges finished
of all, when written, when it expires) and each audit report (its job and
shard). -table lists the checkpoints of one scanned table, -report the
reports of one audit job. A row expires 30 days after its last write (the
table's GC rule); a row written within -idle is marked active: a job may
be running on it. A file checkpoint (-checkpoint FILE) is a file: list and
remove it as one.
`,
	setup: func(fs *flag.FlagSet) invocation {
		c := &checkpointArgs{fs: fs}
		c.define(fs)
		fs.BoolVar(&c.json, "json", false, "print JSON instead of a table")
		return invocation{check: c.check, run: c.list, readsRecords: true}
	},
}

var checkpointRmCommand = command{
	name: "checkpoint rm", args: "bigtable://TABLE",
	synopsis: []string{"[-table T | -report JOB] -dry-run bigtable://TABLE",
		"[-table T | -report JOB] -expect N [-force] bigtable://TABLE"},
	short: "remove checkpoints and audit reports kept in a table of the instance",
	help: `Removes rows of TABLE, a table keeping bttl's state in the instance
(-checkpoint bigtable://TABLE, audit -report bigtable://TABLE/JOB): every
row, or the checkpoints of one scanned table (-table), or the reports of
one audit job (-report). First -dry-run: it lists the rows it would remove
and prints the flags to remove them, -expect N, N their count; a run whose
count differs removes nothing and exits 1. A row written within -idle
(default 24h) may belong to a running job: the command then removes
nothing and exits 1 unless -force. Each row is removed only if no run
claimed or wrote it since it was listed (a run that took it over keeps
it; the command says so and exits 1). A job whose checkpoint is removed
starts over at its next run; one whose reports are removed must be run
again before bttl audit merge.
`,
	setup: func(fs *flag.FlagSet) invocation {
		c := &checkpointArgs{fs: fs}
		c.define(fs)
		fs.BoolVar(&c.dryRun, "dry-run", false, "list the rows that would be removed, and the -expect flag that removes them; remove nothing")
		fs.Var(expectFlag{&c.expect, &c.expectGiven}, "expect", "the `count` of rows the dry run listed; a different count removes nothing")
		fs.BoolVar(&c.force, "force", false, "remove rows written within -idle too (a job may be running on them)")
		return invocation{check: c.checkRm, run: c.rm, writes: always}
	},
}

type checkpointArgs struct {
	fs          *flag.FlagSet
	table, job  string
	idle        time.Duration
	json        bool
	dryRun      bool
	expect      int64
	expectGiven bool
	force       bool
}

// defaultIdle is how recently a row must have been written to count as a
// running job's: a running job rewrites its checkpoint as each key range
// finishes, and its report when it ends.
const defaultIdle = 24 * time.Hour

func (c *checkpointArgs) define(fs *flag.FlagSet) {
	fs.StringVar(&c.table, "table", "", "only the checkpoints of scans of this `table`")
	fs.StringVar(&c.job, "report", "", "only the reports of this audit `job` (audit -report bigtable://TABLE/JOB)")
	fs.DurationVar(&c.idle, "idle", defaultIdle, "a row written within this `duration` counts as a running job's")
}

func (c *checkpointArgs) check() error {
	switch {
	case c.fs.NArg() != 1:
		return fmt.Errorf("want one argument, %sTABLE: the table keeping the checkpoints", scan.BigtableScheme)
	case !strings.HasPrefix(c.fs.Arg(0), scan.BigtableScheme) || strings.Contains(strings.TrimPrefix(c.fs.Arg(0), scan.BigtableScheme), "/"):
		return fmt.Errorf("%q: want %sTABLE (a file checkpoint is a file: list or remove it as one)", c.fs.Arg(0), scan.BigtableScheme)
	case c.table != "" && c.job != "":
		return errors.New("-table and -report select different rows: give one")
	case c.job != "" && !jobPattern.MatchString(c.job):
		return fmt.Errorf("-report: %q: want a job name of letters, digits and - _ . (as audit -report takes)", c.job)
	case c.idle < 0:
		return errors.New("-idle: a duration of 0 or more")
	}
	return nil
}

func (c *checkpointArgs) checkRm() error {
	if err := c.check(); err != nil {
		return err
	}
	switch {
	case c.dryRun && (c.expectGiven || c.force):
		return errors.New("-dry-run removes nothing: it excludes -expect and -force")
	case !c.dryRun && !c.expectGiven:
		return errors.New("give -dry-run first, then -expect N with the count it listed: nothing is removed on a guess")
	}
	return nil
}

// stateTable is the argument's table ID.
func (c *checkpointArgs) stateTable() string {
	return strings.TrimPrefix(c.fs.Arg(0), scan.BigtableScheme)
}

// prefix is the row key prefix -table or -report selects.
func (c *checkpointArgs) prefix() string {
	switch {
	case c.table != "":
		return c.table + "#"
	case c.job != "":
		return reportPrefix + c.job + "/"
	}
	return ""
}

// stateRow is a listed row, as -json prints it.
type stateRow struct {
	Key  string `json:"key"`
	Kind string `json:"kind"` // checkpoint, report, or other
	// Table, Shard, Ranges and Done: a checkpoint's scan; Job: its job,
	// or a report's job name.
	Table   string          `json:"table,omitempty"`
	Shard   string          `json:"shard,omitempty"`
	Ranges  int             `json:"ranges,omitempty"`
	Done    int             `json:"done,omitempty"`
	Job     json.RawMessage `json:"job,omitempty"`
	Written string          `json:"written"`
	Expires string          `json:"expires"`
	// Active: written within -idle; Empty: claimed, never written.
	Active bool `json:"active,omitempty"`
	Empty  bool `json:"empty,omitempty"`
	rec    scan.StoredRecord
}

func (c *checkpointArgs) read(e *env) ([]stateRow, error) {
	ctx, cancel := e.step()
	defer cancel()
	recs, err := scan.ListBigtableRecords(ctx, e.write, c.stateTable(), c.prefix())
	if err != nil {
		return nil, err
	}
	now := e.now()
	rows := make([]stateRow, 0, len(recs))
	for _, r := range recs {
		row := stateRow{Key: r.Key, Kind: "other", rec: r, Written: formatRFC3339(r.Written),
			Expires: formatRFC3339(r.Written.Add(scan.RecordTTL)), Active: now.Sub(r.Written) < c.idle, Empty: r.Record == nil}
		switch {
		case strings.HasPrefix(r.Key, reportPrefix):
			row.Kind = "report"
			rest := strings.TrimPrefix(r.Key, reportPrefix)
			if i := strings.LastIndex(rest, "/"); i > 0 {
				if j := strings.LastIndex(rest[:i], "/"); j > 0 {
					job, _ := json.Marshal(rest[:j])
					row.Job, row.Shard = job, rest[j+1:]
				}
			}
		case strings.Contains(r.Key, "#"):
			row.Kind = "checkpoint"
			if r.Record == nil {
				break
			}
			if info, err := scan.ParseCheckpoint(r.Record); err == nil {
				row.Table, row.Shard, row.Ranges, row.Done, row.Job = info.Table, info.Shard.String(), info.Ranges, info.Done, info.Job
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (c *checkpointArgs) list(e *env) int {
	rows, err := c.read(e)
	if err != nil {
		return e.fail(err)
	}
	if c.json {
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return e.fail(err)
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		return exitOK
	}
	writeStateRows(e, rows)
	return exitOK
}

func writeStateRows(e *env, rows []stateRow) {
	if len(rows) == 0 {
		fmt.Fprintf(e.stdout, "no rows in %s\n", e.args[0])
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tTABLE\tSHARD\tRANGES DONE\tWRITTEN\tEXPIRES\tSTATE")
	for _, r := range rows {
		ranges := "-"
		if r.Ranges > 0 {
			ranges = fmt.Sprintf("%d/%d", r.Done, r.Ranges)
		}
		state := "idle"
		switch {
		case r.Active:
			state = "active"
		case r.Empty:
			state = "claimed, never written"
		}
		if r.Active && r.Empty {
			state = "active, not written yet"
		}
		fmt.Fprintf(tw, "%q\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Key, r.Kind, dash(r.Table), dash(r.Shard), ranges, r.Written, r.Expires, state)
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *checkpointArgs) rm(e *env) int {
	rows, err := c.read(e)
	if err != nil {
		return e.fail(err)
	}
	active := 0
	for _, r := range rows {
		if r.Active {
			active++
		}
	}
	if c.dryRun {
		writeStateRows(e, rows)
		if len(rows) == 0 {
			return exitOK
		}
		fmt.Fprintf(e.stdout, "to remove these %d row(s): bttl checkpoint rm%s -expect %d %s\n", len(rows), c.selection(), len(rows), e.args[0])
		if active > 0 {
			fmt.Fprintf(e.stdout, "%d of them written within %s (a job may be running on them): add -force to remove them too\n", active, c.idle)
		}
		return exitOK
	}
	if int64(len(rows)) != c.expect {
		fmt.Fprintf(e.stderr, "bttl checkpoint rm: %d row(s) selected, -expect %d: nothing removed (run -dry-run again)\n", len(rows), c.expect)
		return exitFindings
	}
	if active > 0 && !c.force {
		fmt.Fprintf(e.stderr, "bttl checkpoint rm: %d row(s) written within %s (a job may be running on them): nothing removed; stop the job, or add -force\n", active, c.idle)
		return exitFindings
	}
	removed, kept := 0, 0
	for _, r := range rows {
		ctx, cancel := e.step()
		ok, err := scan.RemoveBigtableRecord(ctx, e.write, c.stateTable(), r.rec)
		cancel()
		if err != nil {
			fmt.Fprintf(e.stdout, "removed %d row(s)\n", removed)
			return e.fail(err)
		}
		if ok {
			removed++
			continue
		}
		kept++
		fmt.Fprintf(e.stderr, "bttl checkpoint rm: %q: a run claimed or wrote it since it was listed: kept\n", r.Key)
	}
	fmt.Fprintf(e.stdout, "removed %d row(s) from %s\n", removed, e.args[0])
	if kept > 0 {
		return exitFindings
	}
	return exitOK
}

// selection is -table or -report as given, for the printed command.
func (c *checkpointArgs) selection() string {
	switch {
	case c.table != "":
		return " -table " + c.table
	case c.job != "":
		return " -report " + c.job
	}
	return ""
}
