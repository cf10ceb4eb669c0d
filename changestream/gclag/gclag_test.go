package gclag_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/gclag"
	"github.com/bttl/bttl/strategy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// GC on the test server deletes expired cells of a default-expiry and a
// one-second family and an old version of an unmanaged family; the
// recorder reports the two managed cells with their exact lag, as
// events, JSON lines and histogram samples, and nothing for the unmanaged
// one nor for live cells.
func TestGCLag(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	schema := strategy.Schema{
		"d": strategy.DefaultExpiry(time.Hour),
		"o": strategy.OneSecond(),
		"u": strategy.Unmanaged(),
	}
	srv, err := changestreams.Start(ctx, changestreams.Config{Clock: clk})
	require.NoError(t, err)
	defer srv.Close()
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	admin, err := bigtable.NewAdminClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(dial()))
	require.NoError(t, err)
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", Families: map[string]bigtable.GCPolicy{
		"d": schema["d"].GCPolicy(), "o": schema["o"].GCPolicy(), "u": bigtable.MaxVersionsPolicy(1),
	}}))
	client, err := bigtable.NewClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(dial()))
	require.NoError(t, err)
	tbl := client.Open("t")
	now := clk.Now()
	ms := func(t time.Time) bigtable.Timestamp { return bigtable.Time(t).TruncateToMilliseconds() }
	m := bigtable.NewMutation()
	m.Set("d", "old", ms(now.Add(-90*time.Minute)), []byte("x")) // expired 30 min ago
	m.Set("d", "new", ms(now.Add(-30*time.Minute)), []byte("x")) // live for 30 min
	m.Set("o", "sess", ms(now.Add(10*time.Second)), []byte("x")) // expires in 10 s
	m.Set("u", "v", ms(now.Add(-time.Hour)), []byte("1"))
	m.Set("u", "v", ms(now), []byte("2"))
	require.NoError(t, tbl.Apply(ctx, "r", m))

	reg := prometheus.NewRegistry()
	var out bytes.Buffer
	var mu sync.Mutex
	var events []gclag.Event
	rec, err := gclag.New("t", schema, gclag.WithRegisterer(reg), gclag.WithJSONLines(&out),
		gclag.WithCallback(func(e gclag.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }))
	require.NoError(t, err)
	c, err := changestream.NewConsumer(dial(), changestreams.DefaultProject, changestreams.DefaultInstance, "t",
		changestream.NewMemoryStore(), changestream.WithClock(clk), changestream.WithStartTime(now),
		changestream.WithPollInterval(5*time.Millisecond), changestream.WithHeartbeat(200*time.Millisecond))
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx, rec.Handle) }()

	clk.Advance(20 * time.Second) // the one-second cell expired 10 s ago
	n, err := srv.RunGC(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, 3, n, "d:old, o:sess and u's older version")
	gcAt := clk.Now()

	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := len(events)
		mu.Unlock()
		if got >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, events, 2)
	byFam := map[string]gclag.Event{}
	for _, e := range events {
		byFam[e.Family] = e
		assert.Equal(t, gcAt, e.Commit)
	}
	assert.Equal(t, 30*time.Minute+20*time.Second, byFam["d"].Lag)
	assert.Equal(t, "old", byFam["d"].Column)
	assert.Equal(t, 10*time.Second, byFam["o"].Lag)
	assert.Equal(t, "r", string(byFam["o"].RowKey))

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &line))
	assert.Contains(t, []any{1820.0, 10.0}, line["lag_seconds"])
	_, err = time.Parse(time.RFC3339, line["commit_time"].(string))
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(line["commit_time"].(string), "Z"), "UTC")

	assert.Equal(t, 2, testutil.CollectAndCount(reg, gclag.MetricName))
	h, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, h, 1)
	for _, m := range h[0].Metric {
		assert.Equal(t, uint64(1), m.GetHistogram().GetSampleCount())
		sum := m.GetHistogram().GetSampleSum()
		assert.Contains(t, []float64{1820, 10}, sum)
	}
}

// A second recorder on the same registry shares the histogram.
func TestSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := gclag.New("a", strategy.Schema{"f": strategy.OneSecond()}, gclag.WithRegisterer(reg))
	require.NoError(t, err)
	_, err = gclag.New("b", strategy.Schema{"f": strategy.OneSecond()}, gclag.WithRegisterer(reg))
	require.NoError(t, err)
}
