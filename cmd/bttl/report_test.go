package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// Audit -report bigtable://T/JOB writes each shard's report to a row of T
// (created when missing), and audit merge bigtable://T/JOB merges them with
// the same checks as files: the merge of a job's shards is the single audit; a
// missing shard, a shard claimed but not written, a report in another shard's
// row, a forged shard index and a -bytes mix are refused (exit 1); a job with
// no report is exit 2. On both servers (issue 29).
func TestAuditReportsInBigtable(t *testing.T) {
	for _, srv := range []string{"bttest", "cbtemulator"} {
		t.Run(srv, func(t *testing.T) {
			ac, dc, addr := serverClients(t, srv)
			loadHashedClicks(t, ac, dc, 40)
			testAuditReportsInBigtable(t, ac, dc, addr)
		})
	}
}

func testAuditReportsInBigtable(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string) {
	ctx := context.Background()
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	const t0 = "2026-01-02T15:04:05Z"
	audit := func(args ...string) result {
		r := bttl(t, addr, "", append([]string{"-schema", schema, "audit", "-now", t0}, args...)...)
		require.Equal(t, exitOK, r.code, "%q: %s", args, r.stderr)
		return r
	}
	merge := func(args ...string) result {
		return bttl(t, addr, "", append([]string{"audit", "merge"}, args...)...)
	}
	var whole auditOutput
	require.NoError(t, json.Unmarshal([]byte(audit("-json").stdout), &whole))

	// Two shards write their reports to a table the first one creates; the
	// printed output is unchanged (here: the text table).
	r := audit("-shard", "0/2", "-report", "bigtable://bttl_reports/job1")
	assert.Contains(t, r.stdout, "table \"events\" at 2026-01-02T15:04:05.000000Z")
	audit("-shard", "1/2", "-report", "bigtable://bttl_reports/job1")
	r = merge("-json", "bigtable://bttl_reports/job1")
	require.Equal(t, exitOK, r.code, r.stderr)
	var merged auditOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &merged))
	assert.Equal(t, whole.Tables, merged.Tables, "the job's merged shards = the single audit")
	assert.True(t, merged.NoBytes)

	// The row holds what -json prints.
	recs, err := scan.ReadBigtableRecords(ctx, dc, "bttl_reports", "audit/job1/")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	var row auditOutput
	require.NoError(t, json.Unmarshal(recs["audit/job1/1/2"], &row))
	require.Len(t, row.Tables, 1)
	assert.Equal(t, &scan.Shard{Index: 1, Count: 2}, row.Tables[0].Shard)

	// A job's name is its own: another job in the same table does not mix in.
	audit("-report", "bigtable://bttl_reports/job1-single")
	r = merge("-json", "bigtable://bttl_reports/job1-single")
	require.Equal(t, exitOK, r.code, r.stderr)

	refused := func(want string, args ...string) {
		t.Helper()
		r := merge(args...)
		assert.Equal(t, exitFindings, r.code, "%q: %s", args, r.stderr)
		assert.Contains(t, r.stderr, want, "%q", args)
		assert.True(t, strings.HasPrefix(r.stderr, "bttl audit merge: "), r.stderr)
		assert.Empty(t, r.stdout, "%q", args)
	}
	audit("-shard", "0/2", "-report", "bigtable://bttl_reports/job2")
	refused("missing shard(s) 1/2", "bigtable://bttl_reports/job2")

	audit("-shard", "0/2", "-report", "bigtable://bttl_reports/job3")
	audit("-shard", "1/2", "-bytes", "-report", "bigtable://bttl_reports/job3")
	refused("one audit read values (-bytes) and the other did not", "bigtable://bttl_reports/job3")

	// A shard whose audit claimed its row and has not written it yet.
	audit("-shard", "0/2", "-report", "bigtable://bttl_reports/job4")
	st, err := scan.NewBigtableStore(ctx, dc, ac, "bttl_reports", "audit/job4/1/2")
	require.NoError(t, err)
	_, err = st.Open(ctx)
	require.NoError(t, err)
	refused("bigtable://bttl_reports/job4, shard 1/2: no report yet", "bigtable://bttl_reports/job4")
	// Once written, the job merges.
	require.NoError(t, st.Save(ctx, recs["audit/job1/1/2"]))
	r = merge("bigtable://bttl_reports/job4")
	assert.Equal(t, exitOK, r.code, r.stderr)

	// Rows written by hand: shard 1/2's report in shard 0/2's row, and a
	// shard 7/2 that no scan makes, in its own row.
	forge := func(key string, rec []byte) {
		st, err := scan.NewBigtableStore(ctx, dc, ac, "bttl_reports", key)
		require.NoError(t, err)
		_, err = st.Open(ctx)
		require.NoError(t, err)
		require.NoError(t, st.Save(ctx, rec))
	}
	forge("audit/job5/0/2", recs["audit/job1/1/2"])
	forge("audit/job5/1/2", recs["audit/job1/1/2"])
	refused("holds a report of shard 1/2 of table \"events\": not where bttl audit writes it", "bigtable://bttl_reports/job5")
	var seven map[string]any
	require.NoError(t, json.Unmarshal(recs["audit/job1/1/2"], &seven))
	seven["tables"].([]any)[0].(map[string]any)["shard"] = map[string]any{"index": 7, "count": 2}
	b, err := json.Marshal(seven)
	require.NoError(t, err)
	forge("audit/job6/0/2", recs["audit/job1/0/2"])
	forge("audit/job6/1/2", recs["audit/job1/1/2"])
	forge("audit/job6/7/2", b)
	refused("a report of shard 7/2, which no scan makes", "bigtable://bttl_reports/job6")

	// Files and a job mix: the job's shards and a file of one of them are
	// two reports of that shard.
	f := writeFile(t, "s1.json", string(recs["audit/job1/1/2"]))
	refused("two reports of shard 1/2", "bigtable://bttl_reports/job1", f)

	// No report at all, or no such table: exit 2, as a missing file.
	for _, src := range []string{"bigtable://bttl_reports/nosuch", "bigtable://nosuchtable/job1"} {
		r := merge(src)
		assert.Equal(t, exitError, r.code, "%s: %s", src, r.stderr)
		assert.Contains(t, r.stderr, "bttl audit merge: ", src)
	}
	assert.Contains(t, merge("bigtable://bttl_reports/nosuch").stderr, `no reports of job "nosuch" in table "bttl_reports"`)
}

