package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/internal/testenv"
)

// buildBttl builds the binary once per test.
func buildBttl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bttl")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// serverClients starts server, "bttest" (in-process) or "cbtemulator",
// and returns clients on it and its address.
func serverClients(t *testing.T, server string) (*bigtable.AdminClient, *bigtable.Client, string) {
	t.Helper()
	if server == "bttest" {
		return newServer(t)
	}
	return emulatorClients(t)
}

// emulatorClients starts cbtemulator and returns clients on it.
func emulatorClients(t *testing.T) (*bigtable.AdminClient, *bigtable.Client, string) {
	t.Helper()
	addr := startCBTEmulator(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	ctx := context.Background()
	ac, err := bigtable.NewAdminClient(ctx, "p", "i")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ac.Close() })
	dc, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dc.Close() })
	return ac, dc, addr
}

// loadEvents creates table "events" (schemaYAML's families) and writes
// rows rows of perRow cells under "user#%07d" keys, from several
// goroutines by bulk mutations: in each row 4 one-second cells (2 at or
// before now), 3 default-expiry cells (1 expired), and 3 sequence versions
// (1 beyond N), so every report has findings and examples.
func loadEvents(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, rows int, now bigtable.Timestamp) (keys []string, perRow int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", ColumnFamilies: map[string]bigtable.Family{
		"session": {GCPolicy: bigtable.MaxAgePolicy(time.Second)},
		"clicks":  {GCPolicy: bigtable.MaxAgePolicy(48 * time.Hour)},
		"doc":     {GCPolicy: bigtable.MaxVersionsPolicy(2)},
	}}))
	hour := bigtable.Timestamp(time.Hour / time.Microsecond)
	value := bytes.Repeat([]byte("v"), 32)
	tbl := dc.Open("events")
	const batch, loaders = 1000, 4
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, loaders)
	for l := 0; l < loaders; l++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := l * batch; b < rows; b += loaders * batch {
				var ks []string
				var muts []*bigtable.Mutation
				for r := b; r < min(b+batch, rows); r++ {
					m := bigtable.NewMutation()
					for c := 0; c < 4; c++ {
						m.Set("session", "c"+strconv.Itoa(c), now+bigtable.Timestamp(c-2)*hour, value)
					}
					for c := 0; c < 3; c++ {
						m.Set("clicks", "c"+strconv.Itoa(c), now-bigtable.Timestamp(c*24)*hour, value)
					}
					for v := bigtable.Timestamp(1); v <= 3; v++ {
						m.Set("doc", "body", v*1000, value)
					}
					ks = append(ks, fmt.Sprintf("user#%07d", r))
					muts = append(muts, m)
				}
				rowErrs, err := tbl.ApplyBulk(ctx, ks, muts)
				if err == nil && rowErrs != nil {
					err = fmt.Errorf("bulk: %v", rowErrs[0])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for r := 0; r < rows; r++ {
		keys = append(keys, fmt.Sprintf("user#%07d", r))
	}
	t.Logf("loaded %d cells in %d rows in %s", rows*10, rows, time.Since(start))
	return keys, 10
}

// execBttl runs the built binary against the emulator at addr.
func execBttl(t *testing.T, bin, addr string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-project", "p", "-instance", "i"}, args...)...)
	cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+addr)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, out.String(), errb.String()}
}

