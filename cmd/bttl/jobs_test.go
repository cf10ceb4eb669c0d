package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/bttl/bttl/bttest_harness/prodserver"
	migratepkg "github.com/bttl/bttl/internal/migratejob"
)

// The job examples in examples/jobs, as far as the test reads them.
type jobContainer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
}

// podFailurePolicy is a Job's spec.podFailurePolicy (batch/v1).
type podFailurePolicy struct {
	Rules []struct {
		Action      string `yaml:"action"`
		OnExitCodes *struct {
			ContainerName string `yaml:"containerName"`
			Operator      string `yaml:"operator"`
			Values        []int  `yaml:"values"`
		} `yaml:"onExitCodes"`
		OnPodConditions []struct {
			Type string `yaml:"type"`
		} `yaml:"onPodConditions"`
	} `yaml:"rules"`
}

// action is what the policy does with a pod that exited with code, or
// with condition set ("" for none): the first matching rule's action, or
// "Count" (the default: against the index's budget).
func (p podFailurePolicy) action(container string, code int, condition string) string {
	for _, r := range p.Rules {
		if e := r.OnExitCodes; e != nil && (e.ContainerName == "" || e.ContainerName == container) {
			in := slices.Contains(e.Values, code)
			if (e.Operator == "In") == in {
				return r.Action
			}
		}
		for _, c := range r.OnPodConditions {
			if c.Type == condition {
				return r.Action
			}
		}
	}
	return "Count"
}

