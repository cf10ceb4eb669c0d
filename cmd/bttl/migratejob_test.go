package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/internal/keytext"
	migrate "github.com/bttl/bttl/internal/migratejob"
)

// Each shard of a job reports its own run as JSON and says the next step is
// the job's, due once every shard is done (it printed "next: ... bttl apply"
// while other shards still ran); bttl migrate merge of every shard's report
// gives the job's result and the next step, -metrics-out its gauges, and
// refuses a missing shard or a report of another TTL (issue 35 item 5).
func TestMigrateShardReportsMerge(t *testing.T) {
	migrateServers(t, func(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string) {
		createLegacy(t, ac)
		now := time.Now().Add(-time.Second)
		model := loadRealTimestamps(t, dc, "legacy", "f", 300, 5, now)
		schema := writeFile(t, "s.yaml", oneSecondSchema)
		keys := writeFile(t, "keys", "row0000150\n")
		dir := t.TempDir()
		args := func(i int, extra ...string) []string {
			return append(append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d",
				"-shard", fmt.Sprintf("%d/2", i), "-shard-keys", keys, "-checkpoint", filepath.Join(dir, fmt.Sprintf("ckpt%d", i))}, switchedAt(now)...), extra...)
		}
		report := func(i int) string { return filepath.Join(dir, fmt.Sprintf("shard%d.json", i)) }

		r := bttl(t, addr, "", args(0, "-json")...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		var sr migrate.ShardReport
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &sr), "-json prints the report only: %s", r.stdout)
		assert.True(t, sr.Complete)
		assert.Equal(t, "0/2", sr.Shard.String())
		assert.Equal(t, int64(750), sr.Total.Moved, "rows 0-149 of 300")
		require.NoError(t, os.WriteFile(report(0), []byte(r.stdout), 0o600))

		// A rerun of a done shard, while shard 1 has not run: no bare
		// "next:", the next step is the job's.
		r = bttl(t, addr, "", args(0)...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.NotRegexp(t, `(?m)^next:`, r.stdout)
		assert.Contains(t, r.stdout, "shard 0/2 is done; once every shard is (bttl migrate merge of the shards' -json reports says so), next: only once bttl migrate exits 0")

		// The job's result needs every shard.
		r = bttl(t, addr, "", "migrate", "merge", report(0))
		assert.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stderr, "missing the report of shard(s) 1/2")

		r = bttl(t, addr, "", args(1, "-json", "-metrics-out", filepath.Join(dir, "shard1.prom"))...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		require.NoError(t, os.WriteFile(report(1), []byte(r.stdout), 0o600))
		prom, err := os.ReadFile(filepath.Join(dir, "shard1.prom"))
		require.NoError(t, err)
		assert.Contains(t, string(prom), `bttl_migrate_cells{family="f",outcome="moved",shard="1/2",table="legacy",target="f"} 750`)

		out := filepath.Join(dir, "job.prom")
		r = bttl(t, addr, "", "migrate", "merge", "-metrics-out", out, report(1), report(0))
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, fmt.Sprintf("%d cell(s) moved to their new timestamp by the job", len(model)))
		assert.Contains(t, r.stdout, "the job is done: every shard left nothing to move. next: only once bttl migrate exits 0")
		prom, err = os.ReadFile(out)
		require.NoError(t, err)
		assert.Contains(t, string(prom), fmt.Sprintf(`bttl_migrate_cells{family="f",outcome="moved",shard="all",table="legacy",target="f"} %d`, len(model)))
		assert.Contains(t, string(prom), `bttl_migrate_complete{family="f",shard="all",table="legacy",target="f"} 1`)

		r = bttl(t, addr, "", "migrate", "merge", "-json", report(0), report(1))
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		var res migrate.JobResult
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
		assert.True(t, res.Complete)
		assert.Equal(t, int64(len(model)), res.Total.MovedByJob())

		// A shard run with another TTL is another job.
		b, err := os.ReadFile(report(1))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(report(1), []byte(strings.Replace(string(b), "ttl=720h0m0s", "ttl=1440h0m0s", 1)), 0o600))
		r = bttl(t, addr, "", "migrate", "merge", report(0), report(1))
		assert.Equal(t, exitFindings, r.code)
		assert.Contains(t, r.stderr, "reports of two jobs")

		r = bttl(t, addr, "", "migrate", "merge", filepath.Join(dir, "ckpt0"))
		assert.Equal(t, exitError, r.code, "a checkpoint is not a report: %s", r.stderr)
		assert.Contains(t, r.stderr, "not a bttl migrate -json report")
	})
}