// -report and audit merge bigtable:// are checked before any RPC: a
// malformed destination, -report without -now or with -limit, merge of a
// table without -project.
func TestAuditReportUsageErrors(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1")
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	g := []string{"-project", "p", "-instance", "i", "-schema", schema}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(g, "audit", "-now", "2026-01-02T15:04:05Z", "-report", "bigtable://t"), "-report"},
		{append(g, "audit", "-now", "2026-01-02T15:04:05Z", "-report", "reports.json"), "-report"},
		{append(g, "audit", "-now", "2026-01-02T15:04:05Z", "-report", "bigtable://t/a#b"), "-report"},
		{append(g, "audit", "-report", "bigtable://t/job"), "-report needs -now"},
		{append(g, "audit", "-now", "2026-01-02T15:04:05Z", "-limit", "5", "-report", "bigtable://t/job"), "excludes -limit"},
		{[]string{"audit", "merge", "bigtable://t"}, "want bigtable://TABLE/JOB"},
		{[]string{"audit", "merge", "bigtable://t/job"}, "-project and -instance are required"},
		{[]string{"audit", "merge"}, "give the shards' reports"},
	} {
		r := runRaw(context.Background(), c.args...)
		assert.Equal(t, exitError, r.code, "%q: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, "%q", c.args)
		assert.Empty(t, r.stdout, "%q", c.args)
	}
}

// Two workers on one shard: the later one's claim wins; the earlier one,
// still scanning (held back by -cells-per-second), may not write its
// report when it finishes (exit 2), so the row holds the later report.
func TestAuditReportEarlierClaimIsRefused(t *testing.T) {
	ac, dc, addr := newServer(t)
	loadHashedClicks(t, ac, dc, 40)
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	args := []string{"-project", "p", "-instance", "i", "-schema", schema, "audit", "-now", "2026-01-02T15:04:05Z", "-report", "bigtable://bttl_reports/job"}
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	ctx := context.Background()
	slow := make(chan result, 1)
	go func() {
		var out, errb strings.Builder
		code := run(ctx, append(args, "-cells-per-second", "10"), strings.NewReader(""), &out, &errb)
		slow <- result{code, out.String(), errb.String()}
	}()
	// Wait for the slow worker's claim (its row, with no report yet).
	for {
		recs, err := scan.ReadBigtableRecords(ctx, dc, "bttl_reports", "audit/job/")
		if err == nil && len(recs) == 1 {
			require.Nil(t, recs["audit/job/0/1"], "claimed, not written")
			break
		}
		select {
		case r := <-slow:
			t.Fatalf("the slow worker ended before its claim was seen: %d %s", r.code, r.stderr)
		case <-time.After(5 * time.Millisecond): // polling another worker's progress
		}
	}
	fast := bttl(t, addr, "", args[4:]...)
	require.Equal(t, exitOK, fast.code, fast.stderr)
	r := <-slow
	assert.Equal(t, exitError, r.code, r.stderr)
	assert.Contains(t, r.stderr, "bttl audit: -report: ")
	assert.Contains(t, r.stderr, "another run claimed this shard since this one started")
	recs, err := scan.ReadBigtableRecords(ctx, dc, "bttl_reports", "audit/job/")
	require.NoError(t, err)
	assert.NotNil(t, recs["audit/job/0/1"], "the later worker's report is kept")
}

