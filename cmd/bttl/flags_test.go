package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Flags after the positional arguments (bttl read TABLE -json, as with the go
// command) were taken as arguments: "want TABLE". They are flags until "--",
// after which "-x" is a row key (issue 35 item 6).
func TestFlagsAfterArguments(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"session": {}, "doc": {}, "raw": {},
	}}))
	schemaPath := writeFile(t, "schema.yaml", lookupSchemaYAML)
	for _, k := range []string{"a", "-x"} {
		m := bigtable.NewMutation()
		m.Set("raw", "x", 1000, []byte(k))
		require.NoError(t, dc.Open("users").Apply(ctx, k, m))
	}
	r := bttl(t, addr, "", "-schema", schemaPath, "read", "users", "-json", "-count", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	var j rowJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &j), r.stdout)
	r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "users", "a", "-json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &j), r.stdout)
	assert.Equal(t, "a", *j.Row)
	r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "-json", "--", "users", "-x")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &j), r.stdout)
	assert.Equal(t, "-x", *j.Row)
	r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "users", "a", "-bogus")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "flag provided but not defined: -bogus", "a clear usage error naming the flag")
}

// A bad -metrics-out path was found after the whole scan. It is a usage error
// before any client exists (issue 35 item 6).
func TestAuditBadMetricsOutFoundBeforeTheScan(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1") // never reached
	schema := writeFile(t, "s.yaml", "tables: {t: {f: {strategy: one-second}}}\n")
	for _, path := range []string{filepath.Join(t.TempDir(), "missing", "m.prom"), t.TempDir()} {
		r := runRaw(context.Background(), "-project", "p", "-instance", "i", "-schema", schema, "audit", "-metrics-out", path)
		assert.Equal(t, exitError, r.code)
		assert.Contains(t, r.stderr, "bttl audit: -metrics-out: ", path)
		assert.NotContains(t, r.stderr, "connection refused", "found before dialling")
	}
}

// Migrate's flags were checked against the schema after the clients were made,
// so a missing -first-switch was reported as missing credentials. They are
// checked before any client exists (issue 35 item 6).
func TestMigrateFlagsCheckedBeforeDialling(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json"))
	schema := writeFile(t, "s.yaml", "tables: {t: {f: {strategy: one-second}}}\n")
	r := runRaw(context.Background(), "-project", "p", "-instance", "i", "-schema", schema,
		"migrate", "-table", "t", "-family", "f", "-from", "real", "-ttl", "1d")
	assert.Equal(t, exitError, r.code, r.stderr)
	assert.Contains(t, r.stderr, "-first-switch")
	assert.NotContains(t, r.stderr, "credentials")
	assert.NotContains(t, r.stderr, "client")
}