// A second run of a migration with another -ttl was accepted (a bigtable://
// checkpoint keys its row by the job, so it started afresh); it is refused,
// naming the earlier TTL, unless -allow-ttl-change (issue 35 item 5).
func TestMigrateRefusesAnotherTTL(t *testing.T) {
	migrateServers(t, func(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string) {
		createLegacy(t, ac)
		now := time.Now().Add(-time.Second)
		loadRealTimestamps(t, dc, "legacy", "f", 20, 2, now)
		schema := writeFile(t, "s.yaml", oneSecondSchema)
		args := func(ttl string) []string {
			return append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", ttl,
				"-checkpoint", "bigtable://bttl-state"}, switchedAt(now)...)
		}
		r := bttl(t, addr, "", args("30d")...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		r = bttl(t, addr, "", args("30d")...)
		require.Equal(t, exitOK, r.code, "the same TTL again: %s", r.stdout+r.stderr)

		before := storedFamily(t, dc, "legacy", "f")
		r = bttl(t, addr, "", args("60d")...)
		assert.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stderr, "other TTL rules")
		assert.Contains(t, r.stderr, "moved 40 cell(s) with TTL ttl=720h0m0s; this run's is ttl=1440h0m0s")
		assert.Contains(t, r.stderr, "-allow-ttl-change")
		assert.Equal(t, before, storedFamily(t, dc, "legacy", "f"))

		r = bttl(t, addr, "", append(args("60d"), "-allow-ttl-change")...)
		assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	})
}

// Every ambiguous cell is in -json (not capped by -examples), and bttl migrate
// resolve moves or deletes each, pinned; once all are resolved the run exits 0
// (issue 35 item 5).
func TestMigrateResolveAmbiguousCells(t *testing.T) {
	migrateServers(t, func(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string) {
		createLegacy(t, ac)
		ctx := context.Background()
		switched := time.Now().Add(-time.Second)
		m := bigtable.NewMutation()
		for i := 0; i < 4; i++ {
			m.Set("f", fmt.Sprintf("c%d", i), bigtable.Time(switched.Add(-time.Duration(i+1)*time.Minute)).TruncateToMilliseconds(), []byte("which writer?"))
		}
		require.NoError(t, dc.Open("legacy").Apply(ctx, "r\xff", m))
		schema := writeFile(t, "s.yaml", oneSecondSchema)
		at := switched.UTC().Format(time.RFC3339Nano)
		args := []string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d",
			"-first-switch", switched.Add(-time.Hour).UTC().Format(time.RFC3339Nano), "-written-before", at, "-clock-skew", "500ms", "-examples", "1"}
		r := bttl(t, addr, "", append(args, "-json")...)
		require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
		var sr migrate.ShardReport
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &sr))
		require.Len(t, sr.Ambiguous, 4, "every one, whatever -examples")
		assert.True(t, sr.Ambiguous[0].Quoted, "a row key that is not UTF-8 is quoted")
		assert.Equal(t, strconv.Quote("r\xff"), sr.Ambiguous[0].Row)

		resolve := func(c migrate.ReportCell, how ...string) result {
			return bttl(t, addr, "", append([]string{"migrate", "resolve", "-table", "legacy", "-family", c.Family, "-row", c.Row,
				"-column", c.Column, "-timestamp", strconv.FormatInt(c.Timestamp, 10)}, how...)...)
		}
		r = resolve(sr.Ambiguous[0], "-ttl", "30d", "-dry-run")
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "dry run: would move to")
		r = resolve(sr.Ambiguous[0], "-ttl", "30d")
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		r = resolve(sr.Ambiguous[0], "-delete")
		assert.Equal(t, exitFindings, r.code, "moved already: nothing there")
		assert.Contains(t, r.stderr, "no such cell")
		for _, c := range sr.Ambiguous[1:] {
			r = resolve(c, "-delete")
			require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		}
		got := storedFamily(t, dc, "legacy", "f")
		ts := bigtable.Timestamp(sr.Ambiguous[0].Timestamp) + bigtable.Timestamp(30*24*time.Hour/time.Microsecond)
		assert.Equal(t, map[cellKey]string{{"r\xff", "c0", ts}: "which writer?"}, got)

		r = bttl(t, addr, "", args...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)

		r = bttl(t, addr, "", "migrate", "resolve", "-table", "legacy", "-family", "f", "-row", "r", "-timestamp", "x", "-delete")
		assert.Equal(t, exitError, r.code)
		assert.Contains(t, r.stderr, "-timestamp: want microseconds")
		r = bttl(t, addr, "", "migrate", "resolve", "-table", "legacy", "-family", "f", "-row", "r", "-timestamp", "1", "-delete", "-ttl", "1d")
		assert.Equal(t, exitError, r.code)
		assert.Contains(t, r.stderr, "give one of")
	})
}

