package changestream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// One Run through writes, a delete, a split, a dropped connection and a
// merge: every change exactly once (within one Run a stream resumes from
// the last change delivered), each row's changes in commit order.
// Run with both stores.
func TestHistorySplitDropMerge(t *testing.T) {
	for _, kind := range []string{"memory", "bigtable"} {
		t.Run(kind, func(t *testing.T) { testHistory(t, kind) })
	}
}

func newStore(t *testing.T, e *env, kind string) changestream.Store {
	if kind == "memory" {
		return changestream.NewMemoryStore()
	}
	client, err := bigtable.NewClient(context.Background(), changestreams.DefaultProject, changestreams.DefaultInstance, optConn(t, e))
	require.NoError(t, err)
	return changestream.NewBigtableStore(client.Open("state"), "cs", "t#")
}

func testHistory(t *testing.T, kind string) {
	e := newEnv(t, changestreams.Config{SplitKeys: []string{"m"}}, bigtable.NoGcPolicy())
	c, err := changestream.NewConsumer(e.conn, changestreams.DefaultProject, changestreams.DefaultInstance, "t",
		newStore(t, e, kind), fastOpts(e)...)
	require.NoError(t, err)
	s := newSink()
	stop := run(t, c, s.handle)

	e.set(t, "a", 1, "1")
	e.set(t, "n", 1, "1")
	e.set(t, "z", 1, "1")
	waitFor(t, "3 changes", func() bool { return s.distinct() == 3 })

	require.NoError(t, e.srv.Split("t", "f"))
	e.set(t, "c", 2, "2")
	e.set(t, "g", 2, "2")
	waitFor(t, "5 changes after the split", func() bool { return s.distinct() == 5 })

	e.srv.DropStreams()
	e.set(t, "d", 3, "3")
	e.set(t, "x", 3, "3")
	waitFor(t, "7 changes after the drop", func() bool { return s.distinct() == 7 })

	require.NoError(t, e.srv.Merge("t", "m"))
	e.set(t, "h", 4, "4")
	e.set(t, "y", 4, "4")
	e.deleteRow(t, "a")
	waitFor(t, "10 changes after the merge", func() bool { return s.distinct() == 10 })
	assert.False(t, c.LowWatermark().IsZero(), "a running worker has a watermark")
	require.ErrorIs(t, stop(), context.Canceled)

	assert.Empty(t, s.dups(), "no change delivered twice within one Run")
	assert.Equal(t, [][2]string{{"", "f"}, {"f", ""}}, e.srv.Partitions("t"))
	// Per row, commit order.
	last := map[string]time.Time{}
	for _, ch := range s.all {
		assert.False(t, ch.CommitTime.Before(last[string(ch.RowKey)]), "row %s out of order", ch.RowKey)
		last[string(ch.RowKey)] = ch.CommitTime
		assert.Equal(t, changestream.User, ch.Type)
		assert.Equal(t, changestreams.DefaultCluster, ch.SourceCluster)
	}
	del := s.all[len(s.all)-1]
	for _, ch := range s.all {
		if string(ch.RowKey) == "a" && len(ch.Mutations) == 1 && ch.Mutations[0].GetDeleteFromRow() != nil {
			del = ch
		}
	}
	require.NotNil(t, del.Mutations[0].GetDeleteFromRow(), "the row delete is delivered as DeleteFromRow")
}

