package main

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// Audit reports kept in Bigtable (audit -report bigtable://TABLE/JOB): a
// row per job and shard, keyed reportPrefix+JOB+"/"+i/n, in a table laid
// out as bigtable:// checkpoints are (scan.NewBigtableStore), so one table
// can hold both: a checkpoint's key starts with the scanned table's ID and
// "#", never with "audit/".
const reportPrefix = "audit/"

var jobPattern = regexp.MustCompile(`^[-_.a-zA-Z0-9]{1,100}$`)

// reportDest is a parsed bigtable://TABLE/JOB.
type reportDest struct{ table, job string }

func parseReportDest(s string) (reportDest, error) {
	rest, ok := strings.CutPrefix(s, scan.BigtableScheme)
	table, job, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || table == "" || !jobPattern.MatchString(job) {
		return reportDest{}, fmt.Errorf("%q: want %sTABLE/JOB, JOB a name of letters, digits, -, _ and . that every shard of the audit is given", s, scan.BigtableScheme)
	}
	return reportDest{table, job}, nil
}

func (d reportDest) String() string { return scan.BigtableScheme + d.table + "/" + d.job }

// key is the row of shard sh's report.
func (d reportDest) key(sh scan.Shard) string { return reportPrefix + d.job + "/" + sh.String() }

// errNoReports is a job with no report row at all (exit 2, as a missing
// file); a job with some shards missing is a mismatch (exit 1).
var errNoReports = errors.New("no reports")

// readReports reads the shards' reports of job d, as audit merge takes
// files: each named "bigtable://TABLE/JOB, shard i/n" in messages. A shard
// whose row is claimed but not written yet (its audit running, or stopped)
// is a mismatch, as a missing shard is.
func readReports(e *env, d reportDest) ([]*auditOutput, []string, error) {
	ctx, cancel := e.step()
	defer cancel()
	recs, err := scan.ReadBigtableRecords(ctx, e.write, d.table, reportPrefix+d.job+"/")
	if err != nil {
		return nil, nil, err
	}
	if len(recs) == 0 {
		return nil, nil, fmt.Errorf("%s: %w of job %q in table %q (bttl audit -report %s writes them)", d, errNoReports, d.job, d.table, d)
	}
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var outs []*auditOutput
	var names []string
	for _, k := range keys {
		// Named as the user wrote the job, with the shard: the row key is
		// bttl's own layout, not something a user typed.
		name := fmt.Sprintf("%s, shard %s", d, strings.TrimPrefix(k, reportPrefix+d.job+"/"))
		if recs[k] == nil {
			return nil, nil, &mergeMismatch{fmt.Errorf("%s: no report yet: that shard's audit is running, or stopped before it finished", name)}
		}
		out, err := parseAuditOutput(name, recs[k])
		if err != nil {
			return nil, nil, err
		}
		// The row's shard is where the audit wrote it; a report of
		// another shard in it was not written there by bttl audit.
		for _, r := range out.Tables {
			sh := scan.Shard{Index: 0, Count: 1}
			if r.Shard != nil {
				sh = *r.Shard
			}
			if d.key(sh) != k {
				return nil, nil, &mergeMismatch{fmt.Errorf("%s: holds a report of shard %s of table %q: not where bttl audit writes it", name, sh, r.Table)}
			}
		}
		outs, names = append(outs, out), append(names, name)
	}
	return outs, names, nil
}

// mergeMismatch is reports that do not fit together: exit 1.
type mergeMismatch struct{ err error }

func (m *mergeMismatch) Error() string { return m.err.Error() }
func (m *mergeMismatch) Unwrap() error { return m.err }
