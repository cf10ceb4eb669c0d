package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
)

type result struct {
	code           int
	stdout, stderr string
}

// bttl runs the command in-process against the emulator at addr.
func bttl(t *testing.T, addr, stdin string, args ...string) result {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"-project", "p", "-instance", "i"}, args...), strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// newServer starts an in-process server with no harness clients: the
// command dials it through BIGTABLE_EMULATOR_HOST.
func newServer(t *testing.T) (*bigtable.AdminClient, *bigtable.Client, string) {
	t.Helper()
	return newServerWith(t)
}

// newServerWith is newServer on a server with opts (interceptors that
// stall, fail or record calls).
func newServerWith(t *testing.T, opts ...grpc.ServerOption) (*bigtable.AdminClient, *bigtable.Client, string) {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{ServerOptions: opts})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	t.Setenv("BIGTABLE_EMULATOR_HOST", h.Addr)
	ctx := context.Background()
	ac, err := bigtable.NewAdminClient(ctx, "p", "i")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ac.Close() })
	dc, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dc.Close() })
	return ac, dc, h.Addr
}

const schemaYAML = `
tables:
  events:
    session: {strategy: one-second}
    clicks: {strategy: default-expiry, ttl: 48h}
    doc: {strategy: sequence, versions: 2}
`

func TestVerifyPlanApply(t *testing.T) {
	ac, _, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", ColumnFamilies: map[string]bigtable.Family{
		"clicks": {GCPolicy: bigtable.MaxAgePolicy(24 * time.Hour)},
		"doc":    {GCPolicy: bigtable.MaxAgePolicy(time.Hour)},
	}}))
	schema := writeFile(t, "schema.yaml", schemaYAML)

	r := bttl(t, addr, "", "-schema", schema, "verify")
	assert.Equal(t, exitFindings, r.code, r.stderr)
	assert.Contains(t, r.stdout, `family "clicks" (default-expiry(D=48h0m0s)): wrong max age: expected max_age=2d, actual max_age=1d`)
	assert.Contains(t, r.stdout, `family "doc" (sequence(N=2)): age rule on a sequence family`)
	assert.Contains(t, r.stdout, `family "session" (one-second): missing family`)

	r = bttl(t, addr, "", "-schema", schema, "plan")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `create family "session" with max_age=1s`)
	assert.Contains(t, r.stdout, "max_age=1d -> max_age=2d [raises]")
	assert.Contains(t, r.stdout, "caveat (replicated tables)")

	r = bttl(t, addr, "n\n", "-schema", schema, "apply")
	assert.Equal(t, exitFindings, r.code)
	assert.Contains(t, r.stdout, "Apply these changes to 1 table(s)? [y/N]")
	assert.Contains(t, r.stdout, "aborted: nothing changed")
	assert.Equal(t, exitFindings, bttl(t, addr, "", "-schema", schema, "verify").code)

	r = bttl(t, addr, "y\n", "-schema", schema, "apply")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "applying:")
	r = bttl(t, addr, "", "-schema", schema, "verify")
	assert.Equal(t, exitOK, r.code, r.stdout)
	assert.Equal(t, "table \"events\": ok\n", r.stdout)

	r = bttl(t, addr, "", "-schema", schema, "apply", "-yes")
	assert.Equal(t, exitOK, r.code)
	assert.Equal(t, "table \"events\": no change (every family matches the schema)\n", r.stdout)
}

func TestUsageErrors(t *testing.T) {
	schema := writeFile(t, "s.json", `{"tables": {"t": {"f": {"strategy": "unmanaged"}}}}`)
	for name, args := range map[string][]string{
		"no command":      {"-schema", schema},
		"unknown command": {"-schema", schema, "frobnicate"},
		"no schema":       {"verify"},
		"bad schema":      {"-schema", writeFile(t, "bad.yaml", "tables: {t: {f: {strategy: nope}}}"), "verify"},
		"unknown table":   {"-schema", schema, "verify", "-table", "other"},
		"prefix & start":  {"-schema", schema, "audit", "-prefix", "a", "-start", "b"},
	} {
		r := bttl(t, "127.0.0.1:1", "", args...)
		assert.Equal(t, exitError, r.code, name)
		assert.NotEmpty(t, r.stderr, name)
	}
}

