package expiry_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/changestream/gclag"
	"github.com/bttl/bttl/strategy"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// cellID names a cell: row, family, column, timestamp.
type cellID struct {
	Row, Family, Column string
	TS                  bigtable.Timestamp
}

func (c cellID) String() string { return fmt.Sprintf("%s/%s:%s@%d", c.Row, c.Family, c.Column, c.TS) }

func idOf(e expiry.Event) cellID {
	return cellID{string(e.RowKey), e.Family, e.Column, bigtable.Timestamp(e.Timestamp.UnixMicro())}
}

// rig is a change-stream server holding the watched table "t", the index
// "idx" and the consumers' store "state", with the events and GC records
// every worker of it reported.
type rig struct {
	t      testing.TB
	srv    *changestreams.Server
	clock  *manualClock
	client *bigtable.Client
	admin  *bigtable.AdminClient
	schema strategy.Schema
	dial   func() *grpc.ClientConn

	mu      sync.Mutex
	events  []expiry.Event
	gc      []gclag.Event
	seen    map[string]bool // distinct changes handled, by commit time and row
	failAck func(expiry.Event) bool
}

func newRig(t testing.TB, schema strategy.Schema, split ...string) *rig {
	return newRigClock(t, schema, &manualClock{t: t0}, split...)
}

// newRigClock is newRig on clk; a nil clk is real time (r.clock nil).
func newRigClock(t testing.TB, schema strategy.Schema, clk *manualClock, split ...string) *rig {
	ctx := context.Background()
	cfg := changestreams.Config{SplitKeys: split}
	if clk != nil {
		cfg.Clock = clk
	}
	srv, err := changestreams.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	var conns []*grpc.ClientConn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	dial := func() *grpc.ClientConn {
		// Loopback, as the benchmarks in BENCHMARKS.md were measured.
		conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		conns = append(conns, conn)
		return conn
	}
	admin, err := bigtable.NewAdminClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(dial()))
	require.NoError(t, err)
	fams := map[string]bigtable.GCPolicy{}
	for f, p := range schema {
		fams[f] = p.GCPolicy()
	}
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", Families: fams}))
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "idx", Families: map[string]bigtable.GCPolicy{
		expiry.TimerFamily: bigtable.NoGcPolicy(), expiry.LeaseFamily: bigtable.NoGcPolicy(), expiry.ExpiredFamily: bigtable.NoGcPolicy()}}))
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "state", Families: map[string]bigtable.GCPolicy{"cs": bigtable.NoGcPolicy()}}))
	client, err := bigtable.NewClientWithConfig(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(dial()))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	return &rig{t: t, srv: srv, clock: clk, client: client, admin: admin, schema: schema, dial: dial, seen: map[string]bool{}}
}

func (r *rig) store() changestream.Store {
	return changestream.NewBigtableStore(r.client.Open("state"), "cs", "t#")
}

// worker is one process: a consumer of t's stream feeding a notifier and a
// GC recorder, and the notifier's Run.
type worker struct {
	cancel context.CancelFunc
	done   chan error
}

func (r *rig) startWorker(i, n int, opts ...expiry.Option) *worker {
	t := r.t
	store := r.store()
	rec, err := gclag.New("t", r.schema, gclag.WithCallback(func(e gclag.Event) {
		r.mu.Lock()
		r.gc = append(r.gc, e)
		r.mu.Unlock()
	}))
	require.NoError(t, err)
	cb := func(ctx context.Context, e expiry.Event) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, e)
		if r.failAck != nil && r.failAck(e) {
			return errAck
		}
		return nil
	}
	base := []expiry.Option{expiry.WithClock(r.clock), expiry.WithWorker(i, n), expiry.WithPollInterval(3 * time.Millisecond), expiry.WithLease(10 * time.Second)}
	nt, err := expiry.New(r.client, "t", r.schema, "idx", store, cb, append(base, opts...)...)
	require.NoError(t, err)
	c, err := changestream.NewConsumer(r.dial(), changestreams.DefaultProject, changestreams.DefaultInstance, "t", store,
		changestream.WithClock(r.clock), changestream.WithStartTime(t0), changestream.WithWorker(i, n),
		changestream.WithPollInterval(3*time.Millisecond), changestream.WithHeartbeat(20*time.Millisecond),
		changestream.WithLease(10*time.Second), changestream.WithCheckpointEvery(3))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{cancel: cancel, done: make(chan error, 2)}
	go func() {
		w.done <- c.Run(ctx, func(ctx context.Context, ch changestream.Change) error {
			if err := rec.Handle(ctx, ch); err != nil {
				return err
			}
			if err := nt.Handle(ctx, ch); err != nil {
				return err
			}
			r.mu.Lock()
			r.seen[fmt.Sprint(ch.CommitTime.UnixNano(), string(ch.RowKey), ch.Type)] = true
			r.mu.Unlock()
			return nil
		})
	}()
	go func() { w.done <- runUntilCancelled(ctx, nt) }()
	return w
}

var errAck = errors.New("ack lost")

// runUntilCancelled runs the notifier, starting it again after a failed
// acknowledgement, as a supervisor restarts a crashed process.
func runUntilCancelled(ctx context.Context, nt *expiry.Notifier) error {
	for {
		err := nt.Run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !isAck(err) {
			return err
		}
	}
}

func isAck(err error) bool { return errors.Is(err, errAck) }

// kill stops a worker at whatever point it is.
func (w *worker) kill(t testing.TB) {
	w.cancel()
	for i := 0; i < 2; i++ {
		err := <-w.done
		if err != nil && err != context.Canceled {
			t.Errorf("worker ended with %v", err)
		}
	}
}

// waitStream waits until the workers handled every change of t.
func (r *rig) waitStream() {
	r.t.Helper()
	want := r.srv.Records("t")
	r.waitFor(fmt.Sprintf("%d changes handled", want), func() bool { return len(r.seen) >= want })
}

// waitFor waits, bounded, for cond (called with r.mu held).
func (r *rig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// announced is the distinct cells announced so far, sorted.
func (r *rig) announced() []cellID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return distinct(r.events)
}

func distinct(evs []expiry.Event) []cellID {
	set := map[cellID]bool{}
	for _, e := range evs {
		set[idOf(e)] = true
	}
	out := make([]cellID, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sortIDs(out)
	return out
}

func sortIDs(ids []cellID) {
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
}

// record keeps an event.
func (r *rig) record(ctx context.Context, e expiry.Event) error {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	return nil
}
