package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	migrate "github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/internal/promtest"
)

// writeBack writes cells (family fam) into table with their timestamps,
// as a restore from a backup gives them back.
func writeBack(t *testing.T, dc *bigtable.Client, table, fam string, cells map[cellKey]string) {
	t.Helper()
	byRow := map[string]*bigtable.Mutation{}
	for k, v := range cells {
		m := byRow[k.row]
		if m == nil {
			m = bigtable.NewMutation()
			byRow[k.row] = m
		}
		m.Set(fam, k.col, k.ts, []byte(v))
	}
	rows := make([]string, 0, len(byRow))
	for r := range byRow {
		rows = append(rows, r)
	}
	sort.Strings(rows)
	for lo := 0; lo < len(rows); lo += 1000 {
		keys := rows[lo:min(lo+1000, len(rows))]
		muts := make([]*bigtable.Mutation, len(keys))
		for i, r := range keys {
			muts[i] = byRow[r]
		}
		errs, err := dc.Open(table).ApplyBulk(context.Background(), keys, muts)
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
	}
}

// liveWriter is a writer switched to bttl, running beside the migration
// on a plain client: it deletes legacy columns (every version in them)
// and writes cells stamped at their expiry instant (now + a TTL of 1 h to
// 10 days, as a one-second bttl writer stamps them), into legacy columns
// and new ones. want is the family as the writer leaves it, starting from
// every legacy cell migrated: its operations apply in its order whatever
// the migration does meanwhile (a migrated cell never lands on a writer's
// cell: they land 20 to 30 days out).
type liveWriter struct {
	dc   *bigtable.Client
	rng  *rand.Rand
	rows []string
	want map[cellKey]string
	ops  struct{ deletes, writes int }
}

func (w *liveWriter) run(t *testing.T, stop <-chan struct{}) {
	ctx := context.Background()
	tbl := w.dc.Open("events")
	tick := time.NewTicker(2 * time.Millisecond) // a steady load, not a race to the emulator
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		row := w.rows[w.rng.IntN(len(w.rows))]
		m := bigtable.NewMutation()
		if w.rng.IntN(10) < 4 {
			col := fmt.Sprintf("c%02d", w.rng.IntN(10))
			m.DeleteCellsInColumn("clicks", col)
			if err := tbl.Apply(ctx, row, m); err != nil {
				t.Errorf("live writer: %v", err)
				return
			}
			for k := range w.want {
				if k.row == row && k.col == col {
					delete(w.want, k)
				}
			}
			w.ops.deletes++
			continue
		}
		col := fmt.Sprintf("c%02d", w.rng.IntN(10))
		if w.rng.IntN(2) == 0 {
			col = fmt.Sprintf("w%02d", w.rng.IntN(3))
		}
		ttl := time.Hour + time.Duration(w.rng.Int64N(int64(10*24*time.Hour)))
		ts := bigtable.Time(time.Now().Add(ttl)).TruncateToMilliseconds()
		v := fmt.Sprintf("live %d", i)
		m.Set("clicks", col, ts, []byte(v))
		if err := tbl.Apply(ctx, row, m); err != nil {
			t.Errorf("live writer: %v", err)
			return
		}
		w.want[cellKey{row, col, ts}] = v
		w.ops.writes++
	}
}

var movedLine = regexp.MustCompile(`(\d+) cell\(s\) moved to their new timestamp`)

