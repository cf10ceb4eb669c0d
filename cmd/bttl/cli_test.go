package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/schemafile"
)

// runRaw runs the command in-process with exactly args (no -project or
// -instance added).
func runRaw(ctx context.Context, args ...string) result {
	var out, errb bytes.Buffer
	code := run(ctx, args, strings.NewReader(""), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// Acceptance 3: every help form exits 0 and prints help on stdout without
// reading the schema or calling Bigtable: the schema named does not exist
// and the endpoint is unreachable, so either would fail.
func TestHelpFormsExitZeroWithoutNetwork(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1")
	missingSchema := filepath.Join(t.TempDir(), "missing.yaml")
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"-help"}, {"help"},
		{"help", "verify"}, {"help", "plan"}, {"help", "apply"}, {"help", "audit"}, {"help", "init"},
		{"help", "lookup"}, {"help", "read"}, {"lookup", "-h"}, {"read", "-h"},
		{"verify", "-h"}, {"plan", "--help"}, {"apply", "-h"}, {"audit", "-h"}, {"init", "-h"},
		{"-project", "p", "-instance", "i", "-schema", missingSchema, "verify", "-h"},
		{"audit", "-project", "p", "-schema", missingSchema, "-h"},
	} {
		start := time.Now()
		r := runRaw(context.Background(), args...)
		assert.Equal(t, exitOK, r.code, "%q: %s", args, r.stderr)
		assert.Contains(t, r.stdout, "usage: bttl", "%q", args)
		assert.Contains(t, r.stdout, "exit status: 0 ok; 1 finding or mismatch", "%q: help documents exit codes", args)
		assert.Empty(t, r.stderr, "%q", args)
		assert.Less(t, time.Since(start), time.Second, "%q", args)
	}
	r := runRaw(context.Background(), "help", "audit")
	for _, flag := range []string{"-fail-on", "-sample", "-limit", "-progress", "-table", "-workers", "-cells-per-second", "-shard", "-shard-keys", "-suggest-shard-keys", "-checkpoint", "-now", "bttl audit merge"} {
		assert.Contains(t, r.stdout, flag, "help audit lists %s", flag)
	}

	r = runRaw(context.Background(), "-version")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `^bttl \S+ go\S+\n$`, r.stdout)
	r = runRaw(context.Background(), "verify", "-version")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "bttl "), r.stdout)

	// Usage errors still exit 2, on stderr.
	for _, args := range [][]string{{}, {"help", "nope"}, {"nope"}} {
		r := runRaw(context.Background(), args...)
		assert.Equal(t, exitError, r.code, "%q", args)
		assert.NotEmpty(t, r.stderr, "%q", args)
	}
}

// Acceptance 3: global flags work before and after the command.
func TestGlobalFlagsAfterCommand(t *testing.T) {
	ac, _, _ := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "docs", ColumnFamilies: map[string]bigtable.Family{
		"doc": {GCPolicy: bigtable.MaxVersionsPolicy(2)},
	}}))
	schema := writeFile(t, "s.yaml", "tables: {docs: {doc: {strategy: sequence, versions: 2}}}\n")
	keyFile := writeFile(t, "key.json", `{"type": "service_account", "project_id": "p"}`)
	for _, args := range [][]string{
		{"-project", "p", "verify", "-instance", "i", "-schema", schema},
		{"verify", "-project", "p", "-instance", "i", "-schema", schema, "-timeout", "10s"},
		{"-project", "p", "-instance", "i", "-schema", schema, "verify", "-table", "docs"},
		// The emulator takes no credentials; a key file is still accepted.
		{"-project", "p", "-instance", "i", "-schema", schema, "-creds", keyFile, "-app-profile", "batch", "verify"},
	} {
		r := runRaw(ctx, args...)
		assert.Equal(t, exitOK, r.code, "%q: %s", args, r.stderr)
		assert.Equal(t, "table \"docs\": ok\n", r.stdout, "%q", args)
	}
}