// Chunked values arrive whole: CONTINUATION messages joined, value chunks
// concatenated.
func TestChunkedValues(t *testing.T) {
	e := newEnv(t, changestreams.Config{ChunkBytes: 3}, bigtable.NoGcPolicy())
	c, err := changestream.NewConsumer(e.conn, changestreams.DefaultProject, changestreams.DefaultInstance, "t",
		changestream.NewMemoryStore(), fastOpts(e)...)
	require.NoError(t, err)
	s := newSink()
	stop := run(t, c, s.handle)
	m := bigtable.NewMutation()
	m.Set("f", "a", 1000, []byte("hello, world"))
	m.Set("f", "b", 1000, []byte("xy"))
	m.Set("f", "c", 1000, []byte("0123456"))
	require.NoError(t, e.tbl.Apply(context.Background(), "r", m))
	waitFor(t, "the change", func() bool { return s.distinct() == 1 })
	require.ErrorIs(t, stop(), context.Canceled)
	muts := s.all[0].Mutations
	require.Len(t, muts, 3)
	assert.Equal(t, "hello, world", string(muts[0].GetSetCell().GetValue()))
	assert.Equal(t, "xy", string(muts[1].GetSetCell().GetValue()))
	assert.Equal(t, "0123456", string(muts[2].GetSetCell().GetValue()))
	assert.Equal(t, "c", string(muts[2].GetSetCell().GetColumnQualifier()))
}

// A worker killed (its context cancelled) and restarted resumes from its
// persisted tokens, across a split that happened while it was down: every
// change is delivered, and a change is delivered twice only if it was the
// last one of its partition before the kill (its checkpoint raced the
// kill). Run with both stores.
func TestKillAndRestart(t *testing.T) {
	for _, kind := range []string{"memory", "bigtable"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, changestreams.Config{SplitKeys: []string{"m"}}, bigtable.NoGcPolicy())
			store := newStore(t, e, kind)
			opts := fastOpts(e, changestream.WithCheckpointEvery(1))
			newC := func() *changestream.Consumer {
				c, err := changestream.NewConsumer(e.conn, changestreams.DefaultProject, changestreams.DefaultInstance, "t", store, opts...)
				require.NoError(t, err)
				return c
			}
			s := newSink()
			stop := run(t, newC(), s.handle)
			for _, k := range []string{"a", "b", "n", "o"} {
				e.set(t, k, 1, "1")
			}
			waitFor(t, "4 changes", func() bool { return s.distinct() == 4 })
			require.ErrorIs(t, stop(), context.Canceled)
			s.mu.Lock()
			lowLast, highLast := "", ""
			for _, ch := range s.all {
				if string(ch.RowKey) < "m" {
					lowLast = name(ch)
				} else {
					highLast = name(ch)
				}
			}
			s.mu.Unlock()

			// While it is down: writes and a split.
			e.set(t, "c", 2, "2")
			require.NoError(t, e.srv.Split("t", "f"))
			e.set(t, "g", 2, "2")
			e.set(t, "p", 2, "2")

			stop = run(t, newC(), s.handle)
			waitFor(t, "7 changes", func() bool { return s.distinct() == 7 })
			e.set(t, "h", 3, "3")
			waitFor(t, "8 changes", func() bool { return s.distinct() == 8 })
			require.ErrorIs(t, stop(), context.Canceled)
			for k := range s.dups() {
				assert.Contains(t, []string{lowLast, highLast}, k, "only a partition's last change before the kill may repeat")
			}
			assert.Len(t, s.keys(), 8)
		})
	}
}

// Two workers share the partitions; one is killed and, once its leases
// expire by the clock, the other takes its partitions over from their
// persisted tokens.
// Run with both stores.
func TestWorkerTakeover(t *testing.T) {
	for _, kind := range []string{"memory", "bigtable"} {
		t.Run(kind, func(t *testing.T) { testTakeover(t, kind) })
	}
}