// movedCount is the count a migrate run printed as moved (0 for none).
func movedCount(t *testing.T, stdout string) int {
	t.Helper()
	m := movedLine.FindStringSubmatch(stdout)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// The trial an SRE ran, as one test on cbtemulator. The family starts on its
// legacy GC rule (max age 60d) with cells 8 days and more old; the schema says
// one-second. Before the job, an unsharded dry run with the job's flags counts
// the cells to move. The example Kubernetes migrate job, 4 shards
// (JOB_COMPLETION_INDEX) with Bigtable-held checkpoints and reports (-report
// bigtable://T/JOB), runs as processes of the built binary beside a live
// writer that deletes and writes; two workers, chosen by the seed, are
// SIGKILLed mid-run (bttl migrate merge of the job then refuses, naming a
// killed shard, whose report is missing) and restarted in fresh directories.
// Every worker exits 0 (a cell the writer deleted leaves nothing to do), and
// migrate merge says the job is done (after rerunning a shard it names, where
// the writer deleted the last cell moved in a range), its figures bounded by
// the dry run's and the writer's: exact figures cannot hold here, a worker
// killed mid-range records nothing for it and the writer deletes cells before
// their move. A plain-client read then finds the family exactly as expected:
// every legacy cell moved once unless the writer deleted its column, every
// writer's cell as written, nothing lost, revived or left unmoved
// (issue 35, Acceptance).
//
// Then the table is "restored" from a snapshot taken before the job
// (deleted, re-created on its legacy rule, its cells written back with
// their timestamps): merge of the job now refuses (its reports describe
// the table as it was). There, mid-job (the job has its cells to move
// again) and before bttl apply, the example audit job (4 shards, -report
// bigtable://, then audit merge -metrics-out) measures the family, and a
// real Prometheus (the prometheus binary through internal/promtest, not
// promtool) scrapes the merged file with the repo's alert rules: the
// firing alerts are exactly the rule mismatch, BttlOneSecondRealTimestamps.
// BttlExpiredStockOverAWeek stays silent, which the same cells counted as
// expired stock would fire (they are over a week old); BttlGCLagOverAWeek
// too, though its input (the client's shadow reads) is not in an audit,
// so its silence here proves little. The same job then runs again: it
// reads again the ranges whose moves are gone and moves what came back;
// its merged result is exactly what an unsharded dry run made before it
// counts, and the family is every snapshot cell moved once.
func TestMigrateJobTrial(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 35))
	const shards = 4
	promBin := promtest.Tool(t, "prometheus")
	args, _ := kubernetesArgs(t, "kubernetes-migrate.yaml")
	auditArgs, _ := kubernetesArgs(t, "kubernetes-audit.yaml")
	addr := startCBTEmulator(t)
	ac, dc := clientsWithTable(t, addr, "events", "clicks")
	ctx := context.Background()
	legacyRule := bigtable.MaxAgePolicy(60 * 24 * time.Hour)
	require.NoError(t, ac.SetGCPolicy(ctx, "events", "clicks", legacyRule))
	bin := buildBttl(t)
	now := time.Now()
	switched := now.Add(-10 * time.Second)
	// Legacy cells 8 days old and more: read as one-second cells they
	// would have expired over a week ago (what the expired-stock alert
	// fires on); moved by 30 days they land 22 days out or more, past
	// every writer's cell.
	model := loadHashedReal(t, []*bigtable.Client{dc}, "events", "clicks", jobCells(t)/10, now.Add(-8*24*time.Hour))
	snapshot := storedFamily(t, dc, "events", "clicks") // the backup, taken before the job
	require.Equal(t, model, snapshot)
	rows := rowsOf(model)

	schema := writeFile(t, "schema.yaml", "tables: {events: {clicks: {strategy: one-second}}}\n")
	at := switched.UTC().Format(time.RFC3339Nano)
	for name, v := range map[string]string{"project": "p", "instance": "i", "schema": schema, "first-switch": at, "written-before": at,
		"shard-count": strconv.Itoa(shards)} {
		args = withFlag(t, args, name, v)
	}
	job := flagValue(t, args, "report") // bigtable://bttl_checkpoints/migrate-events-clicks
	env := func(i int) []string { return runnerEnv(addr, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i)) }

	// The unsharded dry run before the job, with the job's flags as they
	// are, on a machine with no job runner (issue 35, 4): the cells to
	// move.
	dry := dryRunReport(t, bin, args, addr)
	require.EqualValues(t, len(model), dry.Total.Moved, "the dry run counts every legacy cell: %+v", dry.Total)
	require.EqualValues(t, len(rows), dry.Total.Rows)

	// The job, a live writer, two kills. The dry run's checkpoint rows
	// (its job is marked a dry run) are not the job's progress.
	dryRows := map[string]bool{}
	require.NoError(t, dc.Open("bttl_checkpoints").ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		dryRows[r.Key()] = true
		return true
	}, bigtable.RowFilter(bigtable.StripValueFilter())))
	lw := &liveWriter{dc: dc, rng: rand.New(rand.NewPCG(seed, 1)), rows: rows, want: shiftedModel(model, 30*24*time.Hour)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); lw.run(t, stop) }()
	// Throttled as an SRE throttles a job beside live traffic: each
	// shard takes about 4 s, so its key ranges finish at different times
	// and a kill lands mid-run.
	throttled := append(append([]string(nil), args...), "-cells-per-second", strconv.Itoa(max(len(model)/shards/4, 100)))
	start := time.Now()
	workers := make([]*worker, shards)
	for i := range workers {
		workers[i] = startWorker(t, bin, throttled, env(i))
	}
	// Each victim is killed as soon as its checkpoint row records a
	// finished key range that moved something (so the restart resumes
	// it; both watched at once: a shard of the default size takes a few
	// seconds).
	victims := rng.Perm(shards)[:2]
	killed := map[int]bool{}
	for deadline := time.Now().Add(time.Minute); len(killed) < len(victims) && time.Now().Before(deadline); {
		for _, v := range victims {
			if killed[v] {
				continue
			}
			witnessed, done, all := shardRangesDoneExcept(t, dc, "bttl_checkpoints", fmt.Sprintf("%d/%d", v, shards), dryRows)
			if witnessed == 0 {
				continue
			}
			require.NoError(t, workers[v].cmd.Process.Signal(syscall.SIGKILL))
			_ = workers[v].wait()
			killed[v] = true
			require.Less(t, done, all, "worker %d was killed mid-run (raise BTTL_JOBS_CELLS if it finished first)", v)
			t.Logf("worker %d killed with %d of %d key ranges recorded", v, done, all)
		}
		time.Sleep(5 * time.Millisecond) // polling other processes' progress
	}
	require.Len(t, killed, len(victims), "both victims recorded progress within a minute")
	// The other shards finish; the killed workers' report rows are
	// claimed, never written: the job has no result, and merge names the
	// first shard without a report.
	for i, w := range workers {
		if !killed[i] {
			require.Equal(t, exitOK, w.wait(), "worker %d: %s%s", i, w.stdout.String(), w.stderr.String())
		}
	}
	r := execBttl(t, bin, addr, "migrate", "merge", job)
	assert.Equal(t, exitFindings, r.code, "merge while shards %v have no report: %s%s", victims, r.stdout, r.stderr)
	assert.Contains(t, r.stderr, fmt.Sprintf("migrate/migrate-events-clicks/%d/4: no report yet", min(victims[0], victims[1])))
	for _, v := range victims {
		workers[v] = startWorker(t, bin, throttled, env(v))
	}
	for _, v := range victims {
		w := workers[v]
		require.Equal(t, exitOK, w.wait(), "restarted worker %d: %s%s", v, w.stdout.String(), w.stderr.String())
		// It resumed from the Bigtable checkpoint, or (the writer deleted
		// the range's witness meanwhile) read it there and reads again.
		assert.Regexp(t, `resumed from bigtable://bttl_checkpoints: [1-9]\d* of \d+ key range|read again: [1-9]\d* key range\(s\) bigtable://bttl_checkpoints records finished no longer hold`,
			workers[v].stdout.String(), "restarted worker %d resumed", v)
	}
	close(stop)
	wg.Wait()
	t.Logf("4 shards, 2 killed and restarted, beside %d deletes and %d writes: %s", lw.ops.deletes, lw.ops.writes, time.Since(start))
	require.Positive(t, lw.ops.deletes+lw.ops.writes, "the writer ran during the job")
	stored := storedFamily(t, dc, "events", "clicks")
	assert.Equal(t, lw.want, stored, "nothing lost, revived, doubled or left unmoved")

	// The job's merged result: done, nothing left or refused. Every
	// legacy cell still stored (moved once, asserted above) was counted
	// moved or, moved by a worker killed mid-range, on the target; every
	// counted cell is a legacy cell or a writer's. Where the writer
	// deleted the last cell a shard moved in a key range (its witness),
	// merge cannot tell that from a restore and asks for the shard to be
	// rerun: the operator's step, taken here (the rerun reads that range
	// again and moves nothing).
	for i := 0; i < shards; i++ {
		r := execBttl(t, bin, addr, "migrate", "merge", job)
		m := regexp.MustCompile(`no longer stored .*; rerun shard (\d)/4 `).FindStringSubmatch(r.stderr)
		if r.code == exitOK || m == nil {
			break
		}
		t.Logf("merge asks for a rerun (the writer deleted a witness): %s", strings.TrimSpace(r.stderr))
		v, _ := strconv.Atoi(m[1])
		w := startWorker(t, bin, throttled, env(v))
		require.Equal(t, exitOK, w.wait(), "rerun of shard %d: %s%s", v, w.stdout.String(), w.stderr.String())
		assert.Zero(t, movedCount(t, w.stdout.String()), "the rerun has nothing to move")
	}
	res := mergeJob(t, bin, addr, job)
	survivors := 0
	for k := range model {
		if _, ok := stored[cellKey{k.row, k.col, k.ts + bigtable.Timestamp(30*24*time.Hour/time.Microsecond)}]; ok {
			survivors++
		}
	}
	first := res.Total
	assert.EqualValues(t, dry.Total.Rows, first.Rows, "every row read once (the writer removes columns, never a whole row: %d deletes)", lw.ops.deletes)
	assert.LessOrEqual(t, first.MovedByJob(), dry.Total.Moved, "the job moves at most what the dry run counted: %+v", first)
	assert.GreaterOrEqual(t, first.MovedByJob()+first.OnTarget, int64(survivors), "every legacy cell still stored is counted moved or on the target: %+v", first)
	assert.LessOrEqual(t, first.MovedByJob()+first.OnTarget, dry.Total.Moved+int64(lw.ops.writes), "nothing counted twice: %+v", first)
	assert.Zero(t, first.Unmoved()+first.ExpiredLeft+first.DeletedByJob(), "nothing left, refused or deleted: %+v", first)
	t.Logf("first job's result: %d moved by the job, %d on the target; the dry run counted %d to move, %d still stored after the writer", first.MovedByJob(), first.OnTarget, dry.Total.Moved, survivors)

	// The restore.
	require.NoError(t, ac.DeleteTable(ctx, "events"))
	require.NoError(t, ac.CreateTable(ctx, "events"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "events", "clicks"))
	require.NoError(t, ac.SetGCPolicy(ctx, "events", "clicks", legacyRule))
	writeBack(t, dc, "events", "clicks", snapshot)
	// The first run's reports describe the table as it was: the job's
	// result is refused (it said "the job is done ... next: bttl apply"
	// with every restored cell unmoved).
	r = execBttl(t, bin, addr, "migrate", "merge", job)
	assert.Equal(t, exitFindings, r.code, "merge after the restore: %s%s", r.stdout, r.stderr)
	assert.Regexp(t, `migrate-events-clicks/\d/4: the report no longer describes table "events"`, r.stderr)
	assert.NotContains(t, r.stdout, "the job is done")

	// Mid-job, before bttl apply: the audit job and its alerts.
	auditAlerts(t, bin, promBin, addr, auditArgs, schema, len(snapshot))

	// The same job again, after an unsharded dry run with its flags.
	dry = dryRunReport(t, bin, args, addr)
	require.EqualValues(t, len(snapshot), dry.Total.Moved, "the unsharded dry run counts every restored cell")
	start = time.Now()
	for i := range workers {
		workers[i] = startWorker(t, bin, args, env(i))
	}
	for i, w := range workers {
		require.Equal(t, exitOK, w.wait(), "worker %d after the restore: %s%s", i, w.stdout.String(), w.stderr.String())
		assert.Regexp(t, `read again: [1-9]\d* key range\(s\) bigtable://bttl_checkpoints records finished no longer hold the last cell moved there`, w.stdout.String())
		assert.NotContains(t, w.stdout.String(), "nothing to migrate", "worker %d", i)
	}
	t.Logf("the job again after the restore: %s", time.Since(start))
	res = mergeJob(t, bin, addr, job)
	assert.Equal(t, migrate.Counts{Rows: dry.Total.Rows, Cells: dry.Total.Cells, Moved: dry.Total.Moved}, res.Total,
		"the job's merged result is the unsharded dry run's: every restored cell moved by this run, once")
	assert.Equal(t, shiftedModel(snapshot, 30*24*time.Hour), storedFamily(t, dc, "events", "clicks"), "what the restore brought back is moved, each cell once")
}