// Acceptance 3 of issue 21: two shards run as two processes at once
// (the built binary, on cbtemulator) cover every row exactly once, and
// bttl audit merge of their reports prints what a single-process audit
// prints.
func TestShardProcessesMergeToSingleAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	ac, dc, addr := emulatorClients(t)
	bin := buildBttl(t)
	now := bigtable.Now().TruncateToMilliseconds()
	keys, perRow := loadEvents(t, ac, dc, 20000, now)
	schema := writeFile(t, "schema.yaml", schemaYAML)
	nowFlag := now.Time().UTC().Format(time.RFC3339Nano)
	// -bytes: byte figures merge too (a report without them says so,
	// which audit merge does not carry over).
	common := []string{"-schema", schema, "audit", "-bytes", "-json", "-now", nowFlag}

	// Keys share the prefix "user#": shard keys from the data, once.
	r := execBttl(t, bin, addr, "-schema", schema, "audit", "-table", "events", "-suggest-shard-keys", "2")
	require.Equal(t, exitOK, r.code, r.stderr)
	shardKeys := writeFile(t, "shard-keys.txt", r.stdout)
	t.Logf("shard keys: %q", r.stdout)

	dir := t.TempDir()
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { // two processes at once
			defer wg.Done()
			results[i] = execBttl(t, bin, addr, append(common, "-shard", fmt.Sprintf("%d/2", i), "-shard-keys", shardKeys,
				"-workers", "2", "-checkpoint", filepath.Join(dir, fmt.Sprintf("shard%d.checkpoint", i)), "-table", "events")...)
		}()
	}
	wg.Wait()
	var files []string
	var total int64
	for i, res := range results {
		require.Equal(t, exitOK, res.code, "shard %d: %s", i, res.stderr)
		var out auditOutput
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
		require.Len(t, out.Tables, 1)
		rep := out.Tables[0]
		require.Equal(t, &scan.Shard{Index: i, Count: 2}, rep.Shard)
		require.Len(t, rep.Ranges, 1, "a complete shard covers its piece")
		inPiece := 0
		for _, k := range keys {
			if rep.Ranges[0].Contains(k) {
				inPiece++
			}
		}
		assert.EqualValues(t, inPiece, rep.Rows, "shard %d read each row of its piece %s once", i, rep.Ranges[0])
		assert.EqualValues(t, inPiece*perRow, rep.Cells)
		assert.InDelta(t, len(keys)/2, inPiece, float64(len(keys))/4, "shard %d holds about half the rows", i)
		total += rep.Rows
		files = append(files, writeFile(t, fmt.Sprintf("shard%d.json", i), res.stdout))
	}
	assert.EqualValues(t, len(keys), total, "the shards together read every row once")

	merged := execBttl(t, bin, addr, "audit", "merge", "-json", files[1], files[0])
	require.Equal(t, exitOK, merged.code, merged.stderr)
	single := execBttl(t, bin, addr, append(common, "-table", "events")...)
	require.Equal(t, exitOK, single.code, single.stderr)
	assert.Equal(t, single.stdout, merged.stdout, "merged shards = single-process audit")
	var out auditOutput
	require.NoError(t, json.Unmarshal([]byte(single.stdout), &out))
	assert.EqualValues(t, len(keys)*perRow, out.Tables[0].Cells)
	// The one-second family is on its rule: its cells at or before now are
	// expired, no real-timestamps finding.
	assert.NotContains(t, out.Findings, "real-timestamps")
	assert.Contains(t, out.Findings, "expired")

	// The text form too.
	mergedText := execBttl(t, bin, addr, "audit", "merge", files[0], files[1])
	singleText := execBttl(t, bin, addr, "-schema", schema, "audit", "-bytes", "-now", nowFlag, "-table", "events")
	assert.Equal(t, singleText.stdout, mergedText.stdout)
}

