package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/bttl/bttl/audit"
)

// auditMergeCommand is "bttl audit merge": reached through audit, it reads
// files and calls no Bigtable API.
var auditMergeCommand = command{
	name: "audit merge", offline: true, args: "FILE...",
	help: `Merges the -json reports of the shards of one audit (bttl audit -shard i/n
-json, one file per shard) into the report a single audit would have made,
per table, and prints it as audit does (-json, -fail-on, -metrics-out).
The reports must be of the same tables, schema and clock time (-now), one
per shard of the same count, covering the scanned range with no gap or
overlap, unsampled or sampled alike, and not stopped by -limit; otherwise
nothing is merged and the command exits 1 saying why. Flags go before the
files. Needs no -project, -instance or -schema: the reports carry the
schema they were made with.
`,
	setup: func(fs *flag.FlagSet) invocation {
		m := &mergeArgs{}
		fs.BoolVar(&m.json, "json", false, "print JSON instead of a table")
		fs.StringVar(&m.metricsOut, "metrics-out", "", "also write the merged reports as bttl_audit_* gauges to this `file` (Prometheus textfile format, replaced atomically)")
		fs.Var(failOnFlag{&m.failOn}, "fail-on", "exit 1 when any of these findings is present (a comma-separated `list`): "+strings.Join(allFindings, ",")+", or all")
		return invocation{run: m.run}
	},
}

type mergeArgs struct {
	json       bool
	metricsOut string
	failOn     []string
}

// errMergeInput is a report file that cannot be read (exit 2); reports
// that do not fit together are a mismatch (exit 1).
var errMergeInput = errors.New("not an audit -json report")

func (m *mergeArgs) run(e *env) int {
	if len(e.args) == 0 {
		fmt.Fprintln(e.stderr, "bttl audit merge: give the shards' report files (bttl audit -json output)")
		return exitError
	}
	byTable := map[string][]*audit.Report{}
	var sample float64
	var noBytes bool
	for i, path := range e.args {
		out, err := readAuditOutput(path)
		if err != nil {
			return e.fail(err)
		}
		if out.Limit > 0 {
			return m.mismatch(e, fmt.Errorf("%s: stopped at -limit %d: a limited report does not cover its range", path, out.Limit))
		}
		if i == 0 {
			sample, noBytes = out.Sample, out.NoBytes
		} else if out.Sample != sample {
			return m.mismatch(e, fmt.Errorf("%s: -sample %g, %s: -sample %g: reports of different samples", e.args[0], sample, path, out.Sample))
		} else if out.NoBytes != noBytes {
			// Byte figures of a report without -bytes are zeros, not
			// measurements: a sum with measured ones would be neither.
			return m.mismatch(e, fmt.Errorf("%s and %s: one audit read values (-bytes) and the other did not: audit every shard the same way", e.args[0], path))
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
	var out auditOutput
	dec := json.NewDecoder(strings.NewReader(string(b)))
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