func testTakeover(t *testing.T, kind string) {
	e := newEnv(t, changestreams.Config{SplitKeys: []string{"b", "d", "f", "h", "j", "l"}}, bigtable.NoGcPolicy())
	store := newStore(t, e, kind)
	worker := func(i int) *changestream.Consumer {
		c, err := changestream.NewConsumer(e.conn, changestreams.DefaultProject, changestreams.DefaultInstance, "t", store,
			fastOpts(e, changestream.WithWorker(i, 2), changestream.WithCheckpointEvery(1), changestream.WithLease(10*time.Second))...)
		require.NoError(t, err)
		return c
	}
	s0, s1 := newSink(), newSink()
	stop0 := run(t, worker(0), s0.handle)
	stop1 := run(t, worker(1), s1.handle)
	keys := []string{"a", "c", "e", "g", "i", "k", "m"}
	for _, k := range keys {
		e.set(t, k, 1, "1")
	}
	waitFor(t, "7 changes over both workers", func() bool { return s0.distinct()+s1.distinct() == 7 })
	require.NotZero(t, s1.distinct(), "worker 1 holds some partitions")
	require.NotZero(t, s0.distinct(), "worker 0 holds some partitions")
	require.ErrorIs(t, stop1(), context.Canceled)
	t.Logf("worker 0 had %v, worker 1 had %v", s0.keys(), s1.keys())

	e.clock.Advance(11 * time.Second) // worker 1's leases expire
	for _, k := range keys {
		e.set(t, k, 2, "2")
	}
	waitFor(t, "worker 0 delivers all 7 new changes", func() bool { return newOnes(s0) == 7 })
	require.ErrorIs(t, stop0(), context.Canceled)
}

// newOnes counts the distinct rows whose second write (cell timestamp 2 ms)
// worker 0 delivered.
func newOnes(s0 *sink) int {
	s0.mu.Lock()
	defer s0.mu.Unlock()
	seen := map[string]bool{}
	for _, ch := range s0.all {
		if ch.Mutations[0].GetSetCell().GetTimestampMicros() == 2000 {
			seen[string(ch.RowKey)] = true
		}
	}
	return len(seen)
}

// A consumer that cannot reach its endpoint fails after its attempts,
// naming the endpoint, instead of hanging.
func TestUnreachableEndpointNamed(t *testing.T) {
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	c, err := changestream.NewConsumer(conn, "p", "i", "t", changestream.NewMemoryStore(),
		changestream.WithMaxAttempts(2), changestream.WithBackoff(time.Millisecond, 2*time.Millisecond), changestream.WithRPCTimeout(2*time.Second))
	require.NoError(t, err)
	err = c.Run(context.Background(), func(context.Context, changestream.Change) error { return nil })
	var ce *changestream.Error
	require.True(t, errors.As(err, &ce), "error %v", err)
	assert.Equal(t, "127.0.0.1:1", ce.Endpoint)
	assert.Contains(t, err.Error(), "127.0.0.1:1")
}

func TestInvalidOptions(t *testing.T) {
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	for _, o := range []changestream.Option{
		changestream.WithWorker(2, 2), changestream.WithLease(0), changestream.WithBackoff(time.Second, time.Millisecond),
		changestream.WithCheckpointEvery(0), changestream.WithIdleTimeout(time.Second),
	} {
		_, err := changestream.NewConsumer(conn, "p", "i", "t", changestream.NewMemoryStore(), o)
		assert.ErrorIs(t, err, changestream.ErrInvalidOption)
	}
}

// A handler's error stops Run; the change is delivered again next time.
func TestHandlerErrorRedelivers(t *testing.T) {
	e := newEnv(t, changestreams.Config{}, bigtable.NoGcPolicy())
	store := changestream.NewMemoryStore()
	newC := func() *changestream.Consumer {
		c, err := changestream.NewConsumer(e.conn, changestreams.DefaultProject, changestreams.DefaultInstance, "t", store,
			fastOpts(e)...)
		require.NoError(t, err)
		return c
	}
	e.set(t, "a", 1, "1")
	boom := errors.New("boom")
	err := newC().Run(context.Background(), func(context.Context, changestream.Change) error { return boom })
	require.ErrorIs(t, err, boom)
	s := newSink()
	stop := run(t, newC(), s.handle)
	waitFor(t, "the change again", func() bool { return s.distinct() == 1 })
	require.ErrorIs(t, stop(), context.Canceled)
}