// -check-copy lists the cell a deletion in the source left in the copy, exit
// 1, and writes nothing (issue 35 item 8 from the command line).
func TestMigrateCheckCopy(t *testing.T) {
	migrateServers(t, func(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string) {
		ctx := context.Background()
		require.NoError(t, ac.CreateTable(ctx, "clicks"))
		require.NoError(t, ac.CreateColumnFamily(ctx, "clicks", "f"))
		require.NoError(t, ac.CreateColumnFamily(ctx, "clicks", "g"))
		now := bigtable.Now().TruncateToMilliseconds()
		m := bigtable.NewMutation()
		m.Set("f", "a", now-1000, []byte("a"))
		m.Set("f", "b", now-2000, []byte("b"))
		require.NoError(t, dc.Open("clicks").Apply(ctx, "r1", m))
		schema := writeFile(t, "s.yaml", "tables: {clicks: {f: {strategy: default-expiry, ttl: 48h}, g: {strategy: default-expiry, ttl: 24h}}}\n")
		args := []string{"-schema", schema, "migrate", "-table", "clicks", "-family", "f", "-from", "default-expiry:48h", "-to-family", "g"}
		r := bttl(t, addr, "", args...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		r = bttl(t, addr, "", append(args, "-check-copy")...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "2 target cell(s), 2 the copy of a stored source cell")

		del := bigtable.NewMutation()
		del.DeleteTimestampRange("f", "a", now-1000, now)
		require.NoError(t, dc.Open("clicks").Apply(ctx, "r1", del))
		before := storedFamily(t, dc, "clicks", "g")
		r = bttl(t, addr, "", append(args, "-check-copy")...)
		assert.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
		assert.Regexp(t, regexp.MustCompile(`only in target: row "r1", column "a", timestamp \d+`), r.stdout)
		assert.Contains(t, r.stderr, `1 cell(s) of family "g" are not the copy of a stored source cell`)
		assert.Equal(t, before, storedFamily(t, dc, "clicks", "g"), "the check writes nothing")

		r = bttl(t, addr, "", "-schema", schema, "migrate", "-table", "clicks", "-family", "f", "-from", "default-expiry:48h", "-check-copy")
		assert.Equal(t, exitError, r.code)
		assert.Contains(t, r.stderr, "-check-copy checks a copy: give -to-family")
	})
}

// Shards of a job runner write their reports to Bigtable (-report
// bigtable://T/JOB), and merge reads them there: a shard not run yet is
// missing (exit 1), a table that holds no report exits 2.
func TestMigrateReportsInBigtable(t *testing.T) {
	migrateServers(t, func(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string) {
		createLegacy(t, ac)
		now := time.Now().Add(-time.Second)
		model := loadRealTimestamps(t, dc, "legacy", "f", 100, 3, now)
		schema := writeFile(t, "s.yaml", oneSecondSchema)
		keys := writeFile(t, "keys", "row0000050\n")
		run := func(i int) result {
			return bttl(t, addr, "", append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d",
				"-shard", fmt.Sprintf("%d/2", i), "-shard-keys", keys, "-checkpoint", "bigtable://bttl-state", "-report", "bigtable://bttl-state/job1"},
				switchedAt(now)...)...)
		}
		r := bttl(t, addr, "", "migrate", "merge", "bigtable://bttl-state/job1")
		assert.Equal(t, exitError, r.code, "no table holds the job's reports: %s", r.stdout+r.stderr)
		assert.Contains(t, r.stderr, "not found")

		require.Equal(t, exitOK, run(0).code)
		r = bttl(t, addr, "", "migrate", "merge", "bigtable://bttl-state/job1")
		assert.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stderr, "missing the report of shard(s) 1/2")

		require.Equal(t, exitOK, run(1).code)
		r = bttl(t, addr, "", "migrate", "merge", "-json", "bigtable://bttl-state/job1")
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		var res migrate.JobResult
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
		assert.True(t, res.Complete)
		assert.Equal(t, int64(len(model)), res.Total.MovedByJob())
	})
}

