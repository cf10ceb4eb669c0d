package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// startAudit runs the built binary's audit with args against addr and
// returns once a progress line shows at least minDone key ranges done.
func startAudit(t *testing.T, bin, addr string, minDone int, args ...string) (*exec.Cmd, *bufio.Scanner, *bytes.Buffer, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-project", "p", "-instance", "i"}, args...)...)
	cmd.Env = runnerEnv(addr)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := progressRanges.FindStringSubmatch(sc.Text()); m != nil {
			if done, _ := strconv.Atoi(m[2]); done >= minDone && m[2] != m[3] {
				return cmd, sc, &stdout, sc.Text()
			}
		}
	}
	t.Fatalf("the audit ended before %d key ranges were done", minDone)
	return nil, nil, nil, ""
}

// exitOf waits for cmd (draining sc) and returns its exit status and the
// rest of stderr.
func exitOf(t *testing.T, cmd *exec.Cmd, sc *bufio.Scanner) (int, []string) {
	t.Helper()
	var rest []string
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "scanned ") {
			rest = append(rest, sc.Text())
		}
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if err == nil {
		return 0, rest
	}
	require.ErrorAs(t, err, &ee)
	return ee.ExitCode(), rest
}

// Acceptance 5 of issue 29: the emulator killed during an audit makes it
// exit 2 within the stall interval plus 10 s, naming the endpoint.
func TestAuditOnKilledEmulatorExitsWithinStall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	em := startCBTEmulatorProcess(t)
	_, dc := clientsWithTable(t, em.Addr, "big", "clicks")
	bin := buildBttl(t)
	loadCells(t, dc, "big", "clicks", 2000, 50, bigtable.Now().TruncateToMilliseconds())
	schema := writeFile(t, "s.yaml", "tables: {big: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")

	const stall = 2 * time.Second
	cmd, sc, stdout, line := startAudit(t, bin, em.Addr, 1, "-schema", schema, "audit", "-progress", "10ms", "-stall", stall.String(), "-cells-per-second", "20000")
	killed := time.Now()
	em.Kill()
	code, rest := exitOf(t, cmd, sc)
	took := time.Since(killed)
	t.Logf("exited %d, %s after the emulator was killed (progress then: %s): %q", code, took, line, rest)
	assert.Equal(t, exitError, code)
	assert.Less(t, took, stall+10*time.Second)
	require.Len(t, rest, 1, "one message")
	assert.Contains(t, rest[0], em.Addr, "names the endpoint")
	assert.Contains(t, rest[0], "-stall")
	assert.Empty(t, stdout.String(), "no report")
}

