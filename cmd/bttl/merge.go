package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/bttl/bttl/audit"
	scan "github.com/bttl/bttl/internal/scanjob"
)

// auditMergeCommand is "bttl audit merge", an entry of the command table
// as any other: it reads files, and needs the clients only for the rows of
// a bigtable://TABLE/JOB source (audit -report).
var auditMergeCommand = command{
	name: "audit merge", offline: true, args: "SOURCE...",
	online:   readsBigtable,
	synopsis: []string{"[-json] [-fail-on LIST] [-metrics-out FILE] FILE|bigtable://TABLE/JOB..."},
	short:    "merge the reports of an audit's shards into the report of the whole",
	help: `Merges the reports of the shards of one audit (bttl audit -shard i/n) into
the report a single audit would have made, per table, and prints it as
audit does (-json, -fail-on, -metrics-out). Each SOURCE is a file, one
shard's -json output, or bigtable://TABLE/JOB: every shard's report that
audit -report bigtable://TABLE/JOB wrote to table TABLE of the instance
(then -project and -instance are needed, as for audit).
The reports must be of the same tables, schema and clock time (-now), one
per shard of the same count, covering the scanned range with no gap or
overlap, unsampled or sampled alike, read with -bytes or without alike,
and not stopped by -limit; otherwise nothing is merged and the command
exits 1 saying why (a shard whose audit has not written its report yet is
a missing shard). A file that cannot be read, or a job with no report at
all, exits 2. Flags go before the sources. Needs no -schema: the reports
carry the schema they were made with.
`,
	setup: func(fs *flag.FlagSet) invocation {
		m := &mergeArgs{fs: fs}
		fs.BoolVar(&m.json, "json", false, "print JSON instead of a table")
		fs.StringVar(&m.metricsOut, "metrics-out", "", "also write the merged reports as bttl_audit_* gauges to this `file` (Prometheus textfile format, replaced atomically)")
		fs.Var(failOnFlag{&m.failOn}, "fail-on", "exit 1 when any of these findings is present (a comma-separated `list`): "+strings.Join(allFindings, ",")+", or all")
		return invocation{check: m.check, run: m.run, readsRecords: true}
	},
}

// readsBigtable reports whether a merge source is a table of the
// instance: then the command needs the clients.
func readsBigtable(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, scan.BigtableScheme) {
			return true
		}
	}
	return false
}

type mergeArgs struct {
	fs         *flag.FlagSet
	json       bool
	metricsOut string
	failOn     []string
}

// errMergeInput is a report file that cannot be read (exit 2); reports
// that do not fit together are a mismatch (exit 1).
var errMergeInput = errors.New("not an audit -json report")

func (m *mergeArgs) check() error {
	if m.fs.NArg() == 0 {
		return errors.New("give the shards' reports: files (bttl audit -json output) or bigtable://TABLE/JOB (bttl audit -report)")
	}
	for _, a := range m.fs.Args() {
		if strings.HasPrefix(a, scan.BigtableScheme) {
			if _, err := parseReportDest(a); err != nil {
				return err
			}
		}
	}
	return nil
}

// read reads every source's reports: a file's one, a job's every shard's.
func (m *mergeArgs) read(e *env) ([]*auditOutput, []string, error) {
	var outs []*auditOutput
	var names []string
	for _, src := range e.args {
		if strings.HasPrefix(src, scan.BigtableScheme) {
			d, err := parseReportDest(src)
			if err != nil {
				return nil, nil, err
			}
			o, n, err := readReports(e, d)
			if err != nil {
				return nil, nil, err
			}
			outs, names = append(outs, o...), append(names, n...)
			continue
		}
		out, err := readAuditOutput(src)
		if err != nil {
			return nil, nil, err
		}
		outs, names = append(outs, out), append(names, src)
	}
	return outs, names, nil
}

func (m *mergeArgs) run(e *env) int {
	outs, names, err := m.read(e)
	var mm *mergeMismatch
	if errors.As(err, &mm) {
		return m.mismatch(e, err)
	}
	if err != nil {
		return e.fail(err)
	}
	byTable := map[string][]*audit.Report{}
	var sample float64
	var noBytes bool
	for i, out := range outs {
		path := names[i]
		if out.Limit > 0 {
			return m.mismatch(e, fmt.Errorf("%s: stopped at -limit %d: a limited report does not cover its range", path, out.Limit))
		}
		if i == 0 {
			sample, noBytes = out.Sample, out.NoBytes
		} else if out.Sample != sample {
			return m.mismatch(e, fmt.Errorf("%s: -sample %g, %s: -sample %g: reports of different samples", names[0], sample, path, out.Sample))
		} else if out.NoBytes != noBytes {
			// Byte figures of a report without -bytes are zeros, not
			// measurements: a sum with measured ones would be neither.
			return m.mismatch(e, fmt.Errorf("%s and %s: one audit read values (-bytes) and the other did not: audit every shard the same way", names[0], path))
		}
		for _, r := range out.Tables {
			byTable[r.Table] = append(byTable[r.Table], r)
		}
	}
	tables := make([]string, 0, len(byTable))
	for t := range byTable {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	var reports []*audit.Report
	for _, t := range tables {
		rep, err := audit.Merge(byTable[t]...)
		if err != nil {
			return m.mismatch(e, err)
		}
		reports = append(reports, rep)
	}
	if !m.json {
		for _, rep := range reports {
			writeReportBytes(e.stdout, rep, !noBytes)
			if sample > 0 && sample < 1 {
				fmt.Fprintf(e.stdout, "partial: sampled about %g%% of rows (-sample %g): counts are of the sample\n", sample*100, sample)
			}
		}
	}
	if m.metricsOut != "" && noBytes {
		fmt.Fprintln(e.stderr, "bttl audit merge: -metrics-out needs byte figures: audit the shards with -bytes (as audit -metrics-out does)")
		return exitError
	}
	if m.metricsOut != "" {
		if err := audit.WriteMetricsFile(m.metricsOut, reports); err != nil {
			return e.fail(fmt.Errorf("-metrics-out: %w", err))
		}
	}
	return finishOutput(e, auditOutput{Tables: reports, Sample: sample, NoBytes: noBytes}, m.json, m.failOn)
}

func (m *mergeArgs) mismatch(e *env, err error) int {
	fmt.Fprintf(e.stderr, "bttl audit merge: %s\n", onePrefix(err.Error()))
	return exitFindings
}

func readAuditOutput(path string) (*auditOutput, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseAuditOutput(path, b)
}

// parseAuditOutput reads one audit -json output (from a file, or a
// Bigtable report row), named path in messages.
func parseAuditOutput(path string, b []byte) (*auditOutput, error) {
	var out auditOutput
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, errMergeInput, err)
	}
	if len(out.Tables) == 0 {
		return nil, fmt.Errorf("%s: %w: no tables", path, errMergeInput)
	}
	for _, r := range out.Tables {
		if r == nil || r.Table == "" {
			return nil, fmt.Errorf("%s: %w: a table without a name", path, errMergeInput)
		}
	}
	return &out, nil
}
