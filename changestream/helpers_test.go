package changestream_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// manualClock is a clock tests move by hand.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *manualClock {
	return &manualClock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	srv   *changestreams.Server
	clock *manualClock
	conn  *grpc.ClientConn
	tbl   *bigtable.Table
	start time.Time
}

// newEnv starts a change-stream server with a table "t" whose family "f"
// has gc, and a client on it.
func newEnv(t *testing.T, cfg changestreams.Config, gc bigtable.GCPolicy) *env {
	t.Helper()
	ctx := context.Background()
	clk := newClock()
	cfg.Clock = clk
	srv, err := changestreams.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		return conn
	}
	admin, err := bigtable.NewAdminClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(dial()))
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close() })
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", Families: map[string]bigtable.GCPolicy{"f": gc}}))
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "state", Families: map[string]bigtable.GCPolicy{"cs": bigtable.NoGcPolicy()}}))
	client, err := bigtable.NewClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(dial()))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	conn := dial()
	t.Cleanup(func() { conn.Close() })
	return &env{srv: srv, clock: clk, conn: conn, tbl: client.Open("t"), start: clk.Now()}
}

// set writes row's column f:c at ts (ms) and advances the clock a
// millisecond, so commit times differ.
func (e *env) set(t *testing.T, row string, ts int64, value string) {
	t.Helper()
	m := bigtable.NewMutation()
	m.Set("f", "c", bigtable.Timestamp(ts*1000), []byte(value))
	require.NoError(t, e.tbl.Apply(context.Background(), row, m))
	e.clock.Advance(time.Millisecond)
}

func (e *env) deleteRow(t *testing.T, row string) {
	t.Helper()
	m := bigtable.NewMutation()
	m.DeleteRow()
	require.NoError(t, e.tbl.Apply(context.Background(), row, m))
	e.clock.Advance(time.Millisecond)
}

// sink collects delivered changes by a name: row key and commit time.
type sink struct {
	mu     sync.Mutex
	counts map[string]int
	order  []string
	all    []changestream.Change
}

func newSink() *sink { return &sink{counts: map[string]int{}} }

func name(c changestream.Change) string {
	return fmt.Sprintf("%s@%s/%s", c.RowKey, c.CommitTime.Format("15:04:05.000"), c.Type)
}

func (s *sink) handle(ctx context.Context, c changestream.Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := name(c)
	s.counts[n]++
	s.order = append(s.order, n)
	s.all = append(s.all, c)
	return nil
}

func (s *sink) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.counts)
}

func (s *sink) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.counts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *sink) dups() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, n := range s.counts {
		if n > 1 {
			out[k] = n
		}
	}
	return out
}

// waitFor polls cond until it holds or 20 s pass: the consumer runs on
// its own goroutines, so the test can only observe it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// run starts a consumer's Run; stop cancels it and returns Run's error.
func run(t *testing.T, c *changestream.Consumer, h changestream.Handler) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx, h) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(20 * time.Second):
				err = fmt.Errorf("Run did not return")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// fastOpts are options for tests: the env's clock, a start time before
// every write (Run may start after the first writes), short waits.
func fastOpts(e *env, extra ...changestream.Option) []changestream.Option {
	return append([]changestream.Option{
		changestream.WithClock(e.clock),
		changestream.WithStartTime(e.start),
		changestream.WithHeartbeat(200 * time.Millisecond),
		changestream.WithPollInterval(5 * time.Millisecond),
		changestream.WithLease(time.Minute),
		changestream.WithBackoff(time.Millisecond, 5*time.Millisecond),
		changestream.WithRPCTimeout(10 * time.Second),
	}, extra...)
}

func optConn(t *testing.T, e *env) option.ClientOption {
	conn, err := grpc.NewClient(e.srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return option.WithGRPCConn(conn)
}