// SIGTERM stops an audit as Ctrl-C does: exit 143 with a message, the
// key ranges finished recorded in the checkpoint, and a rerun resumes to
// the uninterrupted report.
func TestSIGTERMRecordsCheckpointAndExits143(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	addr := startCBTEmulator(t)
	_, dc := clientsWithTable(t, addr, "big", "clicks")
	bin := buildBttl(t)
	loadCells(t, dc, "big", "clicks", 2000, 50, bigtable.Now().TruncateToMilliseconds())
	schema := writeFile(t, "s.yaml", "tables: {big: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	now := time.Now().UTC().Format(time.RFC3339Nano)
	args := []string{"-schema", schema, "audit", "-json", "-now", now, "-checkpoint", "bigtable://bttl_checkpoints"}

	cmd, sc, stdout, line := startAudit(t, bin, addr, 2, append(args, "-progress", "10ms", "-cells-per-second", "20000")...)
	m := progressRanges.FindStringSubmatch(line)
	doneBefore, _ := strconv.Atoi(m[2])
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	code, rest := exitOf(t, cmd, sc)
	assert.Equal(t, exitTerminated, code)
	assert.Equal(t, []string{"bttl audit: terminated (SIGTERM); key ranges finished are in the checkpoint, if any: rerun with the same flags to resume"}, rest)
	assert.Empty(t, stdout.String())
	done, all := shardRangesDone(t, dc, "bttl_checkpoints", "0/1")
	assert.GreaterOrEqual(t, done, doneBefore, "every range reported done is in the checkpoint")
	assert.Less(t, done, all)

	resumed := execBttl(t, bin, addr, args...)
	require.Equal(t, exitOK, resumed.code, resumed.stderr)
	whole := execBttl(t, bin, addr, "-schema", schema, "audit", "-json", "-now", now)
	require.Equal(t, exitOK, whole.code, whole.stderr)
	assert.Equal(t, whole.stdout, resumed.stdout, "resumed = uninterrupted")
}

// -timeout bounds the whole command, as cbt's does: a scan that would take
// longer stops at it with exit 2, saying so.
func TestTimeoutBoundsTheWholeAudit(t *testing.T) {
	_, _, addr := newServer(t)
	_, dc := clientsWithTable(t, addr, "big", "clicks")
	loadCells(t, dc, "big", "clicks", 500, 20, bigtable.Now().TruncateToMilliseconds())
	schema := writeFile(t, "s.yaml", "tables: {big: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	start := time.Now()
	// 10,000 cells at 2,000 a second: 5 s without the timeout.
	r := bttl(t, addr, "", "-schema", schema, "-timeout", "1s", "audit", "-cells-per-second", "2000")
	took := time.Since(start)
	assert.Equal(t, exitError, r.code, r.stderr)
	assert.Contains(t, r.stderr, "not finished within 1s (-timeout)")
	assert.Contains(t, r.stderr, addr)
	assert.Less(t, took, 3*time.Second)
}

func TestShardFromJobRunner(t *testing.T) {
	for _, c := range []struct {
		name  string
		env   map[string]string
		flags []string
		want  scan.Shard
		from  string
		err   string
	}{
		{"no runner", nil, nil, scan.Shard{}, "", ""},
		{"cloud run", map[string]string{"CLOUD_RUN_TASK_INDEX": "2", "CLOUD_RUN_TASK_COUNT": "3"}, nil, scan.Shard{Index: 2, Count: 3}, "CLOUD_RUN_TASK_INDEX=2, CLOUD_RUN_TASK_COUNT=3", ""},
		{"cloud run, one task", map[string]string{"CLOUD_RUN_TASK_INDEX": "0", "CLOUD_RUN_TASK_COUNT": "1"}, nil, scan.Shard{Index: 0, Count: 1}, "CLOUD_RUN_TASK_INDEX=0, CLOUD_RUN_TASK_COUNT=1", ""},
		{"batch", map[string]string{"BATCH_TASK_INDEX": "1", "BATCH_TASK_COUNT": "4"}, nil, scan.Shard{Index: 1, Count: 4}, "BATCH_TASK_INDEX=1, BATCH_TASK_COUNT=4", ""},
		{"kubernetes", map[string]string{"JOB_COMPLETION_INDEX": "1"}, []string{"-shard-count", "3"}, scan.Shard{Index: 1, Count: 3}, "JOB_COMPLETION_INDEX=1, -shard-count 3", ""},
		{"kubernetes without count", map[string]string{"JOB_COMPLETION_INDEX": "1"}, nil, scan.Shard{}, "", "JOB_COMPLETION_INDEX=1 is set (a Kubernetes Indexed Job) but not the task count: give -shard-count N"},
		{"-shard wins", map[string]string{"CLOUD_RUN_TASK_INDEX": "2", "CLOUD_RUN_TASK_COUNT": "3"}, []string{"-shard", "0/2"}, scan.Shard{Index: 0, Count: 2}, "-shard", ""},
		{"-shard-count contradicts", map[string]string{"CLOUD_RUN_TASK_INDEX": "2", "CLOUD_RUN_TASK_COUNT": "3"}, []string{"-shard-count", "4"}, scan.Shard{}, "", "-shard-count 4 contradicts CLOUD_RUN_TASK_COUNT=3"},
		{"index past count", map[string]string{"BATCH_TASK_INDEX": "4", "BATCH_TASK_COUNT": "4"}, nil, scan.Shard{}, "", "task index 4 is not below the task count 4"},
		{"not a number", map[string]string{"CLOUD_RUN_TASK_INDEX": "x", "CLOUD_RUN_TASK_COUNT": "3"}, nil, scan.Shard{}, "", `CLOUD_RUN_TASK_INDEX="x" (a Cloud Run job): not a task index`},
		{"count without runner", nil, []string{"-shard-count", "3"}, scan.Shard{}, "", "-shard-count needs a task index"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s scanFlags
			fs := flagSet("t", &bytes.Buffer{})
			s.register(fs, "read")
			require.NoError(t, fs.Parse(c.flags))
			err := flagsFromEnv(fs, func(k string) string { return c.env[k] })
			if err == nil {
				err = s.check() // a count without an index is refused here (a dry run may take it: wholeOK)
			}
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, s.shard)
			assert.Equal(t, c.from, s.shardFrom)
		})
	}
}