// rowsOf is the sorted row keys of model.
func rowsOf(model map[cellKey]string) []string {
	seen := map[string]bool{}
	var rows []string
	for k := range model {
		if !seen[k.row] {
			seen[k.row] = true
			rows = append(rows, k.row)
		}
	}
	sort.Strings(rows)
	return rows
}

// dryRunReport runs the job's args with -dry-run -json without a task
// index (the whole table) and returns its report.
func dryRunReport(t *testing.T, bin string, args []string, addr string) *migrate.ShardReport {
	t.Helper()
	w := startWorker(t, bin, append(args, "-dry-run", "-json"), runnerEnv(addr))
	require.Equal(t, exitOK, w.wait(), w.stderr.String())
	assert.Contains(t, w.stderr.String(), "the whole table: -shard-count 4 without a task index")
	var rep migrate.ShardReport
	require.NoError(t, json.Unmarshal(w.stdout.Bytes(), &rep), w.stdout.String())
	require.True(t, rep.DryRun)
	require.True(t, rep.Complete, "%+v", rep.Total)
	return &rep
}

// mergeJob is bttl migrate merge -json of job's reports: the job is done.
func mergeJob(t *testing.T, bin, addr, job string) *migrate.JobResult {
	t.Helper()
	r := execBttl(t, bin, addr, "migrate", "merge", "-json", job)
	require.Equal(t, exitOK, r.code, "merge of the job: %s%s", r.stdout, r.stderr)
	var res migrate.JobResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	require.True(t, res.Complete, "%+v", res)
	require.Equal(t, 4, res.Shards)
	require.False(t, res.DryRun, "the job's result is of its real runs")
	require.Empty(t, res.Ambiguous)
	return &res
}