func TestAuditCountsEachKind(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	// Created without re-setting the rules: bttest then runs no GC, so
	// expired cells stay put for the test.
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", ColumnFamilies: map[string]bigtable.Family{
		"session": {GCPolicy: bigtable.MaxAgePolicy(time.Second)},
		"clicks":  {GCPolicy: bigtable.MaxAgePolicy(48 * time.Hour)},
		"doc":     {GCPolicy: bigtable.MaxVersionsPolicy(2)},
		"extra":   {GCPolicy: bigtable.NoGcPolicy()},
	}}))
	now := bigtable.Now().TruncateToMilliseconds()
	hour := bigtable.Timestamp(time.Hour / time.Microsecond)
	tbl := dc.Open("events")
	m := bigtable.NewMutation()
	m.Set("session", "live", now+hour, []byte("12345"))
	m.Set("session", "real", now-hour, []byte("123"))      // a real timestamp
	m.Set("clicks", "old", now-49*hour, []byte("1234567")) // expired an hour ago
	m.Set("clicks", "older", now-50*hour, []byte("12"))    // expired two hours ago
	m.Set("clicks", "fresh", now, []byte("1"))             // live
	for v := bigtable.Timestamp(1); v <= 4; v++ {
		m.Set("doc", "body", v*1000, []byte("vv"))
	}
	m.Set("extra", "x", now, []byte("x"))
	require.NoError(t, tbl.Apply(ctx, "row1", m))
	m = bigtable.NewMutation()
	m.Set("clicks", "fresh", now, []byte("1"))
	require.NoError(t, tbl.Apply(ctx, "row2", m))

	schema := writeFile(t, "schema.yaml", schemaYAML)
	r := bttl(t, addr, "", "-schema", schema, "audit", "-bytes", "-json", "-progress", "1ns")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "scanned 2 rows, 11 cells", "the last progress line counts every row")
	var got struct{ Tables []audit.Report }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Len(t, got.Tables, 1)
	rep := got.Tables[0]
	assert.Equal(t, int64(2), rep.Rows)
	assert.Equal(t, int64(11), rep.Cells)
	assert.Zero(t, rep.RowsOver100MB)
	fams := map[string]audit.Family{}
	for _, f := range rep.Families {
		fams[f.Family] = f
	}
	s := fams["session"]
	assert.Equal(t, int64(1), s.Live)
	assert.Equal(t, int64(1), s.Expired)
	assert.Equal(t, int64(3), s.ExpiredBytes)
	assert.Equal(t, int64(1), s.AtOrBeforeNow)
	require.NotNil(t, s.AtOrBeforeNowExample)
	assert.Equal(t, audit.Cell{Row: "row1", Column: "real", Timestamp: now - hour}, *s.AtOrBeforeNowExample)
	c := fams["clicks"]
	assert.Equal(t, int64(2), c.Live)
	assert.Equal(t, int64(2), c.Expired)
	assert.Equal(t, int64(9), c.ExpiredBytes)
	assert.Equal(t, now-50*hour+48*hour, c.OldestExpiry)
	assert.Zero(t, c.AtOrBeforeNow, "real timestamps are normal in a default-expiry family")
	d := fams["doc"]
	assert.Equal(t, int64(2), d.Live)
	assert.Equal(t, int64(2), d.BeyondKept)
	assert.Equal(t, int64(4), d.BeyondKeptBytes)
	assert.Equal(t, "not in schema", fams["extra"].Strategy)
	assert.Equal(t, int64(1), fams["extra"].Live)

	r = bttl(t, addr, "", "-schema", schema, "audit", "-bytes", "-progress", "0")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	// session is on its one-second rule: its cell at or before now is an
	// expired one, not a real timestamp an adoption would delete.
	assert.NotContains(t, r.stdout, "a one-second adoption would delete them at once")
	for _, want := range []string{
		`! family "session": 1 expired cell(s), 3 bytes, not yet collected by GC`,
		`! family "clicks": 2 expired cell(s), 9 bytes, not yet collected by GC`,
		`! family "doc": 2 cell(s), 4 bytes, beyond the 2 versions kept per column`,
	} {
		assert.Contains(t, r.stdout, want)
	}

	// A range and a limit scope the scan.
	r = bttl(t, addr, "", "-schema", schema, "audit", "-json", "-prefix", "row2")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	assert.Equal(t, int64(1), got.Tables[0].Rows)
	r = bttl(t, addr, "", "-schema", schema, "audit", "-json", "-limit", "1")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	assert.Equal(t, int64(1), got.Tables[0].Rows)
}

// Acceptance 3: cells written by the real cbt CLI carry the server's
// timestamp; audit flags them and apply refuses the one-second adoption
// unless forced.
func TestCBTServerTimestampsBlockOneSecondAdoption(t *testing.T) {
	addr := startCBTEmulator(t)
	cbt(t, addr, "createtable", "legacy")
	cbt(t, addr, "createfamily", "legacy", "sess")
	cbt(t, addr, "set", "legacy", "user#1", "sess:token=abc")
	cbt(t, addr, "set", "legacy", "user#2", "sess:token=def")
	assert.Contains(t, cbt(t, addr, "read", "legacy"), "user#2")
	schema := writeFile(t, "schema.json", `{"tables": {"legacy": {"sess": {"strategy": "one-second"}}}}`)

	r := bttl(t, addr, "", "-schema", schema, "audit", "-json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var got struct{ Tables []audit.Report }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Len(t, got.Tables[0].Families, 1)
	assert.Equal(t, int64(2), got.Tables[0].Families[0].AtOrBeforeNow)
	r = bttl(t, addr, "", "-schema", schema, "audit")
	assert.Contains(t, r.stdout, `! family "sess" (one-second): 2 cell(s) with timestamps at or before now`)
	assert.Contains(t, r.stdout, "a one-second adoption would delete them at once")

	r = bttl(t, addr, "", "-schema", schema, "apply", "-yes")
	assert.Equal(t, exitFindings, r.code)
	assert.Contains(t, r.stderr, "-force")
	assert.Contains(t, r.stdout, "one-second expiry would delete cells with real timestamps")
	assert.Equal(t, exitFindings, bttl(t, addr, "", "-schema", schema, "verify").code, "nothing changed")
	assert.Contains(t, cbt(t, addr, "ls", "legacy"), "sess")

	r = bttl(t, addr, "", "-schema", schema, "apply", "-yes", "-force")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "forced:")
	assert.Equal(t, exitOK, bttl(t, addr, "", "-schema", schema, "verify").code)
}