// A -metrics-out in a directory that does not exist is refused before
// anything is read (found after the scan, it lost the run's figures).
func TestMigrateMetricsOutCheckedFirst(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "missing", "m.prom")
	r := runRaw(context.Background(), "-schema", writeFile(t, "s.yaml", oneSecondSchema), "migrate", "-table", "legacy", "-family", "f", "-from", "real",
		"-ttl", "30d", "-first-switch", "2026-01-01T00:00:00Z", "-written-before", "2026-01-01T00:00:00Z", "-metrics-out", bad)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "directory")
	assert.Contains(t, r.stderr, "does not exist")
	r = runRaw(context.Background(), "migrate", "merge", "-metrics-out", bad, "x.json")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "does not exist")
}

// Without a checkpoint, the -report table records earlier runs too: a
// job of another -ttl on the same migration is refused.
func TestMigrateRefusesAnotherTTLFromReports(t *testing.T) {
	ac, dc, addr := newServer(t)
	createLegacy(t, ac)
	now := time.Now().Add(-time.Second)
	loadRealTimestamps(t, dc, "legacy", "f", 10, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	args := func(ttl, job string) []string {
		return append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", ttl,
			"-report", "bigtable://bttl-state/" + job}, switchedAt(now)...)
	}
	r := bttl(t, addr, "", args("30d", "first")...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	r = bttl(t, addr, "", args("60d", "second")...)
	assert.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "bigtable://bttl-state/migrate/first/0/1")
	assert.Contains(t, r.stderr, "moved 20 cell(s) with TTL ttl=720h0m0s")
	r = bttl(t, addr, "", append(args("60d", "second"), "-allow-ttl-change")...)
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
}

// An ambiguous cell whose key is not UTF-8 comes Go-quoted in the report;
// the text output prints it through keytext like any other key, so a long
// one is cut with its length (it was printed whole, uncut, before).
func TestJobResultPrintsReportKeysThroughKeytext(t *testing.T) {
	long := strings.Repeat("k", 100) + "\xff"
	res := &migrate.JobResult{Ambiguous: []migrate.ReportCell{
		{Row: strconv.Quote(long), Column: strconv.Quote("c\xff"), Quoted: true, Timestamp: 1000, Time: "1970-01-01T00:00:00.001Z"},
		{Row: "plain", Column: "c", Timestamp: 2000, Time: "1970-01-01T00:00:00.002Z"},
	}}
	var out bytes.Buffer
	writeJobResult(&env{stdout: &out}, res)
	assert.Contains(t, out.String(), "  ambiguous: row "+keytext.Quote(long)+`, column "c\xff", timestamp 1000`)
	assert.Contains(t, out.String(), `...(101 bytes)`)
	assert.Contains(t, out.String(), `  ambiguous: row "plain", column "c", timestamp 2000`)
}

// A dry run writes nothing, its report included: given the job's flags
// as they are (-report bigtable://T/JOB), it wrote a dry-run report into
// the job's rows (whole table: shard 0/1; one index: over that shard's
// real report), and the job's merge then refused for ever ("shard 0/1's
// report is of a dry run and shard 0/4's of a real run"; found by
// TestMigrateJobTrial).
func TestMigrateDryRunLeavesTheJobsReports(t *testing.T) {
	ac, dc, addr := newServer(t)
	createLegacy(t, ac)
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dc, "legacy", "f", 40, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	keys := writeFile(t, "keys", "row0000020\n")
	run := func(extra ...string) result {
		return bttl(t, addr, "", append(append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d",
			"-shard-keys", keys, "-checkpoint", "bigtable://bttl-state", "-report", "bigtable://bttl-state/job1"}, switchedAt(now)...), extra...)...)
	}
	for i := 0; i < 2; i++ {
		r := run("-shard", fmt.Sprintf("%d/2", i))
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	}
	for _, dry := range [][]string{{"-dry-run", "-shard-count", "2"}, {"-dry-run", "-shard", "0/2"}} {
		r := run(dry...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stderr, "a dry run writes no report", "%v", dry)
		r = bttl(t, addr, "", "migrate", "merge", "-json", "bigtable://bttl-state/job1")
		require.Equal(t, exitOK, r.code, "the job's merge after a dry run %v: %s", dry, r.stdout+r.stderr)
		var res migrate.JobResult
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
		assert.False(t, res.DryRun)
		assert.True(t, res.Complete)
		assert.Equal(t, int64(len(model)), res.Total.MovedByJob(), "the job's reports, as its real runs wrote them")
	}
}