// Run returns nil once every partition's stream has passed the end time.
func TestEndTimeEndsRun(t *testing.T) {
	e := newEnv(t, changestreams.Config{SplitKeys: []string{"m"}}, bigtable.NoGcPolicy())
	e.set(t, "a", 1, "1")
	e.set(t, "z", 1, "1")
	end := e.clock.Now()
	e.clock.Advance(time.Second)
	c, err := changestream.NewConsumer(e.conn, changestreams.DefaultProject, changestreams.DefaultInstance, "t",
		changestream.NewMemoryStore(), fastOpts(e, changestream.WithEndTime(end))...)
	require.NoError(t, err)
	s := newSink()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Run(ctx, s.handle))
	assert.Len(t, s.keys(), 2)
}

// On a BigtableStore, of two workers acquiring the same lease from the
// same previous value, exactly one wins; the loser cannot checkpoint.
func TestBigtableStoreLeaseIsExclusive(t *testing.T) {
	e := newEnv(t, changestreams.Config{}, bigtable.NoGcPolicy())
	ctx := context.Background()
	client, err := bigtable.NewClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, optConn(t, e))
	require.NoError(t, err)
	store := changestream.NewBigtableStore(client.Open("state"), "cs", "t#")
	p := changestream.Partition{}
	free := changestream.Lease{Expires: e.clock.Now()}
	require.NoError(t, store.Init(ctx, e.clock.Now(), []changestream.Partition{p}, free))
	okA, err := store.Acquire(ctx, p, free, changestream.Lease{Owner: "a", Expires: e.clock.Now().Add(time.Minute)})
	require.NoError(t, err)
	okB, err := store.Acquire(ctx, p, free, changestream.Lease{Owner: "b", Expires: e.clock.Now().Add(time.Minute)})
	require.NoError(t, err)
	assert.True(t, okA)
	assert.False(t, okB)
	tok := changestream.Token{Partition: p, Token: "x"}
	require.ErrorIs(t, store.Checkpoint(ctx, p, "b", tok, time.Time{}), changestream.ErrLeaseLost)
	require.NoError(t, store.Checkpoint(ctx, p, "a", tok, e.clock.Now()))
	ok, states, err := store.List(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, states, 1)
	assert.Equal(t, "a", states[0].Lease.Owner)
	require.NotNil(t, states[0].Progress)
	assert.Equal(t, "x", states[0].Progress.Token)
	assert.Equal(t, e.clock.Now(), states[0].Watermark)
	// A second Init does not add or reset partitions.
	require.NoError(t, store.Init(ctx, e.clock.Now(), []changestream.Partition{{Start: "", End: "m"}, {Start: "m"}}, free))
	_, states, err = store.List(ctx)
	require.NoError(t, err)
	require.Len(t, states, 1)
	assert.Equal(t, "a", states[0].Lease.Owner)
}

// A read the server refuses for good (a token it never gave) stops Run
// with the server's code and the endpoint, rather than retrying forever.
func TestRefusedTokenStopsRun(t *testing.T) {
	e := newEnv(t, changestreams.Config{}, bigtable.NoGcPolicy())
	ctx := context.Background()
	store := changestream.NewMemoryStore()
	p := changestream.Partition{}
	free := changestream.Lease{Expires: e.clock.Now()}
	require.NoError(t, store.Init(ctx, e.start, []changestream.Partition{p}, free))
	mine := changestream.Lease{Owner: "worker-0", Expires: e.clock.Now().Add(time.Minute)}
	ok, err := store.Acquire(ctx, p, free, mine)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, store.Checkpoint(ctx, p, "worker-0", changestream.Token{Partition: p, Token: "not-a-token"}, time.Time{}))
	c, err := changestream.NewConsumer(e.conn, changestreams.DefaultProject, changestreams.DefaultInstance, "t", store, fastOpts(e)...)
	require.NoError(t, err)
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = c.Run(rctx, func(context.Context, changestream.Change) error { return nil })
	var ce *changestream.Error
	require.True(t, errors.As(err, &ce), "error %v", err)
	assert.Equal(t, e.srv.Addr, ce.Endpoint)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
}