// A shard audited again into the same job: from its claim on, the row's
// earlier report is gone, so while the new audit runs (or after it
// stopped without writing) the job does not merge with the earlier report
// in the new one's place. Fails before the fix: the claim left the earlier
// report readable and the job merged.
func TestAuditReportRerunHidesEarlierReport(t *testing.T) {
	ac, dc, addr := newServer(t)
	loadHashedClicks(t, ac, dc, 40)
	ctx := context.Background()
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	for _, sh := range []string{"0/2", "1/2"} {
		r := bttl(t, addr, "", "-schema", schema, "audit", "-now", "2026-01-02T15:04:05Z", "-shard", sh, "-report", "bigtable://bttl_reports/job")
		require.Equal(t, exitOK, r.code, r.stderr)
	}
	r := bttl(t, addr, "", "audit", "merge", "bigtable://bttl_reports/job")
	require.Equal(t, exitOK, r.code, r.stderr)

	// Shard 1/2 audited again, held (reportClaimed) once it has claimed
	// its row and hidden the earlier report, until it is stopped (its
	// context cancelled) before its scan. The test waited for the owner
	// cell to change and held the audit with -cells-per-second before:
	// the claim changed the owner one write before the earlier report
	// was hidden, so a merge in between read that report and exited 0;
	// it failed so under load (the two are one write now,
	// TestAuditReportClaimHidesEarlierReportAtOnce).
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	var out, errb strings.Builder
	done := make(chan int, 1)
	claimed := make(chan struct{})
	reportClaimed = func(ctx context.Context) {
		close(claimed)
		<-ctx.Done()
	}
	t.Cleanup(func() { reportClaimed = nil })
	go func() {
		done <- run(cctx, []string{"-project", "p", "-instance", "i", "-schema", schema, "audit", "-now", "2026-01-02T15:04:05Z",
			"-shard", "1/2", "-report", "bigtable://bttl_reports/job"}, strings.NewReader(""), &out, &errb)
	}()
	select {
	case <-claimed:
	case code := <-done:
		t.Fatalf("the second audit ended before its claim: %d %s", code, errb.String())
	}
	r = bttl(t, addr, "", "audit", "merge", "bigtable://bttl_reports/job")
	assert.Equal(t, exitFindings, r.code, "merged while shard 1/2 is audited again: %s", r.stdout)
	assert.Contains(t, r.stderr, "bigtable://bttl_reports/job, shard 1/2: no report yet")
	assert.NotContains(t, r.stderr, "/audit/", "no internal row key (issue 35 item 6)")
	cancel()
	assert.NotEqual(t, exitOK, <-done, errb.String())
	r = bttl(t, addr, "", "audit", "merge", "bigtable://bttl_reports/job")
	assert.Equal(t, exitFindings, r.code, "merged after shard 1/2's second audit stopped: %s", r.stdout)
}

// audit -now past 2262 audits at that instant: every cell of a 48h family
// written now is expired then. Fails before the fix: -now went through
// time.Time.UnixNano, which wrapped it to 1715, when every cell was live.
func TestAuditNowPastNanosecondRange(t *testing.T) {
	ac, dc, addr := newServer(t)
	loadHashedClicks(t, ac, dc, 3)
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	r := bttl(t, addr, "", "-schema", schema, "audit", "-json", "-now", "2300-01-02T03:04:05Z")
	require.Contains(t, []int{exitOK, exitFindings}, r.code, r.stderr)
	var out auditOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Tables, 1)
	assert.Equal(t, bigtable.Timestamp(time.Date(2300, 1, 2, 3, 4, 5, 0, time.UTC).UnixMicro()), out.Tables[0].Now)
	require.Len(t, out.Tables[0].Families, 1)
	assert.Equal(t, int64(3), out.Tables[0].Families[0].Expired)
}