// Acceptance 3: each bad flag value exits 2 before any RPC, with a message
// naming the flag.
func TestBadFlagValuesExitTwoNamingTheFlag(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1")
	schema := writeFile(t, "s.json", `{"tables": {"t": {"f": {"strategy": "unmanaged"}}}}`)
	g := []string{"-project", "p", "-instance", "i", "-schema", schema}
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"-sample", []string{"audit", "-sample", "1.5"}},
		{"-sample", []string{"audit", "-sample", "-1"}},
		{"-sample", []string{"audit", "-sample", "0"}},
		{"-sample", []string{"audit", "-sample", "half"}},
		{"-limit", []string{"audit", "-limit", "-5"}},
		{"-start", []string{"audit", "-start", "z", "-end", "a"}},
		{"-start", []string{"audit", "-start", "a", "-end", "a"}},
		{"-prefix", []string{"audit", "-prefix", "a", "-start", "b"}},
		{"-fail-on", []string{"audit", "-fail-on", "expired,bogus"}},
		{"-fail-on", []string{"audit", "-fail-on", ""}},
		{"-progress", []string{"audit", "-progress", "-1s"}},
		{"-workers", []string{"audit", "-workers", "0"}},
		{"-cells-per-second", []string{"audit", "-cells-per-second", "-5"}},
		{"-cells-per-second", []string{"audit", "-cells-per-second", "fast"}},
		{"-shard", []string{"audit", "-shard", "2/2"}},
		{"-shard", []string{"audit", "-shard", "1"}},
		{"-now", []string{"audit", "-now", "yesterday"}},
		{"-checkpoint", []string{"audit", "-checkpoint", "ck.json"}},
		{"-limit", []string{"audit", "-limit", "5", "-workers", "2"}},
		{"-limit", []string{"audit", "-limit", "5", "-shard", "0/2"}},
		{"-shard-keys", []string{"audit", "-shard-keys", "keys.txt"}},
		{"-suggest-shard-keys", []string{"audit", "-suggest-shard-keys", "1"}},
		{"-timeout", []string{"-timeout", "-1s", "verify"}},
		{"-timeout", []string{"verify", "-timeout", "soon"}},
		{"-sample-rows", []string{"apply", "-sample-rows", "0"}},
		{"-yes", []string{"apply", "-yes=maybe"}},
		{"-table", []string{"verify", "-table", "other"}},
		{"-creds", []string{"-creds", filepath.Join(t.TempDir(), "none.json"), "verify"}},
		{"-frobnicate", []string{"verify", "-frobnicate"}},
	} {
		start := time.Now()
		r := runRaw(context.Background(), append(append([]string{}, g...), c.args...)...)
		assert.Equal(t, exitError, r.code, "%q", c.args)
		assert.Contains(t, r.stderr, c.flag, "%q: the message names the flag", c.args)
		assert.Empty(t, r.stdout, "%q", c.args)
		assert.Less(t, time.Since(start), time.Second, "%q: no RPC", c.args)
	}
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"-schema", []string{"-project", "p", "-instance", "i", "-schema", filepath.Join(t.TempDir(), "none.yaml"), "verify"}},
		{"-schema", []string{"-project", "p", "-instance", "i", "verify"}},
		{"-project", []string{"-instance", "i", "-schema", schema, "verify"}},
	} {
		r := runRaw(context.Background(), c.args...)
		assert.Equal(t, exitError, r.code, "%q", c.args)
		assert.Contains(t, r.stderr, c.flag, "%q", c.args)
	}
}

// Acceptance 4: a missing table is a mismatch (exit 1), reported with the
// matching table after it, which is still checked.
func TestVerifyMissingTableIsMismatchAndChecksEveryTable(t *testing.T) {
	ac, _, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "present", ColumnFamilies: map[string]bigtable.Family{
		"clicks": {GCPolicy: bigtable.MaxAgePolicy(48 * time.Hour)},
	}}))
	schema := writeFile(t, "s.yaml", `
tables:
  absent:                 # sorts first: verify must go on after it
    clicks: {strategy: default-expiry, ttl: 48h}
  present:
    clicks: {strategy: default-expiry, ttl: 48h}
`)
	r := bttl(t, addr, "", "-schema", schema, "verify")
	assert.Equal(t, exitFindings, r.code, r.stderr)
	assert.Equal(t, "table \"absent\": MISMATCH\n  missing table (bttl apply creates it)\ntable \"present\": ok\n", r.stdout)
	assert.Empty(t, r.stderr)
}

