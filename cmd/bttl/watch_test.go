package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bttl/bttl/bttest_harness/changestreams"
)

// bttl watch on the change-stream server: a one-second cell that expired
// (and GC collected) before the watch started and one that expires while
// it runs are each announced, as JSON lines with RFC 3339 UTC times; a
// live cell is not; -gc adds the collection with its lag; -timeout ends
// the watch with status 0; -redact-keys hides the keys.
func TestWatch(t *testing.T) {
	ctx := context.Background()
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	srv, err := changestreams.Start(ctx, changestreams.Config{Project: "p", Instance: "i"})
	require.NoError(t, err)
	defer srv.Close()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	admin, err := bigtable.NewAdminClient(ctx, "p", "i", option.WithGRPCConn(conn))
	require.NoError(t, err)
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", Families: map[string]bigtable.GCPolicy{
		"s": bigtable.MaxAgePolicy(time.Second), "u": bigtable.NoGcPolicy()}}))
	client, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(conn))
	require.NoError(t, err)
	defer client.Close()
	schema := writeFile(t, "schema.yaml", "tables:\n  t:\n    s:\n      strategy: one-second\n    u:\n      strategy: unmanaged\n")

	start := time.Now().Add(-time.Minute).UTC()
	ms := func(t time.Time) bigtable.Timestamp { return bigtable.Time(t).TruncateToMilliseconds() }
	m := bigtable.NewMutation()
	m.Set("s", "old", ms(time.Now().Add(-10*time.Second)), []byte("x")) // expired before the watch
	m.Set("s", "soon", ms(time.Now().Add(1500*time.Millisecond)), []byte("x"))
	m.Set("s", "live", ms(time.Now().Add(time.Hour)), []byte("x"))
	m.Set("u", "plain", ms(time.Now().Add(-time.Hour)), []byte("x"))
	require.NoError(t, client.Open("t").Apply(ctx, "secret-row", m))
	_, err = srv.RunGC(ctx, "t")
	require.NoError(t, err)

	r := bttl(t, srv.Addr, "", "-timeout", "5s", "watch", "-schema", schema, "-start", start.Format(time.RFC3339), "-poll", "50ms", "-gc", "t")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "stopped at -timeout")
	got := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		got[ev["event"].(string)+" "+ev["column"].(string)] = ev
	}
	require.Contains(t, got, "expired old")
	require.Contains(t, got, "expired soon")
	require.Contains(t, got, "gc old")
	assert.NotContains(t, got, "expired live")
	assert.NotContains(t, got, "expired plain")
	assert.Len(t, got, 3)
	for _, ev := range got {
		for _, f := range []string{"timestamp", "expiry"} {
			ts, ok := ev[f].(string)
			require.True(t, ok, "%s in %v", f, ev)
			_, err := time.Parse(time.RFC3339Nano, ts)
			require.NoError(t, err)
			assert.True(t, strings.HasSuffix(ts, "Z"), "UTC: %s", ts)
		}
		assert.Equal(t, `"secret-row"`, ev["key"])
	}
	soon := got["expired soon"]
	assert.Less(t, soon["delay_seconds"].(float64), 2.0, "announced within seconds of its instant")
	assert.Greater(t, got["gc old"]["lag_seconds"].(float64), 0.0)

	// Resumed from its state, redacted: no key in clear.
	m = bigtable.NewMutation()
	m.Set("s", "again", ms(time.Now().Add(500*time.Millisecond)), []byte("x"))
	require.NoError(t, client.Open("t").Apply(ctx, "secret-row", m))
	r = bttl(t, srv.Addr, "", "-timeout", "4s", "watch", "-schema", schema, "-poll", "50ms", "-redact-keys", "t")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"column":"again"`)
	assert.NotContains(t, r.stdout, "secret-row")
	assert.NotContains(t, r.stdout, "row_key")
	assert.Contains(t, r.stdout, `[redacted 10 bytes hmac:`)
}

// Usage errors exit 2 before any client exists.
func TestWatchUsage(t *testing.T) {
	schema := writeFile(t, "schema.yaml", "tables:\n  t:\n    s:\n      strategy: one-second\n")
	for _, args := range [][]string{
		{"watch", "-schema", schema},
		{"watch", "-schema", schema, "other"},
		{"watch", "-schema", schema, "-poll", "0s", "t"},
		{"watch", "-schema", schema, "-state", "bad/name", "t"},
		{"watch", "-schema", schema, "-worker", "2/2", "t"},
	} {
		r := bttl(t, "127.0.0.1:1", "", args...)
		assert.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
	}
}

// A -state table made before the index had family x (announced cells
// awaiting their GC record) is refused, naming the family, before any
// stream is read: exit 2.
func TestWatchStateWithoutExpiredFamily(t *testing.T) {
	ctx := context.Background()
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	srv, err := changestreams.Start(ctx, changestreams.Config{Project: "p", Instance: "i"})
	require.NoError(t, err)
	defer srv.Close()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	admin, err := bigtable.NewAdminClient(ctx, "p", "i", option.WithGRPCConn(conn))
	require.NoError(t, err)
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", Families: map[string]bigtable.GCPolicy{
		"s": bigtable.MaxAgePolicy(time.Second)}}))
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "bttl_watch", Families: map[string]bigtable.GCPolicy{
		"t": bigtable.NoGcPolicy(), "l": bigtable.NoGcPolicy(), watchStreamFamily: bigtable.NoGcPolicy()}}))
	schema := writeFile(t, "schema.yaml", "tables:\n  t:\n    s:\n      strategy: one-second\n")

	r := bttl(t, srv.Addr, "", "-timeout", "5s", "watch", "-schema", schema, "t")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stderr, `-state table "bttl_watch" has no family "x"`)
}