type kubernetesJob struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       struct {
		CompletionMode       string           `yaml:"completionMode"`
		Completions          int              `yaml:"completions"`
		Parallelism          int              `yaml:"parallelism"`
		BackoffLimit         *int             `yaml:"backoffLimit"`
		BackoffLimitPerIndex int              `yaml:"backoffLimitPerIndex"`
		PodFailurePolicy     podFailurePolicy `yaml:"podFailurePolicy"`
		Template             struct {
			Spec struct {
				RestartPolicy string         `yaml:"restartPolicy"`
				Containers    []jobContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type cloudRunJob struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       struct {
		Template struct {
			Spec struct {
				TaskCount int `yaml:"taskCount"`
				Template  struct {
					Spec struct {
						Containers []jobContainer `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

const jobsDir = "../../examples/jobs"

// readJob reads a job example into j, checking its apiVersion and kind.
func readJob(t *testing.T, file, apiVersion string, j any, kind *string, version *string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(jobsDir, file))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, j), file)
	require.Equal(t, apiVersion, *version, file)
	require.Equal(t, "Job", *kind, file)
}

// kubernetesArgs reads an Indexed Job: bttl's args and the completions.
func kubernetesArgs(t *testing.T, file string) ([]string, int) {
	t.Helper()
	var j kubernetesJob
	readJob(t, file, "batch/v1", &j, &j.Kind, &j.APIVersion)
	require.Equal(t, "Indexed", j.Spec.CompletionMode, "%s: pods get JOB_COMPLETION_INDEX only in an Indexed Job", file)
	require.Len(t, j.Spec.Template.Spec.Containers, 1, file)
	c := j.Spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"bttl"}, c.Command, file)
	require.Contains(t, c.Args, fmt.Sprintf("-shard-count=%d", j.Spec.Completions), "%s: -shard-count is the Job's completions", file)
	return c.Args, j.Spec.Completions
}

// cloudRunArgs reads a Cloud Run job: bttl's args and the task count.
func cloudRunArgs(t *testing.T, file string) ([]string, int) {
	t.Helper()
	var j cloudRunJob
	readJob(t, file, "run.googleapis.com/v1", &j, &j.Kind, &j.APIVersion)
	cs := j.Spec.Template.Spec.Template.Spec.Containers
	require.Len(t, cs, 1, file)
	require.Equal(t, []string{"bttl"}, cs[0].Command, file)
	require.Positive(t, j.Spec.Template.Spec.TaskCount, file)
	return cs[0].Args, j.Spec.Template.Spec.TaskCount
}

// gcloudCreates reads the `gcloud run jobs create` commands of the
// README: per job name, its --args and --tasks.
func gcloudCreates(t *testing.T) map[string]struct {
	args  []string
	tasks int
} {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(jobsDir, "README.md"))
	require.NoError(t, err)
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	out := map[string]struct {
		args  []string
		tasks int
	}{}
	for _, m := range regexp.MustCompile(`gcloud run jobs create (\S+) ([^\n]*)`).FindAllStringSubmatch(text, -1) {
		tasks := regexp.MustCompile(`--tasks=(\d+)`).FindStringSubmatch(m[2])
		args := regexp.MustCompile(`--args=(\S+)`).FindStringSubmatch(m[2])
		require.NotNil(t, tasks, m[0])
		require.NotNil(t, args, m[0])
		n, _ := strconv.Atoi(tasks[1])
		out[m[1]] = struct {
			args  []string
			tasks int
		}{strings.Split(args[1], ","), n}
	}
	return out
}

// withFlag returns args with flag -name's value replaced: the values an
// operator fills in (project, schema path, instants).
func withFlag(t *testing.T, args []string, name, value string) []string {
	t.Helper()
	out := append([]string(nil), args...)
	for i, a := range out {
		if strings.HasPrefix(a, "-"+name+"=") {
			out[i] = "-" + name + "=" + value
			return out
		}
	}
	t.Fatalf("no -%s in %q", name, args)
	return nil
}

// flagValue returns the value of -name=V in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("no -%s in %q", name, args)
	return ""
}

func without(args []string, drop string) []string {
	var out []string
	for _, a := range args {
		if a != drop {
			out = append(out, a)
		}
	}
	return out
}

// runnerEnv is the environment of a worker: the test's, without any job
// runner's variables, plus the emulator and extra.
func runnerEnv(addr string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CLOUD_RUN_TASK_INDEX", "CLOUD_RUN_TASK_COUNT", "BATCH_TASK_INDEX", "BATCH_TASK_COUNT", "JOB_COMPLETION_INDEX", "BIGTABLE_EMULATOR_HOST":
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "BIGTABLE_EMULATOR_HOST="+addr), extra...)
}

// clientsWithTable returns clients on the server at addr (also made the
// test's BIGTABLE_EMULATOR_HOST) after creating table with family fam.
func clientsWithTable(t *testing.T, addr, table, fam string) (*bigtable.AdminClient, *bigtable.Client) {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	ctx := context.Background()
	ac, err := bigtable.NewAdminClient(ctx, "p", "i")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ac.Close() })
	dc, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dc.Close() })
	require.NoError(t, ac.CreateTable(ctx, table))
	require.NoError(t, ac.CreateColumnFamily(ctx, table, fam))
	return ac, dc
}

// worker is one bttl process of a job, in a working directory of its own.
type worker struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

func startWorker(t *testing.T, bin string, args, env []string) *worker {
	t.Helper()
	w := &worker{cmd: exec.Command(bin, args...)}
	w.cmd.Env, w.cmd.Dir = env, t.TempDir() // no local state carried over
	w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
	require.NoError(t, w.cmd.Start())
	return w
}

func (w *worker) wait() int {
	err := w.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// loadHashedReal writes rows rows of 10 cells of family fam with real
// timestamps (the last 10 days, whole milliseconds) under binary hashed
// keys, which the default even split spreads over the shards, into every
// client's table. It returns the model of what it wrote.
func loadHashedReal(t *testing.T, clients []*bigtable.Client, table, fam string, rows int, now time.Time) map[cellKey]string {
	t.Helper()
	ctx := context.Background()
	model := make(map[cellKey]string, rows*10)
	const batch = 1000
	for lo := 0; lo < rows; lo += batch {
		var keys []string
		var muts []*bigtable.Mutation
		for r := lo; r < min(lo+batch, rows); r++ {
			h := uint32(r) * 2654435761
			row := string([]byte{byte(h >> 24), byte(h >> 16), byte(h >> 8), byte(h)}) + fmt.Sprintf("#%07d", r)
			m := bigtable.NewMutation()
			for c := 0; c < 10; c++ {
				col := fmt.Sprintf("c%02d", c)
				ts := bigtable.Time(now.Add(-time.Duration(1+(r*10+c)%864_000) * time.Second)).TruncateToMilliseconds()
				v := fmt.Sprintf("%d/%s", r, col)
				m.Set(fam, col, ts, []byte(v))
				model[cellKey{row, col, ts}] = v
			}
			keys = append(keys, row)
			muts = append(muts, m)
		}
		for _, dc := range clients {
			errs, err := dc.Open(table).ApplyBulk(ctx, keys, muts)
			require.NoError(t, err)
			for _, e := range errs {
				require.NoError(t, e)
			}
		}
	}
	return model
}

// shardRangesDone reads the Bigtable checkpoint rows of shard (a key
// ending "#i/n"): ranges done and in all.
func shardRangesDone(t *testing.T, dc *bigtable.Client, table, shard string) (done, all int) {
	t.Helper()
	_, done, all = shardRangesDoneExcept(t, dc, table, shard, nil)
	return done, all
}

// shardRangesDoneExcept is shardRangesDone ignoring the rows of except
// (another job's, a dry run's); witnessed counts the ranges done whose
// result holds a migration's witness (the last cell moved there): a
// restarted migration skips those, and reads again one that moved
// nothing (an empty range finishes first).
func shardRangesDoneExcept(t *testing.T, dc *bigtable.Client, table, shard string, except map[string]bool) (witnessed, done, all int) {
	t.Helper()
	witnessed, done, all, err := readShardRanges(dc, table, shard, except)
	require.NoError(t, err)
	return witnessed, done, all
}

// readShardRanges is shardRangesDoneExcept's reading, safe off the test's
// goroutine: its error instead of a failed test.
func readShardRanges(dc *bigtable.Client, table, shard string, except map[string]bool) (witnessed, done, all int, err error) {
	err = dc.Open(table).ReadRows(context.Background(), bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		if !strings.HasSuffix(r.Key(), "#"+shard) || except[r.Key()] {
			return true
		}
		for _, it := range r["ck"] {
			if it.Column != "ck:record" {
				continue
			}
			var rec struct {
				Ranges []struct {
					Done   bool
					Result struct {
						Witness json.RawMessage `json:"witness"`
					} `json:"result"`
				} `json:"ranges"`
			}
			if json.Unmarshal(it.Value, &rec) == nil {
				all = len(rec.Ranges)
				for _, x := range rec.Ranges {
					if x.Done {
						done++
						if len(x.Result.Witness) > 0 {
							witnessed++
						}
					}
				}
			}
		}
		return true
	})
	if err != nil && strings.Contains(err.Error(), "not found") {
		err = nil // no checkpoint table yet
	}
	return witnessed, done, all, err
}

// killGate stops one worker of a sharded migrate job mid-run, whatever the
// machine's load: each worker talks to the emulator through its own
// production-rules server (prodserver, no rules in play), whose Config.Fault
// hook sees each of the worker's data calls before the emulator does. A
// worker's scan writes its checkpoint one record at a time; at a write to
// the checkpoint table, once the shard's record shows a range finished
// with a witness (a range that moved something, which the restart resumes)
// and not every range finished, the first such worker becomes the victim:
// that write and every later call of it wait (the hook holds its server)
// until the test killed it. So the victim is killed with done < all by
// construction, not by a race between polling and the worker's progress.
// (A shard cut into one range cannot be stopped mid-run: with three
// workers, each shard cut at the emulator's random sample points, one of
// them has several.)
type killGate struct {
	dc      *bigtable.Client
	table   string
	mu      sync.Mutex
	victim  int // -1 until chosen
	stopped chan int
	release chan struct{}
}

func newKillGate(dc *bigtable.Client, table string) *killGate {
	return &killGate{dc: dc, table: table, victim: -1, stopped: make(chan int, 1), release: make(chan struct{})}
}

// fault is the Config.Fault of worker i of n's server.
func (g *killGate) fault(i, n int) func(prodserver.Call) prodserver.Fault {
	shard := fmt.Sprintf("%d/%d", i, n)
	return func(c prodserver.Call) prodserver.Fault {
		g.mu.Lock()
		victim := g.victim
		g.mu.Unlock()
		switch {
		case victim == i:
			<-g.release
			return prodserver.FaultThrottle // to a killed client
		case victim >= 0 || !strings.HasSuffix(c.Table, "/tables/"+g.table):
			return prodserver.FaultNone
		case c.Method != "MutateRow" && c.Method != "CheckAndMutateRow" && c.Method != "MutateRows":
			return prodserver.FaultNone
		}
		// The worker writes its checkpoint one record at a time, each
		// applied before the next is sent: this reads every earlier one.
		witnessed, done, all, err := readShardRanges(g.dc, g.table, shard, nil)
		if err != nil || witnessed == 0 || done >= all {
			return prodserver.FaultNone
		}
		g.mu.Lock()
		if g.victim >= 0 {
			g.mu.Unlock()
			return prodserver.FaultNone
		}
		g.victim = i
		g.mu.Unlock()
		g.stopped <- i
		<-g.release
		return prodserver.FaultThrottle
	}
}

// jobCells is the size of the job run: 15,000 cells by default,
// BTTL_JOBS_CELLS (e.g. 1000000) for the long run.
func jobCells(t *testing.T) int {
	if s := os.Getenv("BTTL_JOBS_CELLS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "BTTL_JOBS_CELLS")
		return n
	}
	return 15_000
}

// The job examples are consistent: each Cloud Run job and its gcloud
// command run the Kubernetes Job's command, less -shard-count (Cloud Run
// gives the count), with as many tasks as completions.
func TestJobExamplesAgree(t *testing.T) {
	gc := gcloudCreates(t)
	for _, kind := range []string{"audit", "migrate"} {
		k, completions := kubernetesArgs(t, "kubernetes-"+kind+".yaml")
		c, tasks := cloudRunArgs(t, "cloudrun-"+kind+".yaml")
		assert.Equal(t, completions, tasks, kind)
		assert.Equal(t, without(k, fmt.Sprintf("-shard-count=%d", completions)), c, "%s: the Cloud Run job runs the Kubernetes Job's command", kind)
		g, ok := gc["bttl-"+kind+"-events"]
		require.True(t, ok, "README has the gcloud command for %s", kind)
		assert.Equal(t, c, g.args, "%s: gcloud --args are the YAML's", kind)
		assert.Equal(t, tasks, g.tasks, kind)
		// Stateless workers: progress, and the audit's reports, in the
		// instance, not in a local file or the logs.
		assert.True(t, strings.HasPrefix(flagValue(t, k, "checkpoint"), "bigtable://"), kind)
		if kind == "audit" {
			assert.True(t, strings.HasPrefix(flagValue(t, k, "report"), "bigtable://"), kind)
			assert.NotContains(t, k, "-json", "the reports go to the instance, not to the logs")
		}
	}
}

// The Indexed Jobs give each shard its own retry budget (backoffLimitPerIndex,
// so one shard's failures do not spend the others'), and their failure policy
// maps bttl's exit codes: 1 (a finding or refusal a retry would repeat) fails
// the index at once, 2 (a connection error) and a kill count against the
// budget, an eviction (SIGTERM, 143, with the DisruptionTarget condition) is
// free (issue 35, 4).
func TestJobManifestsRetryPerIndex(t *testing.T) {
	for _, kind := range []string{"audit", "migrate"} {
		var j kubernetesJob
		readJob(t, "kubernetes-"+kind+".yaml", "batch/v1", &j, &j.Kind, &j.APIVersion)
		s := j.Spec
		assert.Equal(t, "Indexed", s.CompletionMode, kind)
		assert.Equal(t, "Never", s.Template.Spec.RestartPolicy, "%s: podFailurePolicy needs restartPolicy Never", kind)
		assert.Positive(t, s.BackoffLimitPerIndex, kind)
		assert.Nil(t, s.BackoffLimit, "%s: a Job-wide budget would let one shard's failures spend the others'", kind)
		require.Len(t, s.Template.Spec.Containers, 1)
		c := s.Template.Spec.Containers[0].Name
		p := s.PodFailurePolicy
		assert.Equal(t, "FailIndex", p.action(c, exitFindings, ""), kind)
		assert.Equal(t, "Count", p.action(c, exitError, ""), kind)
		assert.Equal(t, "Count", p.action(c, 137, ""), "%s: SIGKILL, OOM", kind)
		assert.Equal(t, "Ignore", p.action(c, exitTerminated, "DisruptionTarget"), kind)
		assert.Equal(t, "Count", p.action(c, exitTerminated, ""), "%s: a SIGTERM without eviction (activeDeadlineSeconds)", kind)
		assert.Equal(t, "Count", p.action("sidecar", exitFindings, ""), "%s: another container's exit 1 is not bttl's", kind)
	}
}

// Acceptance 4 of issue 29: the example jobs' commands, run as three
// local worker processes of the built binary with the runners' task-index
// variables and checkpoints in cbtemulator: the migrate job's worker 1 is
// SIGKILLed mid-run and restarted in a fresh working directory; the table
// then equals what one uninterrupted process makes of the same data (on a
// second emulator) and the model (every cell at its timestamp + 30 days);
// the audit job's three reports merge to the single-process audit.
func TestShardedJobsOnEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	migrateArgs, n := kubernetesArgs(t, "kubernetes-migrate.yaml")
	auditArgs, tasks := cloudRunArgs(t, "cloudrun-audit.yaml")

	addrA, addrB := startCBTEmulator(t), startCBTEmulator(t)
	_, dcA := clientsWithTable(t, addrA, "events", "clicks")
	_, dcB := clientsWithTable(t, addrB, "events", "clicks")
	bin := buildBttl(t)
	now := time.Now()
	cells := jobCells(t)
	start := time.Now()
	// Every writer switched to bttl 10 s ago (more than migrate's default
	// clock skew, 5 s); the legacy cells are older than the first switch.
	switched := now.Add(-10 * time.Second)
	model := loadHashedReal(t, []*bigtable.Client{dcA, dcB}, "events", "clicks", cells/10, now.Add(-time.Minute))
	t.Logf("loaded %d cells on both emulators in %s", len(model), time.Since(start))

	schema := writeFile(t, "schema.yaml", "tables: {events: {clicks: {strategy: one-second}}}\n")
	fill := func(args []string) []string {
		args = withFlag(t, args, "project", "p")
		args = withFlag(t, args, "instance", "i")
		return withFlag(t, args, "schema", schema)
	}
	migrate := withFlag(t, withFlag(t, fill(migrateArgs), "first-switch", switched.UTC().Format(time.RFC3339Nano)), "written-before", switched.UTC().Format(time.RFC3339Nano))

	// The migrate job: n workers at once, JOB_COMPLETION_INDEX as
	// Kubernetes sets it; one is stopped (killGate) once its checkpoint
	// row shows a range finished and others not, killed, and started
	// again elsewhere.
	start = time.Now()
	gate := newKillGate(dcA, "bttl_checkpoints")
	workers := make([]*worker, n)
	for i := range workers {
		front := prodserver.New(t, prodserver.Config{Clusters: []prodserver.Cluster{{ID: "c", Addr: addrA}}, Fault: gate.fault(i, n)})
		workers[i] = startWorker(t, bin, migrate, runnerEnv(front.Addr, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i)))
	}
	var v int
	select {
	case v = <-gate.stopped:
	case <-time.After(5 * time.Minute):
		close(gate.release)
		require.FailNow(t, "no migrate worker was stopped mid-run within 5 minutes")
	}
	require.NoError(t, workers[v].cmd.Process.Signal(syscall.SIGKILL))
	_ = workers[v].wait()
	close(gate.release)
	victim := fmt.Sprintf("%d/%d", v, n)
	witnessed, done, all := shardRangesDoneExcept(t, dcA, "bttl_checkpoints", victim, nil)
	require.Positive(t, witnessed, "worker %d recorded a range that moved something before the kill", v)
	require.Less(t, done, all, "worker %d was killed mid-run", v)
	t.Logf("worker %d killed with %d of %d key ranges recorded", v, done, all)
	restarted := startWorker(t, bin, migrate, runnerEnv(addrA, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", v)))
	final := slices.Clone(workers)
	final[v] = restarted
	for i, w := range final {
		require.Equal(t, exitOK, w.wait(), "migrate worker %d: %s%s", i, w.stdout.String(), w.stderr.String())
		assert.Contains(t, w.stderr.String(), fmt.Sprintf("shard %d/%d (JOB_COMPLETION_INDEX=%d, -shard-count %d)", i, n, i, n), "the header says where the shard came from")
		assert.NotContains(t, w.stderr.String(), "warning", "hashed keys: an even split")
	}
	assert.Regexp(t, `resumed from bigtable://bttl_checkpoints: [1-9]\d* of \d+ key range`, restarted.stdout.String(), "the restart resumed from the emulator's checkpoint")
	t.Logf("%d migrate workers (one killed and restarted): %s", n, time.Since(start))

	start = time.Now()
	single := startWorker(t, bin, without(migrate, fmt.Sprintf("-shard-count=%d", n)), runnerEnv(addrB)) // one process: no shard
	require.Equal(t, exitOK, single.wait(), single.stdout.String()+single.stderr.String())
	t.Logf("one uninterrupted migrate process: %s", time.Since(start))
	got := storedFamily(t, dcA, "events", "clicks")
	assert.Equal(t, storedFamily(t, dcB, "events", "clicks"), got, "sharded, killed and resumed = one uninterrupted run")
	assert.Equal(t, shiftedModel(model, 30*24*time.Hour), got, "every cell at its timestamp + 30 days, none lost or doubled")
	// The job's result, from the shards' reports in the emulator: done,
	// and every cell counted once, moved by the job or (moved by the
	// killed worker in a range it did not finish) found on the target.
	jobReport := execBttl(t, bin, addrA, "migrate", "merge", "-json", flagValue(t, migrate, "report"))
	require.Equal(t, exitOK, jobReport.code, jobReport.stderr)
	var job migratepkg.JobResult
	require.NoError(t, json.Unmarshal([]byte(jobReport.stdout), &job))
	assert.True(t, job.Complete)
	assert.EqualValues(t, len(model), job.Total.MovedByJob()+job.Total.OnTarget, "%+v", job.Total)
	t.Logf("job result: %d moved by the job, %d found on the target", job.Total.MovedByJob(), job.Total.OnTarget)

	// The audit job: tasks workers with Cloud Run's variables, each in a
	// fresh directory, writing its report to the emulator (-report); the
	// job's reports, merged from there, are the single-process audit.
	auditCmd := withFlag(t, fill(auditArgs), "now", now.UTC().Format(time.RFC3339Nano))
	report := flagValue(t, auditCmd, "report")
	reports := make([]*worker, tasks)
	for i := range reports {
		reports[i] = startWorker(t, bin, auditCmd, runnerEnv(addrA, fmt.Sprintf("CLOUD_RUN_TASK_INDEX=%d", i), fmt.Sprintf("CLOUD_RUN_TASK_COUNT=%d", tasks)))
	}
	for i, w := range reports {
		require.Equal(t, exitOK, w.wait(), "audit task %d: %s", i, w.stderr.String())
	}
	// The job's reports feed the merge's gauges (issue 35, 4: they need the
	// shards' -bytes, which the examples give).
	prom := filepath.Join(t.TempDir(), "bttl.prom")
	merged := execBttl(t, bin, addrA, "audit", "merge", "-json", "-metrics-out", prom, report)
	require.Equal(t, exitOK, merged.code, merged.stderr)
	assert.Contains(t, readFileString(t, prom), "bttl_audit_", "the merged job's gauges are written")
	// bttl checkpoint list shows the job's reports beside the checkpoints.
	_, reportJob, _ := strings.Cut(strings.TrimPrefix(report, "bigtable://"), "/")
	listed := execBttl(t, bin, addrA, "checkpoint", "list", "-json", "-report", reportJob, "bigtable://bttl_checkpoints")
	require.Equal(t, exitOK, listed.code, listed.stderr)
	var rows []stateRow
	require.NoError(t, json.Unmarshal([]byte(listed.stdout), &rows))
	require.Len(t, rows, tasks)
	for i, r := range rows {
		assert.Equal(t, "report", r.Kind)
		assert.Equal(t, fmt.Sprintf("%d/%d", i, tasks), r.Shard)
		assert.JSONEq(t, strconv.Quote(reportJob), string(r.Job))
	}
	one := startWorker(t, bin, append(without(auditCmd, "-report="+report), "-json"), runnerEnv(addrA))
	require.Equal(t, exitOK, one.wait(), one.stderr.String())
	var m, s auditOutput
	require.NoError(t, json.Unmarshal([]byte(merged.stdout), &m))
	require.NoError(t, json.Unmarshal(one.stdout.Bytes(), &s))
	assert.Equal(t, s.Tables, m.Tables, "merged shard reports = single-process report")
	assert.Equal(t, s.Findings, m.Findings)
	require.Len(t, s.Tables, 1)
	assert.EqualValues(t, len(model), s.Tables[0].Cells)
}
