package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// Issue 35, Acceptance: the trial an SRE ran, as a test on cbtemulator.
// The example Kubernetes migrate job, 4 shards (JOB_COMPLETION_INDEX)
// with Bigtable-held checkpoints, run as processes of the built binary
// beside a live writer that deletes and writes; two workers, chosen by
// the seed, are SIGKILLed mid-run and restarted in fresh directories.
// Every worker exits 0 (a cell the writer deleted leaves nothing to do).
// A plain-client read then finds the family exactly as expected: every
// legacy cell moved once unless the writer deleted its column, every
// writer's cell as written, nothing lost, revived or left unmoved. Then
// the table is "restored" from a snapshot taken before the job (deleted,
// re-created, its cells written back with their timestamps) and the same
// job runs again: it reads again the ranges whose moves are gone and moves
// what came back, as many cells as an unsharded dry run counts; the
// family is then every snapshot cell moved once.
func TestMigrateJobTrial(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 35))
	const shards = 4
	args, _ := kubernetesArgs(t, "kubernetes-migrate.yaml")
	addr := startCBTEmulator(t)
	ac, dc := clientsWithTable(t, addr, "events", "clicks")
	bin := buildBttl(t)
	now := time.Now()
	switched := now.Add(-10 * time.Second)
	model := loadHashedReal(t, []*bigtable.Client{dc}, "events", "clicks", jobCells(t)/10, now.Add(-time.Minute))
	snapshot := storedFamily(t, dc, "events", "clicks") // the backup, taken before the job
	require.Equal(t, model, snapshot)

	schema := writeFile(t, "schema.yaml", "tables: {events: {clicks: {strategy: one-second}}}\n")
	at := switched.UTC().Format(time.RFC3339Nano)
	for name, v := range map[string]string{"project": "p", "instance": "i", "schema": schema, "first-switch": at, "written-before": at,
		"shard-count": strconv.Itoa(shards)} {
		args = withFlag(t, args, name, v)
	}
	env := func(i int) []string { return runnerEnv(addr, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i)) }

	// The job, a live writer, two kills.
	var rows []string
	seen := map[string]bool{}
	for k := range model {
		if !seen[k.row] {
			seen[k.row] = true
			rows = append(rows, k.row)
		}
	}
	sort.Strings(rows)
	lw := &liveWriter{dc: dc, rng: rand.New(rand.NewPCG(seed, 1)), rows: rows, want: shiftedModel(model, 30*24*time.Hour)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); lw.run(t, stop) }()
	start := time.Now()
	workers := make([]*worker, shards)
	for i := range workers {
		workers[i] = startWorker(t, bin, args, env(i))
	}
	victims := rng.Perm(shards)[:2]
	for _, v := range victims {
		shard := fmt.Sprintf("%d/%d", v, shards)
		var done, all int
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			if done, all = shardRangesDone(t, dc, "bttl_checkpoints", shard); done > 0 {
				break
			}
			time.Sleep(5 * time.Millisecond) // polling another process's progress
		}
		require.NoError(t, workers[v].cmd.Process.Signal(syscall.SIGKILL))
		_ = workers[v].wait()
		require.Positive(t, done, "worker %d recorded progress before the kill", v)
		require.Less(t, done, all, "worker %d was killed mid-run (raise BTTL_JOBS_CELLS if it finished first)", v)
		t.Logf("worker %d killed with %d of %d key ranges recorded", v, done, all)
		workers[v] = startWorker(t, bin, args, env(v))
	}
	for i, w := range workers {
		require.Equal(t, exitOK, w.wait(), "worker %d: %s%s", i, w.stdout.String(), w.stderr.String())
	}
	for _, v := range victims {
		assert.Regexp(t, `resumed from bigtable://bttl_checkpoints: [1-9]\d* of \d+ key range`, workers[v].stdout.String(), "restarted worker %d resumed", v)
	}
	close(stop)
	wg.Wait()
	t.Logf("4 shards, 2 killed and restarted, beside %d deletes and %d writes: %s", lw.ops.deletes, lw.ops.writes, time.Since(start))
	require.Positive(t, lw.ops.deletes+lw.ops.writes, "the writer ran during the job")
	assert.Equal(t, lw.want, storedFamily(t, dc, "events", "clicks"), "nothing lost, revived, doubled or left unmoved")

	// The restore, then the same job again.
	ctx := context.Background()
	require.NoError(t, ac.DeleteTable(ctx, "events"))
	require.NoError(t, ac.CreateTable(ctx, "events"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "events", "clicks"))
	writeBack(t, dc, "events", "clicks", snapshot)
	// The whole-table dry run takes the job's flags as they are, on a
	// machine with no job runner (issue 35, 4).
	dry := startWorker(t, bin, append(args, "-dry-run"), runnerEnv(addr))
	require.Equal(t, exitOK, dry.wait(), dry.stderr.String())
	assert.Contains(t, dry.stderr.String(), "the whole table: -shard-count 4 without a task index")
	m := regexp.MustCompile(`(\d+) cell\(s\) would be moved`).FindStringSubmatch(dry.stdout.String())
	require.NotNil(t, m, dry.stdout.String())
	assert.Equal(t, strconv.Itoa(len(snapshot)), m[1], "the unsharded dry run counts every restored cell")
	start = time.Now()
	moved := 0
	for i := range workers {
		workers[i] = startWorker(t, bin, args, env(i))
	}
	for i, w := range workers {
		require.Equal(t, exitOK, w.wait(), "worker %d after the restore: %s%s", i, w.stdout.String(), w.stderr.String())
		assert.Regexp(t, `read again: [1-9]\d* key range\(s\) bigtable://bttl_checkpoints records finished no longer hold the last cell moved there`, w.stdout.String())
		assert.NotContains(t, w.stdout.String(), "nothing to migrate", "worker %d", i)
		moved += movedCount(t, w.stdout.String())
	}
	t.Logf("the job again after the restore: %d cells moved in %s", moved, time.Since(start))
	assert.Equal(t, m[1], strconv.Itoa(moved), "the job moves what the unsharded dry run counted")
	assert.Equal(t, shiftedModel(snapshot, 30*24*time.Hour), storedFamily(t, dc, "events", "clicks"), "what the restore brought back is moved, each cell once")
}
