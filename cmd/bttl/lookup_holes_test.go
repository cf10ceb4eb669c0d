package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// Issue 35 item 7: bttl read -json stopped at a cell whose expiry is past
// year 9999 and exited 0 with the rest of the range missing; lookup and
// read printed a negative remaining TTL for cells expiring more than ~292
// years out. Every row now comes out, each remaining TTL a bound, not a
// negative.
func TestReadFarFutureExpiryShowsEveryRow(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"session": {}, "doc": {}, "raw": {},
	}}))
	schemaPath := writeFile(t, "schema.yaml", lookupSchemaYAML)
	tbl := dc.Open("users")
	far := bigtable.Timestamp(time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	for i, k := range []string{"a", "b", "c"} {
		m := bigtable.NewMutation()
		ts := bigtable.Time(time.Now().Add(time.Hour)).TruncateToMilliseconds()
		if i == 1 {
			ts = far
		}
		m.Set("session", "tok", ts, []byte(k))
		require.NoError(t, tbl.Apply(ctx, k, m))
	}
	r := bttl(t, addr, "", "-schema", schemaPath, "read", "-json", "users")
	require.Equal(t, exitOK, r.code, r.stderr)
	var keys []string
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var j rowJSON
		require.NoError(t, json.Unmarshal(sc.Bytes(), &j))
		keys = append(keys, *j.Row)
		if *j.Row == "b" {
			require.Len(t, j.Cells, 1)
			assert.Equal(t, time.Duration(math.MaxInt64), j.Cells[0].Remaining)
			assert.Equal(t, 12000, j.Cells[0].Expiry.Year())
		}
	}
	assert.Equal(t, []string{"a", "b", "c"}, keys)

	r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "users", "b")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "live until +12000-01-01T00:00:00.000000Z (more than 106751d left)")
}

// failingWriter accepts n writes, then fails every one.
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

// A row read cannot write fails bttl read (exit 2, naming the row) rather
// than ending the range in silence with exit 0.
func TestReadStopsLoudlyWhenARowCannotBeWritten(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"session": {}, "doc": {}, "raw": {},
	}}))
	schemaPath := writeFile(t, "schema.yaml", lookupSchemaYAML)
	tbl := dc.Open("users")
	for _, k := range []string{"a", "b", "c"} {
		m := bigtable.NewMutation()
		m.Set("raw", "x", 1000, []byte(k))
		require.NoError(t, tbl.Apply(ctx, k, m))
	}
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	var errb bytes.Buffer
	code := run(ctx, []string{"-project", "p", "-instance", "i", "-schema", schemaPath, "read", "-json", "users"}, strings.NewReader(""), &failingWriter{n: 1}, &errb)
	assert.Equal(t, exitError, code, errb.String())
	assert.Contains(t, errb.String(), `row "b": disk full (the rows after it were not shown)`)
}

// Issue 35 items 6 and 7: bttl init proposed bttl's own checkpoint table
// as a data table, and wrote an age family holding write-time companions
// without write_time (reads through bttl would then return the companions).
func TestInitSkipsStateTableAndFindsWriteTimes(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", ColumnFamilies: map[string]bigtable.Family{
		"s": {GCPolicy: bigtable.MaxAgePolicy(time.Hour)}, "plain": {GCPolicy: bigtable.MaxAgePolicy(60 * 24 * time.Hour)},
	}}))
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "bttl_state", ColumnFamilies: map[string]bigtable.Family{
		"ck": {GCPolicy: bigtable.MaxVersionsPolicy(1)},
	}}))
	ts := bigtable.Now().TruncateToMilliseconds()
	m := bigtable.NewMutation()
	m.Set("s", "tok", ts, []byte("v"))
	m.Set("s", strategy.WriteTimeColumn("tok"), ts, strategy.WriteTimeValue(ts))
	m.Set("plain", "x", ts, []byte("v"))
	require.NoError(t, dc.Open("events").Apply(ctx, "r", m))
	ck := bigtable.NewMutation()
	ck.Set("ck", "record", 0, []byte("{}"))
	ck.Set("ck", "owner", 0, []byte("1:abc"))
	require.NoError(t, dc.Open("bttl_state").Apply(ctx, "events#x#0/1", ck))

	r := bttl(t, addr, "", "init")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "s: {strategy: default-expiry, ttl: 1h, write_time: true}")
	assert.Contains(t, r.stdout, "plain: {strategy: default-expiry, ttl: 60d}", "durations in days, and no companion: no write_time")
	assert.NotContains(t, r.stdout, "bttl_state:")
	assert.Contains(t, r.stderr, `table "bttl_state" left out: bttl's own state`)
}

// Issue 35 item 6: flags after the positional arguments (bttl read TABLE
// -json, as with the go command) were taken as arguments: "want TABLE".
// They are flags until "--", after which "-x" is a row key.
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

// Issue 35 item 6: a bad -metrics-out path was found after the whole scan.
// It is a usage error before any client exists.
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

// Suspected in issue 35 item 7, and real: a cell both expired and beyond
// the newest N was counted beyond-kept by audit and shown expired by
// lookup. Both now classify it beyond N.
func TestAuditAndLookupAgreeOnExpiredVersionsBeyondN(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"session": {}, "doc": {}, "raw": {},
	}}))
	schemaPath := writeFile(t, "schema.yaml", lookupSchemaYAML) // session keeps 1 version
	now := time.Now().UTC().Truncate(time.Millisecond)
	m := bigtable.NewMutation()
	for i, d := range []time.Duration{time.Hour, 30 * time.Minute, -time.Minute} {
		m.Set("session", "tok", bigtable.Time(now.Add(d)), []byte(fmt.Sprint(i)))
	}
	require.NoError(t, dc.Open("users").Apply(ctx, "r", m))
	at := now.Format(time.RFC3339Nano)

	r := bttl(t, addr, "", "-schema", schemaPath, "audit", "-json", "-table", "users", "-now", at)
	require.Equal(t, exitOK, r.code, r.stderr)
	var out auditOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	var beyond, expired int64
	for _, f := range out.Tables[0].Families {
		if f.Family == "session" {
			beyond, expired = f.BeyondKept, f.Expired
		}
	}
	r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "-json", "-now", at, "users", "r")
	require.Equal(t, exitOK, r.code, r.stderr)
	var j rowJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &j))
	vis := map[filters.Visibility]int64{}
	for _, c := range j.Cells {
		vis[c.Visibility]++
	}
	assert.Equal(t, int64(2), beyond)
	assert.Equal(t, beyond, vis[filters.ExcessVersion], "lookup and audit agree")
	assert.Equal(t, expired, vis[filters.Expired])
}