// bttl audit merge refuses reports that do not fit together (exit 1,
// saying why) and files it cannot read (exit 2).
func TestAuditMergeRefusesMismatchedReports(t *testing.T) {
	addr := hashedClicks(t, 200)
	ctx := context.Background()
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	other := writeFile(t, "o.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 24h}}}\n")
	audit := func(name string, args ...string) string {
		r := bttl(t, addr, "", append([]string{"-schema", schema, "audit", "-json"}, args...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		return writeFile(t, name, r.stdout)
	}
	const t0, t1 = "2026-01-02T15:04:05Z", "2026-01-02T15:04:06Z"
	s0 := audit("s0.json", "-now", t0, "-shard", "0/2")
	s1 := audit("s1.json", "-now", t0, "-shard", "1/2")
	late := audit("late.json", "-now", t1, "-shard", "1/2")
	third := audit("third.json", "-now", t0, "-shard", "1/3")
	r := bttl(t, addr, "", "-schema", other, "audit", "-json", "-now", t0, "-shard", "1/2")
	require.Equal(t, exitOK, r.code, r.stderr)
	otherSchema := writeFile(t, "other.json", r.stdout)

	r = bttl(t, addr, "", "-schema", schema, "audit", "-now", t0, "-shard", "1/2")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "partial: shard 1/2, key range [\"\\x80\\x00\\x00\\x00\", end): merge the shards' -json reports with bttl audit merge\n")

	r = runRaw(ctx, "audit", "merge", s0, s1)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `table "events" at 2026-01-02T15:04:05.000000Z: 200 rows, 200 cells`)
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{s0, late}, "different clock times, 2026-01-02T15:04:05Z and 2026-01-02T15:04:06Z"},
		{[]string{s0}, "missing shard(s) 1/2"},
		{[]string{s0, s1, s1}, "two reports of shard 1/2"},
		{[]string{s0, third}, "reports of 2 and 3 shards"},
		{[]string{s0, otherSchema}, "different schemas"},
	} {
		r := runRaw(ctx, append([]string{"audit", "merge"}, c.files...)...)
		assert.Equal(t, exitFindings, r.code, "%v: %s", c.files, r.stderr)
		assert.Contains(t, r.stderr, c.want)
		assert.True(t, strings.HasPrefix(r.stderr, "bttl audit merge: cannot merge the reports of table \"events\": "), r.stderr)
		assert.Empty(t, r.stdout)
	}
	notJSON := writeFile(t, "bad.json", "scanned 3 rows")
	for _, args := range [][]string{
		{"audit", "merge"},
		{"audit", "merge", filepath.Join(t.TempDir(), "missing.json")},
		{"audit", "merge", notJSON},
		{"audit", "merge", "-fail-on", "bogus", s0},
	} {
		r := runRaw(ctx, args...)
		assert.Equal(t, exitError, r.code, "%q: %s", args, r.stderr)
		assert.NotEmpty(t, r.stderr)
	}
	for _, args := range [][]string{{"help", "audit", "merge"}, {"audit", "merge", "-h"}} {
		r := runRaw(ctx, args...)
		assert.Equal(t, exitOK, r.code, "%q", args)
		assert.True(t, strings.HasPrefix(r.stdout, "usage: bttl audit merge [-json] [-fail-on LIST] [-metrics-out FILE]\n"), r.stdout)
	}
	// -fail-on and -metrics-out work on the merged report (of shards
	// audited with -bytes: the gauges include byte figures).
	b0, b1 := audit("b0.json", "-now", t0, "-shard", "0/2", "-bytes"), audit("b1.json", "-now", t0, "-shard", "1/2", "-bytes")
	prom := filepath.Join(t.TempDir(), "m.prom")
	r = runRaw(ctx, "audit", "merge", "-fail-on", "expired", "-metrics-out", prom, b1, b0)
	assert.Equal(t, exitOK, r.code, r.stderr)
	b, err := os.ReadFile(prom)
	require.NoError(t, err)
	assert.Contains(t, string(b), `bttl_audit_stored_cells{family="clicks",strategy="default-expiry",table="events"} 200`)
	assert.Contains(t, string(b), `bttl_audit_expired_not_collected_cells{family="clicks",strategy="default-expiry",table="events"} 0`)
}

var progressRanges = regexp.MustCompile(`^scanned (\d+) rows, \d+ cells, about \d+% \((\d+) of (\d+) key ranges\)`)