// Acceptance 5: an unreachable endpoint fails within -timeout, naming the
// address, for each command's first call.
func TestUnreachableEndpointFailsWithinTimeout(t *testing.T) {
	schema := writeFile(t, "s.yaml", "tables: {t: {f: {strategy: sequence, versions: 1}}}\n")
	// A server that takes connections and never answers (the kernel
	// completes the handshake; nothing reads).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	addr := ln.Addr().String()
	const timeout = 500 * time.Millisecond
	for _, cmd := range [][]string{{"verify"}, {"plan"}, {"apply", "-yes"}, {"audit"}, {"init"}} {
		start := time.Now()
		r := bttl(t, addr, "", append([]string{"-schema", schema, "-timeout", timeout.String()}, cmd...)...)
		elapsed := time.Since(start)
		if cmd[0] == "init" {
			// init writes to -schema; here it must fail before that.
			r = bttl(t, addr, "", "-timeout", timeout.String(), "init")
			elapsed = time.Since(start) - elapsed
		}
		assert.Equal(t, exitError, r.code, "%s: %s", cmd, r.stderr)
		assert.Contains(t, r.stderr, addr, "%s names the address", cmd)
		assert.Contains(t, r.stderr, "-timeout", "%s", cmd)
		assert.Equal(t, 1, strings.Count(r.stderr, "bttl"), "%s: one bttl prefix: %s", cmd, r.stderr)
		assert.Less(t, elapsed, timeout+2*time.Second, "%s", cmd)
	}
}

// loadCells writes rows*cols cells in family fam of table, by bulk writes.
func loadCells(t *testing.T, dc *bigtable.Client, table, fam string, rows, cols int, ts bigtable.Timestamp) {
	t.Helper()
	ctx := context.Background()
	tbl := dc.Open(table)
	const batch = 500
	for lo := 0; lo < rows; lo += batch {
		var keys []string
		var muts []*bigtable.Mutation
		for r := lo; r < min(lo+batch, rows); r++ {
			m := bigtable.NewMutation()
			for c := 0; c < cols; c++ {
				m.Set(fam, fmt.Sprintf("c%03d", c), ts, []byte("0123456789"))
			}
			keys = append(keys, fmt.Sprintf("row%07d", r))
			muts = append(muts, m)
		}
		errs, err := tbl.ApplyBulk(ctx, keys, muts)
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
	}
}

// Acceptance 5: SIGINT during an audit of 200,000 cells stops the built
// binary within a second, with one line and exit 130.
func TestSIGINTStopsAuditWithExit130(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	addr := startCBTEmulator(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	bin := buildBttl(t)

	ctx := context.Background()
	ac, err := bigtable.NewAdminClient(ctx, "p", "i")
	require.NoError(t, err)
	defer ac.Close()
	dc, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	require.NoError(t, err)
	defer dc.Close()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "big", ColumnFamilies: map[string]bigtable.Family{
		"clicks": {GCPolicy: bigtable.MaxAgePolicy(48 * time.Hour)},
	}}))
	loadStart := time.Now()
	loadCells(t, dc, "big", "clicks", 2000, 100, bigtable.Now().TruncateToMilliseconds())
	t.Logf("loaded 200,000 cells in %s", time.Since(loadStart))
	schema := writeFile(t, "s.yaml", "tables: {big: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")

	cmd := exec.Command(bin, "-project", "p", "-instance", "i", "-schema", schema, "audit", "-progress", "1ms")
	cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+addr)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "scanned ") {
			break // the scan is under way
		}
	}
	require.NotEmpty(t, lines, "no progress line")
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "scanned "), "stderr: %q", lines)
	sent := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	var rest []string
	for sc.Scan() {
		rest = append(rest, sc.Text())
	}
	err = cmd.Wait()
	stopped := time.Since(sent)
	t.Logf("stopped %s after SIGINT; progress when it was sent: %s", stopped, lines[len(lines)-1])
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stdout: %s\nstderr: %q", stdout.String(), rest)
	assert.Equal(t, exitInterrupted, ee.ExitCode(), "stderr: %q", rest)
	assert.Less(t, stopped, time.Second)
	var msgs []string
	for _, l := range rest {
		if !strings.HasPrefix(l, "scanned ") {
			msgs = append(msgs, l)
		}
	}
	assert.Equal(t, []string{"bttl audit: interrupted"}, msgs)
	assert.Empty(t, stdout.String(), "no report for an interrupted scan")
}

