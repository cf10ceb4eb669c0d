package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/bttest_harness/changestreams"
)

// newStreamServer starts the change-stream server, whose admin side keeps
// a table's change stream configuration (bttest and cbtemulator accept
// UpdateTableWithChangeStream and keep nothing), and returns an admin
// client on it and its address.
func newStreamServer(t *testing.T) (*bigtable.AdminClient, string) {
	t.Helper()
	srv, err := changestreams.Start(context.Background(), changestreams.Config{Project: "p", Instance: "i"})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	t.Setenv("BIGTABLE_EMULATOR_HOST", srv.Addr)
	ac, err := bigtable.NewAdminClient(context.Background(), "p", "i")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ac.Close() })
	return ac, srv.Addr
}

func TestApplyAndVerifyTheChangeStream(t *testing.T) {
	ac, addr := newStreamServer(t)
	on := writeFile(t, "on.yaml", `
tables:
  sessions:
    s: {strategy: one-second}
change_stream_retention:
  sessions: 7d
`)
	r := bttl(t, addr, "", "-schema", on, "plan")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "  change stream: off -> retention 7d\n")

	r = bttl(t, addr, "", "-schema", on, "apply", "-yes")
	require.Equal(t, exitOK, r.code, r.stderr)
	ti, err := ac.TableInfo(context.Background(), "sessions")
	require.NoError(t, err)
	assert.Equal(t, 7*24*time.Hour, ti.ChangeStreamRetention)

	r = bttl(t, addr, "", "-schema", on, "verify")
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Equal(t, "table \"sessions\": ok\n", r.stdout)

	// Changed behind bttl's back: verify says so.
	require.NoError(t, ac.UpdateTableWithChangeStream(context.Background(), "sessions", 2*24*time.Hour))
	r = bttl(t, addr, "", "-schema", on, "verify")
	assert.Equal(t, exitFindings, r.code, r.stderr)
	assert.Equal(t, "table \"sessions\": MISMATCH\n  change stream: expected retention 7d, actual retention 2d (bttl apply sets it)\n", r.stdout)
	require.Equal(t, exitOK, bttl(t, addr, "", "-schema", on, "apply", "-yes").code)

	// Turning it off loses the stream's records: refused without -force.
	off := writeFile(t, "off.yaml", `
tables:
  sessions:
    s: {strategy: one-second}
change_stream_retention:
  sessions: "off"
`)
	r = bttl(t, addr, "", "-schema", off, "verify")
	assert.Equal(t, exitFindings, r.code, r.stderr)
	assert.Contains(t, r.stdout, "change stream: expected off, actual retention 7d")
	r = bttl(t, addr, "", "-schema", off, "plan")
	assert.Equal(t, exitFindings, r.code, r.stderr)
	assert.Contains(t, r.stdout, "change stream: retention 7d -> off [drops the stream's records]")
	assert.Contains(t, r.stdout, "  ! bttl: table \"sessions\": change stream: retention 7d -> off")
	r = bttl(t, addr, "", "-schema", off, "apply", "-yes")
	assert.Equal(t, exitFindings, r.code)
	assert.Contains(t, r.stderr, "change stream change would drop its records")
	ti, err = ac.TableInfo(context.Background(), "sessions")
	require.NoError(t, err)
	assert.Equal(t, 7*24*time.Hour, ti.ChangeStreamRetention, "refused: nothing changed")

	r = bttl(t, addr, "", "-schema", off, "apply", "-yes", "-force")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "; forced")
	ti, err = ac.TableInfo(context.Background(), "sessions")
	require.NoError(t, err)
	assert.Nil(t, ti.ChangeStreamRetention)
	assert.Equal(t, exitOK, bttl(t, addr, "", "-schema", off, "verify").code)

	// A file without the key leaves the stream alone and verify ignores it.
	plain := writeFile(t, "plain.yaml", "tables: {sessions: {s: {strategy: one-second}}}\n")
	require.NoError(t, ac.UpdateTableWithChangeStream(context.Background(), "sessions", 24*time.Hour))
	assert.Equal(t, exitOK, bttl(t, addr, "", "-schema", plain, "verify").code)
	r = bttl(t, addr, "", "-schema", plain, "apply", "-yes")
	assert.Equal(t, "table \"sessions\": no change (every family matches the schema)\n", r.stdout)

	// -family changes families only, never the stream.
	r = bttl(t, addr, "", "-schema", off, "apply", "-yes", "-family", "s")
	assert.Equal(t, exitOK, r.code, r.stderr)
	ti, err = ac.TableInfo(context.Background(), "sessions")
	require.NoError(t, err)
	assert.Equal(t, 24*time.Hour, ti.ChangeStreamRetention)
}

func TestChangeStreamRetentionOutOfRangeIsAUsageError(t *testing.T) {
	schema := writeFile(t, "bad.yaml", "tables: {t: {f: {strategy: unmanaged}}}\nchange_stream_retention: {t: 8d}\n")
	r := bttl(t, "127.0.0.1:1", "", "-schema", schema, "verify")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "change stream retention 8d is out of range: Bigtable keeps a change stream between 1d and 7d")
}

// A table whose family and change stream both differ: verify lists both
// under one MISMATCH; apply fixes both in one run.
func TestVerifyListsFamilyAndStreamMismatches(t *testing.T) {
	ac, addr := newStreamServer(t)
	require.NoError(t, ac.CreateTableFromConf(context.Background(), &bigtable.TableConf{TableID: "sessions",
		ColumnFamilies: map[string]bigtable.Family{"s": {GCPolicy: bigtable.MaxAgePolicy(time.Hour)}}}))
	schema := writeFile(t, "s.yaml", `
tables:
  sessions:
    s: {strategy: default-expiry, ttl: 2h}
change_stream_retention:
  sessions: 3d
`)
	r := bttl(t, addr, "", "-schema", schema, "verify")
	assert.Equal(t, exitFindings, r.code, r.stderr)
	assert.Equal(t, "table \"sessions\": MISMATCH\n"+
		"  family \"s\" (default-expiry(D=2h0m0s)): wrong max age: expected max_age=2h, actual max_age=1h\n"+
		"  change stream: expected retention 3d, actual off (bttl apply sets it)\n", r.stdout)
	r = bttl(t, addr, "", "-schema", schema, "apply", "-yes")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	r = bttl(t, addr, "", "-schema", schema, "verify")
	assert.Equal(t, exitOK, r.code, r.stdout)
}

// init writes a table's change stream as it is: verify then accepts the
// table, and the file loads.
func TestInitWritesTheChangeStream(t *testing.T) {
	ac, addr := newStreamServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "sessions", ChangeStreamRetention: 36 * time.Hour,
		ColumnFamilies: map[string]bigtable.Family{"s": {GCPolicy: bigtable.MaxAgePolicy(time.Second)}}}))
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "plain",
		ColumnFamilies: map[string]bigtable.Family{"p": {GCPolicy: bigtable.MaxAgePolicy(time.Hour)}}}))
	schema := filepath.Join(t.TempDir(), "s.yaml")
	r := bttl(t, addr, "", "-schema", schema, "init")
	require.Equal(t, exitOK, r.code, r.stderr)
	b, err := os.ReadFile(schema)
	require.NoError(t, err)
	assert.Contains(t, string(b), "change_stream_retention:\n  sessions: 1d12h\n")
	assert.NotContains(t, string(b), "  plain: ", "a table without a stream is not listed")
	r = bttl(t, addr, "", "-schema", schema, "verify")
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
}