// A SIGKILLed audit restarted with its checkpoint prints what an
// uninterrupted audit prints, reading only the ranges left.
func TestAuditSIGKILLResumesFromCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	ac, dc, addr := emulatorClients(t)
	bin := buildBttl(t)
	now := bigtable.Now().TruncateToMilliseconds()
	keys, _ := loadEvents(t, ac, dc, 20000, now)
	schema := writeFile(t, "schema.yaml", schemaYAML)
	ck := filepath.Join(t.TempDir(), "audit.checkpoint")
	args := []string{"-project", "p", "-instance", "i", "-schema", schema, "audit", "-json", "-now", now.Time().UTC().Format(time.RFC3339Nano),
		"-workers", "2", "-checkpoint", ck, "-progress", "1ms", "-cells-per-second", "100000"}

	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+addr)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	var line string
	for sc.Scan() {
		line = sc.Text()
		if m := progressRanges.FindStringSubmatch(line); m != nil {
			if done, _ := strconv.Atoi(m[2]); done >= 8 && m[2] != m[3] {
				break // some ranges finished, some not
			}
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	t.Logf("killed at: %s", line)
	b, err := os.ReadFile(ck)
	require.NoError(t, err, "the checkpoint exists")
	var file struct {
		Ranges []struct{ Done bool } `json:"ranges"`
	}
	require.NoError(t, json.Unmarshal(b, &file), "a whole JSON file after SIGKILL")
	done := 0
	for _, r := range file.Ranges {
		if r.Done {
			done++
		}
	}
	require.NotZero(t, done)
	require.Less(t, done, len(file.Ranges))

	resumed := execBttl(t, bin, addr, args[4:]...)
	require.Equal(t, exitOK, resumed.code, resumed.stderr)
	lines := strings.Split(strings.TrimSpace(resumed.stderr), "\n")
	m := progressRanges.FindStringSubmatch(lines[len(lines)-1])
	require.NotNil(t, m, resumed.stderr)
	reread, _ := strconv.Atoi(m[1])
	assert.Less(t, reread, len(keys), "the restart skipped the %d finished ranges", done)
	assert.Equal(t, m[3], m[2], "every range done")

	want := execBttl(t, bin, addr, "-schema", schema, "audit", "-json", "-now", now.Time().UTC().Format(time.RFC3339Nano))
	require.Equal(t, exitOK, want.code, want.stderr)
	assert.Equal(t, want.stdout, resumed.stdout, "resumed = uninterrupted")
	var out struct{ Tables []audit.Report }
	require.NoError(t, json.Unmarshal([]byte(resumed.stdout), &out))
	t.Logf("checkpoint: %d of %d ranges done at the kill; the restart read %d of %d rows", done, len(file.Ranges), reread, out.Tables[0].Rows)
}

// TestAuditWorkersSpeedup (acceptance 6 of issue 21) audits
// BTTL_AUDIT_SPEEDUP_CELLS cells (e.g. 1000000) on cbtemulator with the
// built binary, with -workers 1 and -workers 4, twice each interleaved
// (1, 4, 4, 1), and checks that 4 workers take at most 0.6x the single
// worker's wall time (sums of both runs) and that every run's peak RSS
// (/usr/bin/time) stays under 200 MB. Not in the default run:
//
//	BTTL_AUDIT_SPEEDUP_CELLS=1000000 go test -run TestAuditWorkersSpeedup -v -timeout 30m ./cmd/bttl
func TestAuditWorkersSpeedup(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BTTL_AUDIT_SPEEDUP_CELLS"))
	if n <= 0 {
		t.Skip("set BTTL_AUDIT_SPEEDUP_CELLS to run")
	}
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		testenv.Missing(t, testenv.GNUTime, err)
	}
	ac, dc, addr := emulatorClients(t)
	bin := buildBttl(t)
	now := bigtable.Now().TruncateToMilliseconds()
	_, perRow := loadEvents(t, ac, dc, n/10, now)
	schema := writeFile(t, "schema.yaml", schemaYAML)
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		t.Logf("load average before the audits: %s", strings.TrimSpace(string(load)))
	}
	audit := func(workers int) (time.Duration, int64) {
		rssFile := filepath.Join(t.TempDir(), "maxrss")
		cmd := exec.Command("/usr/bin/time", "-f", "%M %U %S", "-o", rssFile, bin, "-project", "p", "-instance", "i", "-schema", schema,
			"audit", "-json", "-workers", strconv.Itoa(workers), "-now", now.Time().UTC().Format(time.RFC3339Nano))
		cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+addr)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		start := time.Now()
		require.NoError(t, cmd.Run())
		elapsed := time.Since(start)
		kib, err := os.ReadFile(rssFile)
		require.NoError(t, err)
		fields := strings.Fields(string(kib))
		require.Len(t, fields, 3, string(kib))
		rss, err := strconv.ParseInt(fields[0], 10, 64)
		require.NoError(t, err, string(kib))
		user, _ := strconv.ParseFloat(fields[1], 64)
		sys, _ := strconv.ParseFloat(fields[2], 64)
		var got auditOutput
		require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		require.EqualValues(t, n/10*perRow, got.Tables[0].Cells)
		t.Logf("-workers %d: %d cells in %s, peak RSS %.1f MB, bttl CPU %.2fs user + %.2fs sys", workers, got.Tables[0].Cells, elapsed.Round(time.Millisecond), float64(rss)/1024, user, sys)
		require.Less(t, rss*1024, int64(200<<20), "peak RSS under 200 MB")
		return elapsed, rss
	}
	var one, four time.Duration
	for _, w := range []int{1, 4, 4, 1} {
		emu := emulatorCPU()
		d, _ := audit(w)
		t.Logf("  cbtemulator CPU during it: %.2fs", emulatorCPU()-emu)
		if w == 1 {
			one += d
		} else {
			four += d
		}
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		t.Logf("load average after the audits: %s", strings.TrimSpace(string(load)))
	}
	ratio := float64(four) / float64(one)
	t.Logf("4 workers / 1 worker wall time: %.2f (%s / %s, two runs each)", ratio, four.Round(time.Millisecond), one.Round(time.Millisecond))
	assert.LessOrEqual(t, ratio, 0.6, "4 workers take at most 0.6x the single worker's wall time")
}

// emulatorCPU is the CPU time, in seconds, the cbtemulator children of
// this process have used (0 when /proc cannot tell): the server's share of
// an audit's work.
func emulatorCPU() float64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	total := 0.0
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !bytes.Contains(b, []byte("(cbtemulator)")) {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		// After the name: state, ppid, ..., utime and stime are the 12th and
		// 13th fields, in clock ticks (100 a second on Linux).
		if len(f) < 13 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		total += (u + s) / 100
	}
	return total
}