// A runner's variables reach the command: the shard is printed with where
// it came from, and a bad variable is a usage error before any RPC.
func TestShardFromRunnerIsPrinted(t *testing.T) {
	_, _, addr := newServer(t)
	_, dc := clientsWithTable(t, addr, "t", "f")
	loadCells(t, dc, "t", "f", 10, 1, bigtable.Now().TruncateToMilliseconds())
	schema := writeFile(t, "s.yaml", "tables: {t: {f: {strategy: default-expiry, ttl: 48h}}}\n")
	t.Setenv("CLOUD_RUN_TASK_INDEX", "1")
	t.Setenv("CLOUD_RUN_TASK_COUNT", "2")
	r := bttl(t, addr, "", "-schema", schema, "audit", "-json")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "bttl audit: shard 1/2 (CLOUD_RUN_TASK_INDEX=1, CLOUD_RUN_TASK_COUNT=2)\n")
	var out auditOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	assert.Equal(t, &scan.Shard{Index: 1, Count: 2}, out.Tables[0].Shard)

	t.Setenv("CLOUD_RUN_TASK_INDEX", "2")
	r = bttl(t, "127.0.0.1:1", "", "-schema", schema, "audit")
	assert.Equal(t, exitError, r.code)
	assert.Equal(t, "bttl audit: task index 2 is not below the task count 2 (CLOUD_RUN_TASK_INDEX=2, CLOUD_RUN_TASK_COUNT=2)\n", r.stderr)
}

// The default even split sends every row of a table with hex-encoded hash
// keys ("7f00#...": bytes '0'-'9', 'a'-'f', all below 0x80) to shard 0 of
// 2. That was silent; now shard 0 warns that the shards differ more than
// 4x and shard 1 that it held no rows, both with the -suggest-shard-keys
// remedy, and shard keys from the data silence them.
func TestEvenSplitOfHexKeysWarns(t *testing.T) {
	_, _, addr := newServer(t)
	_, dc := clientsWithTable(t, addr, "hex", "f")
	ctx := context.Background()
	tbl := dc.Open("hex")
	var keys []string
	var muts []*bigtable.Mutation
	for i := 0; i < 5000; i++ {
		h := uint32(i) * 2654435761
		keys = append(keys, fmt.Sprintf("%04x#%d", h>>16, i))
		m := bigtable.NewMutation()
		m.Set("f", "c", bigtable.Now(), []byte("v"))
		muts = append(muts, m)
	}
	errs, err := tbl.ApplyBulk(ctx, keys, muts)
	require.NoError(t, err)
	require.Nil(t, errs)
	schema := writeFile(t, "s.yaml", "tables: {hex: {f: {strategy: default-expiry, ttl: 48h}}}\n")
	remedy := "write shard keys from the data once, with: bttl -project p -instance i -schema " + schema + " audit -table hex -suggest-shard-keys 2 > shard-keys.txt; then give every shard the same -shard-keys shard-keys.txt"

	r0 := bttl(t, addr, "", "-schema", schema, "audit", "-json", "-shard", "0/2")
	require.Equal(t, exitOK, r0.code, r0.stderr)
	assert.Contains(t, r0.stderr, `bttl audit: warning: the 2 shards of table "hex" differ more than 4x in size (the table's sample points per shard 0:`)
	assert.Contains(t, r0.stderr, " 1:0; the default even split of the key space suits binary hashed keys only): "+remedy)
	r1 := bttl(t, addr, "", "-schema", schema, "audit", "-json", "-shard", "1/2")
	require.Equal(t, exitOK, r1.code, r1.stderr)
	assert.Contains(t, r1.stderr, `bttl audit: warning: shard 1/2 of table "hex" held no rows (the default even split of the key space suits binary hashed keys only): `+remedy)
	var out auditOutput
	require.NoError(t, json.Unmarshal([]byte(r1.stdout), &out))
	assert.Zero(t, out.Tables[0].Rows, "the case warned about: shard 1 of 2 gets nothing")

	// The command the warning prints works as printed (it lacked -schema, and
	// failed) (issue 35 item 6).
	cmd := strings.Fields(strings.TrimPrefix(remedy[strings.Index(remedy, "bttl -project"):strings.Index(remedy, " > ")], "bttl "))
	printed := runRaw(ctx, cmd...)
	require.Equal(t, exitOK, printed.code, printed.stderr)
	assert.NotEmpty(t, printed.stdout)

	sk := bttl(t, addr, "", "-schema", schema, "audit", "-table", "hex", "-suggest-shard-keys", "2")
	require.Equal(t, exitOK, sk.code, sk.stderr)
	file := writeFile(t, "shard-keys.txt", sk.stdout)
	for i := 0; i < 2; i++ {
		r := bttl(t, addr, "", "-schema", schema, "audit", "-json", "-shard", fmt.Sprintf("%d/2", i), "-shard-keys", file)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.NotContains(t, r.stderr, "warning", "shard keys from the data balance the shards")
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		assert.InDelta(t, 2500, out.Tables[0].Rows, 1000)
	}
	_ = os.Remove(file)
}