// A job's reports in Bigtable describe the table as it was: after a
// restore from a backup taken before the job (the table deleted,
// re-created and its cells written back), migrate merge of the job said
// "the job is done ... next: bttl apply" with every cell unmoved (found
// by TestMigrateJobTrial). A report carries its ranges' witnesses (the
// last cell moved in each); merge refuses a report whose witness is gone,
// naming the shard to rerun, and merges again once it has run.
func TestMigrateMergeRefusesReportsOfARestoredTable(t *testing.T) {
	ac, dc, addr := newServer(t)
	createLegacy(t, ac)
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dc, "legacy", "f", 40, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	keys := writeFile(t, "keys", "row0000020\n")
	run := func(i int) result {
		return bttl(t, addr, "", append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d",
			"-shard", fmt.Sprintf("%d/2", i), "-shard-keys", keys, "-checkpoint", "bigtable://bttl-state", "-report", "bigtable://bttl-state/job1"},
			switchedAt(now)...)...)
	}
	for i := 0; i < 2; i++ {
		require.Equal(t, exitOK, run(i).code)
	}
	r := bttl(t, addr, "", "migrate", "merge", "bigtable://bttl-state/job1")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)

	ctx := context.Background()
	require.NoError(t, ac.DeleteTable(ctx, "legacy"))
	createLegacy(t, ac)
	writeBack(t, dc, "legacy", "f", model)
	r = bttl(t, addr, "", "migrate", "merge", "bigtable://bttl-state/job1")
	assert.Equal(t, exitFindings, r.code, "the restored table's cells are unmoved: %s", r.stdout+r.stderr)
	assert.NotContains(t, r.stdout, "the job is done")
	assert.Contains(t, r.stderr, "bigtable://bttl-state/migrate/job1/0/2: the report no longer describes table \"legacy\"")
	assert.Contains(t, r.stderr, "rerun shard 0/2")

	for i := 0; i < 2; i++ {
		require.Equal(t, exitOK, run(i).code)
	}
	r = bttl(t, addr, "", "migrate", "merge", "-json", "bigtable://bttl-state/job1")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	var res migrate.JobResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.True(t, res.Complete)
	assert.Equal(t, int64(len(model)), res.Total.MovedByJob(), "the reruns moved what the restore brought back")
}

// Merge of reports given as files read no table: after a restore it said
// "the job is done ... next: bttl apply" with every restored cell
// unmoved, as merge of bigtable:// reports did before it checked
// witnesses. A file report carrying witnesses is checked the same way
// (merge then connects, as for bigtable:// sources).
func TestMigrateMergeOfFilesRefusesReportsOfARestoredTable(t *testing.T) {
	ac, dc, addr := newServer(t)
	createLegacy(t, ac)
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dc, "legacy", "f", 40, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	keys := writeFile(t, "keys", "row0000020\n")
	dir := t.TempDir()
	report := func(i int) string { return filepath.Join(dir, fmt.Sprintf("shard%d.json", i)) }
	run := func(i int) {
		r := bttl(t, addr, "", append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d", "-json",
			"-shard", fmt.Sprintf("%d/2", i), "-shard-keys", keys, "-checkpoint", filepath.Join(dir, fmt.Sprintf("ckpt%d", i))},
			switchedAt(now)...)...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		require.NoError(t, os.WriteFile(report(i), []byte(r.stdout), 0o600))
	}
	for i := 0; i < 2; i++ {
		run(i)
	}
	r := bttl(t, addr, "", "migrate", "merge", report(0), report(1))
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)

	ctx := context.Background()
	require.NoError(t, ac.DeleteTable(ctx, "legacy"))
	createLegacy(t, ac)
	writeBack(t, dc, "legacy", "f", model)
	r = bttl(t, addr, "", "migrate", "merge", report(0), report(1))
	assert.Equal(t, exitFindings, r.code, "the restored table's cells are unmoved: %s", r.stdout+r.stderr)
	assert.NotContains(t, r.stdout, "the job is done")
	assert.Contains(t, r.stderr, report(0)+": the report no longer describes table \"legacy\"")
	assert.Contains(t, r.stderr, "rerun shard 0/2")

	// Without an instance to check them against, file reports with
	// witnesses are not merged on trust.
	t.Setenv("HOME", t.TempDir()) // no .cbtrc
	r = runRaw(ctx, "migrate", "merge", report(0), report(1))
	assert.Equal(t, exitError, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "-project and -instance are required")
	assert.NotContains(t, r.stdout, "the job is done")
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)

	for i := 0; i < 2; i++ {
		run(i)
	}
	r = bttl(t, addr, "", "migrate", "merge", "-json", report(0), report(1))
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	var res migrate.JobResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.True(t, res.Complete)
	assert.Equal(t, int64(len(model)), res.Total.MovedByJob(), "the reruns moved what the restore brought back")
}