// Acceptance 6: audit -fail-on exits 1 on a table with expired cells GC
// has not collected (written by the real cbt) and 0 on a clean one.
func TestAuditFailOn(t *testing.T) {
	addr := startCBTEmulator(t)
	// Created with its rule, never modified: the emulator runs no GC, so
	// the expired cells stay, as they do on Bigtable until compaction.
	cbt(t, addr, "createtable", "stale", "families=clicks:maxage=1h")
	cbt(t, addr, "createtable", "clean", "families=clicks:maxage=1h")
	old := time.Now().Add(-3*time.Hour).UnixMicro() / 1000 * 1000
	cbt(t, addr, "set", "stale", "r1", fmt.Sprintf("clicks:c=old@%d", old), "clicks:d=new")
	cbt(t, addr, "set", "clean", "r1", "clicks:c=new")
	schema := writeFile(t, "s.yaml", `
tables:
  stale: {clicks: {strategy: default-expiry, ttl: 1h}}
  clean: {clicks: {strategy: default-expiry, ttl: 1h}}
`)
	r := bttl(t, addr, "", "-schema", schema, "audit", "-table", "stale", "-fail-on", "expired,large-rows")
	assert.Equal(t, exitFindings, r.code, r.stderr)
	assert.Contains(t, r.stdout, `! family "clicks": 1 expired cell(s)`)
	assert.Contains(t, r.stderr, "findings named by -fail-on: expired")

	r = bttl(t, addr, "", "-schema", schema, "audit", "-table", "clean", "-fail-on", "all")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "!")

	// Only the findings named fail; without -fail-on audit exits 0.
	r = bttl(t, addr, "", "-schema", schema, "audit", "-table", "stale", "-fail-on", "beyond-kept,real-timestamps")
	assert.Equal(t, exitOK, r.code, r.stderr)
	r = bttl(t, addr, "", "-schema", schema, "audit")
	assert.Equal(t, exitOK, r.code, r.stderr)
	metricsFile := filepath.Join(t.TempDir(), "bttl.prom")
	r = bttl(t, addr, "", "-schema", schema, "audit", "-metrics-out", metricsFile)
	assert.Equal(t, exitOK, r.code, r.stderr)
	prom, err := os.ReadFile(metricsFile)
	require.NoError(t, err)
	assert.Contains(t, string(prom), `bttl_audit_expired_not_collected_cells{family="clicks",strategy="default-expiry",table="stale"} 1`)
	r = bttl(t, addr, "", "-schema", schema, "audit", "-json", "-fail-on", "expired")
	assert.Equal(t, exitFindings, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"findings": [
    "expired"
  ]`)
}

// A sampled or limited report says it is partial; progress is written only
// to a terminal unless -progress asks for it.
func TestAuditSaysWhenPartial(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", ColumnFamilies: map[string]bigtable.Family{
		"clicks": {GCPolicy: bigtable.MaxAgePolicy(48 * time.Hour)},
	}}))
	loadCells(t, dc, "events", "clicks", 50, 2, bigtable.Now().TruncateToMilliseconds())
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")

	r := bttl(t, addr, "", "-schema", schema, "audit")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "partial")
	assert.Empty(t, r.stderr, "stderr is not a terminal: no progress")

	r = bttl(t, addr, "", "-schema", schema, "audit", "-limit", "10")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "partial: stopped at the row limit (-limit 10): later rows not read")
	r = bttl(t, addr, "", "-schema", schema, "audit", "-limit", "100")
	assert.NotContains(t, r.stdout, "partial", "a limit not reached leaves the report whole")

	r = bttl(t, addr, "", "-schema", schema, "audit", "-sample", "0.5")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "partial: sampled about 50% of rows (-sample 0.5): counts are of the sample")
	r = bttl(t, addr, "", "-schema", schema, "audit", "-sample", "1")
	assert.NotContains(t, r.stdout, "partial")
	r = bttl(t, addr, "", "-schema", schema, "audit", "-json", "-sample", "0.5")
	assert.Contains(t, r.stdout, `"sample": 0.5`)

	r = bttl(t, addr, "", "-schema", schema, "audit", "-app-profile", "data-boost")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "50 rows, 100 cells")

	r = bttl(t, addr, "", "-schema", schema, "audit", "-progress", "1ns")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "scanned ")
	assert.NotContains(t, r.stderr, "\r", "lines, not carriage returns, off a terminal")
}

func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf}
	p.update(scan.Progress{Ranges: 4, RangesDone: 2, Rows: 100, Cells: 200, Fraction: 0.5, ETA: 10 * time.Second})
	assert.Equal(t, "scanned 100 rows, 200 cells, about 50% (2 of 4 key ranges), ETA 10s\n", buf.String())
	buf.Reset()
	p.update(scan.Progress{Ranges: 4, Rows: 1, Cells: 2})
	assert.Equal(t, "scanned 1 rows, 2 cells, about 0% (0 of 4 key ranges)\n", buf.String(), "no ETA before a range is done")

	// A limit gives its own fraction; a terminal's line is rewritten.
	buf.Reset()
	p = &progress{w: &buf, tty: true, limit: 1000}
	p.update(scan.Progress{Ranges: 4, Rows: 100, Fraction: 0})
	p.done()
	assert.Equal(t, "\rscanned 100 rows, 0 cells, about 10% (0 of 4 key ranges)\x1b[K\n", buf.String())
}

// classify: the strategy each GC rule implies.
func TestClassifyRules(t *testing.T) {
	age := func(d time.Duration) *adminpb.GcRule {
		return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxAge{MaxAge: durationpb.New(d)}}
	}
	vers := func(n int32) *adminpb.GcRule {
		return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxNumVersions{MaxNumVersions: n}}
	}
	union := func(rs ...*adminpb.GcRule) *adminpb.GcRule {
		return &adminpb.GcRule{Rule: &adminpb.GcRule_Union_{Union: &adminpb.GcRule_Union{Rules: rs}}}
	}
	inter := func(rs ...*adminpb.GcRule) *adminpb.GcRule {
		return &adminpb.GcRule{Rule: &adminpb.GcRule_Intersection_{Intersection: &adminpb.GcRule_Intersection{Rules: rs}}}
	}
	for _, c := range []struct {
		rule *adminpb.GcRule
		want schemafile.Family
		note string
	}{
		{nil, schemafile.Family{Strategy: "unmanaged"}, "no GC rule"},
		{age(time.Second), schemafile.Family{Strategy: "one-second"}, "default-expiry family with ttl 1s"},
		{age(48 * time.Hour), schemafile.Family{Strategy: "default-expiry", TTL: "2d"}, ""},
		{age(90 * time.Minute), schemafile.Family{Strategy: "default-expiry", TTL: "1h30m"}, ""},
		{vers(3), schemafile.Family{Strategy: "sequence", Versions: 3}, "plain versioned family"},
		{union(age(time.Hour), vers(2)), schemafile.Family{Strategy: "default-expiry", TTL: "1h", MaxVersions: 2}, ""},
		{union(age(time.Second), vers(1)), schemafile.Family{Strategy: "one-second", MaxVersions: 1}, "ttl 1s"},
	} {
		got := classify(c.rule)
		require.True(t, got.ok, "%v", c.rule)
		assert.Equal(t, c.want, got.family, "%v", c.rule)
		assert.Contains(t, got.note, c.note, "%v", c.rule)
		_, err := got.family.Policy()
		assert.NoError(t, err, "schemafile reads it back")
	}
	for _, r := range []*adminpb.GcRule{inter(age(time.Hour), vers(2)), union(vers(2), inter(age(time.Hour), vers(1))), age(1500 * time.Microsecond)} {
		got := classify(r)
		assert.False(t, got.ok, "%v", r)
		assert.Contains(t, got.note, "fits no bttl strategy")
	}
}

// Acceptance 7: init over tables the real cbt made, one per strategy's
// rule and one family with an intersection rule, writes a file verify
// accepts; the family it could not classify is named.
func TestInitWritesSchemaVerifyAccepts(t *testing.T) {
	addr := startCBTEmulator(t)
	cbt(t, addr, "createtable", "sessions", "families=session:maxage=1s")
	cbt(t, addr, "createtable", "clicks", "families=click:maxage=2d,recent:maxage=1h||maxversions=2")
	cbt(t, addr, "createtable", "docs", "families=doc:maxversions=3")
	cbt(t, addr, "createfamily", "docs", "meta")
	cbt(t, addr, "createfamily", "docs", "odd")
	cbt(t, addr, "setgcpolicy", "docs", "odd", "maxage=1h", "and", "maxversions=2")
	out := filepath.Join(t.TempDir(), "schema.yaml")

	r := bttl(t, addr, "", "-schema", out, "init")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, "wrote "+out+": 3 table(s)\n", r.stdout)
	assert.Contains(t, r.stderr, `bttl init: could not classify table "docs", family "odd": rule intersection(max_age=1h, max_versions=2) fits no bttl strategy`)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	file := string(data)
	t.Logf("%s", file)
	for _, want := range []string{
		`# table "docs", family "odd": rule intersection(max_age=1h, max_versions=2) fits no bttl strategy`,
		`session: {strategy: one-second}`,
		`or a default-expiry family with ttl 1s`,
		`click: {strategy: default-expiry, ttl: 2d}`,
		`doc: {strategy: sequence, versions: 3}`,
		`meta: {strategy: unmanaged}`,
	} {
		assert.Contains(t, file, want)
	}
	schemas, err := schemafile.Load(out)
	require.NoError(t, err)
	assert.NotContains(t, schemas["docs"], "odd")
	assert.Equal(t, "default-expiry(D=1h0m0s)+maxversions(2)", schemas["clicks"]["recent"].String())

	r = bttl(t, addr, "", "-schema", out, "verify")
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Equal(t, "table \"clicks\": ok\ntable \"docs\": ok\ntable \"sessions\": ok\n", r.stdout)

	// init does not overwrite a file unless forced.
	r = bttl(t, addr, "", "-schema", out, "init")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "-force")
	r = bttl(t, addr, "", "-schema", out, "init", "-force", "-table", "docs")
	assert.Equal(t, exitOK, r.code, r.stderr)
	r = bttl(t, addr, "", "init", "-table", "sessions")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "sessions:\n")
}