// auditAlerts runs the example audit job (sharded, -report bigtable://,
// audit merge -metrics-out) on table events, whose family clicks (schema
// one-second, GC rule still max age 60d) holds legacy cells with real
// timestamps, and serves the merged file to a real Prometheus
// with the repo's alert rules: exactly the rule-mismatch alert fires.
func auditAlerts(t *testing.T, bin, promBin, addr string, args []string, schema string, legacy int) {
	t.Helper()
	start := time.Now()
	now := start.UTC()
	args = withFlag(t, args, "project", "p")
	args = withFlag(t, args, "instance", "i")
	args = withFlag(t, args, "schema", schema)
	args = withFlag(t, args, "now", now.Format(time.RFC3339Nano))
	args = withFlag(t, args, "report", "bigtable://bttl_checkpoints/events-"+now.Format("20060102T150405.000000000Z"))
	args = withFlag(t, args, "shard-count", "4")
	auditors := make([]*worker, 4)
	for i := range auditors {
		auditors[i] = startWorker(t, bin, args, runnerEnv(addr, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i)))
	}
	for i, w := range auditors {
		// Exit 1: the shard's findings (cells not on their rule).
		require.Contains(t, []int{exitOK, exitFindings}, w.wait(), "audit shard %d: %s%s", i, w.stdout.String(), w.stderr.String())
	}
	file := filepath.Join(t.TempDir(), "bttl.prom")
	r := execBttl(t, bin, addr, "audit", "merge", "-metrics-out", file, flagValue(t, args, "report"))
	require.Contains(t, []int{exitOK, exitFindings}, r.code, "audit merge: %s%s", r.stdout, r.stderr)
	prom := readFileString(t, file)
	for _, want := range []string{
		fmt.Sprintf(`bttl_audit_one_second_at_or_before_now_cells{family="clicks",strategy="one-second",table="events"} %d`, legacy),
		fmt.Sprintf(`bttl_audit_not_on_rule_cells{family="clicks",strategy="one-second",table="events"} %d`, legacy),
		`bttl_audit_expired_not_collected_cells{family="clicks",strategy="one-second",table="events"} 0`,
		`bttl_audit_gc_rule_mismatch{family="clicks",strategy="one-second",table="events"} 1`,
		`bttl_audit_gc_rule_missing{family="clicks",strategy="one-second",table="events"} 0`,
	} {
		assert.Contains(t, prom, want+"\n", "the merged audit's gauges")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	})
	mux.HandleFunc("/audit", func(w http.ResponseWriter, _ *http.Request) {
		// What node_exporter's textfile collector would serve.
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(prom))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	const rules = "../../metrics/alerts/bttl-rules.yaml"
	p := promtest.Start(t, promBin, rules, ln.Addr().String())
	firing := func() []string {
		out := []string{}
		for _, a := range p.Alerts(t) {
			out = append(out, a.Labels["alertname"]+" "+a.Labels["table"]+"/"+a.Labels["family"]+" "+a.State)
		}
		sort.Strings(out)
		return out
	}
	want := []string{"BttlOneSecondRealTimestamps events/clicks firing"}
	var got []string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); { // generous: 2 cores in CI
		if got = firing(); len(got) > 0 {
			break
		}
		time.Sleep(250 * time.Millisecond) // polling Prometheus, not waiting for a clock
	}
	// Every rule is evaluated on the same scrape of the audit file: once
	// one fires, any other would too. Checked over a few more evaluations
	// (1s apart) all the same.
	p.WaitRulesEvaluated(t, strings.Count(readFileString(t, rules), "\n      - alert: "))
	for i := 0; i < 3; i++ {
		require.Equal(t, want, firing(), "alerts with the family not on its rule, full of legacy cells (first seen: %v)", got)
		time.Sleep(time.Second) // one evaluation interval: polling Prometheus
	}
	t.Logf("audit job, merge and Prometheus: %s", time.Since(start))
}