// A refused connection was reported as silence for 30-60 s, then as a stall
// ("no answer ... (-stall)", "scan: SampleRowKeys:" twice). It is reported at
// once as a refusal, naming the endpoint and where it came from, without
// -timeout (issue 35 item 6).
func TestRefusedConnectionIsReportedAtOnce(t *testing.T) {
	schema := writeFile(t, "s.yaml", "tables: {t: {f: {strategy: sequence, versions: 1}}}\n")
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"127.0.0.1:1", []string{"audit"}, "cannot connect to 127.0.0.1:1 (BIGTABLE_EMULATOR_HOST): connection refused"},
		{"127.0.0.1:1", []string{"verify"}, "cannot connect to 127.0.0.1:1 (BIGTABLE_EMULATOR_HOST): connection refused"},
		{"", []string{"verify", "-data-endpoint", "127.0.0.1:1"}, "cannot connect to 127.0.0.1:1 (-data-endpoint): connection refused"},
	} {
		t.Setenv("BIGTABLE_EMULATOR_HOST", c.env)
		start := time.Now()
		r := runRaw(context.Background(), append([]string{"-project", "p", "-instance", "i", "-schema", schema}, c.args...)...)
		assert.Equal(t, exitError, r.code, "%q: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, "%q", c.args)
		assert.NotContains(t, r.stderr, "SampleRowKeys", "%q", c.args)
		assert.Less(t, time.Since(start), 5*time.Second, "%q: at once", c.args)
	}
}

// A stalled SampleRowKeys was reported with its step twice ("scan:
// SampleRowKeys: scan: SampleRowKeys: no answer ...") (issue 35 item 6).
func TestStalledSampleRowKeysSaysItOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // takes connections, never answers
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	schema := writeFile(t, "s.yaml", "tables: {t: {f: {strategy: sequence, versions: 1}}}\n")
	r := bttl(t, ln.Addr().String(), "", "-schema", schema, "audit", "-stall", "300ms")
	assert.Equal(t, exitError, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no answer from "+ln.Addr().String())
	assert.Equal(t, 1, strings.Count(r.stderr, "SampleRowKeys"), r.stderr)
}
