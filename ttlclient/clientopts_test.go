package ttlclient_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bigtablepb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/internal/typecheck"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/ttlclient"
)

// shadowHold is a client interceptor holding every shadow read (a
// ReadRows whose filter strips values) before it is sent, until release,
// and counting how many it holds at most at once.
type shadowHold struct {
	entered chan struct{} // one send per held shadow read
	release chan struct{}
	freed   atomic.Bool
	held    atomic.Int64
	most    atomic.Int64
}

func newShadowHold(t *testing.T) *shadowHold {
	s := &shadowHold{entered: make(chan struct{}, 64), release: make(chan struct{})}
	t.Cleanup(s.releaseAll) // before the harness closes, should the test stop early
	return s
}

func (s *shadowHold) releaseAll() {
	if s.freed.CompareAndSwap(false, true) {
		close(s.release)
	}
}

func (s *shadowHold) dialOptions() []grpc.DialOption {
	return observeCalls(nil, func(_ string, msg any) {
		req, ok := msg.(*bigtablepb.ReadRowsRequest)
		if !ok || !strings.Contains(prototext.Format(req.GetFilter()), "strip_value_transformer") {
			return
		}
		n := s.held.Add(1)
		for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
		}
		s.entered <- struct{}{}
		<-s.release
		s.held.Add(-1)
	})
}

// The shadow reads' bound is the client's, over all its tables. Two tables of
// one client, every read sampled, hold at most the client's bound of shadow
// reads at once; the reads beyond it are dropped and counted on the table that
// made them (issue 30, item 3).
func TestShadowBoundIsTheClientsAcrossTables(t *testing.T) {
	hold := newShadowHold(t)
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{
		DialOptions:   hold.dialOptions(),
		ClientOptions: []ttlclient.ClientOption{ttlclient.WithShadowConcurrency(2), ttlclient.WithShadowSampling(1)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	recA, recB := newShadowRecorder(), newShadowRecorder()
	a := h.MustTable(t, "a", mixedSchema(), ttlclient.WithRecorder(recA))
	b := h.MustTable(t, "b", mixedSchema(), ttlclient.WithRecorder(recB))
	ctx := context.Background()

	for range 2 {
		_, err := a.ReadRow(ctx, "r")
		require.NoError(t, err)
		<-hold.entered
	}
	// Table a holds both of the client's slots: b's shadow reads are
	// dropped, not run beside them.
	for range 3 {
		_, err := b.ReadRow(ctx, "r")
		require.NoError(t, err)
	}
	assert.Equal(t, int64(3), recB.dropped.Load(), "b's sampled reads found the client's slots busy")
	assert.Zero(t, recA.dropped.Load())
	_, err = a.ReadRow(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, int64(1), recA.dropped.Load())

	hold.releaseAll()
	recA.wait(t)
	recA.wait(t)
	// Slots freed: b's next read gets its shadow read.
	_, err = b.ReadRow(ctx, "r")
	require.NoError(t, err)
	recB.wait(t)
	assert.Equal(t, int64(2), hold.most.Load(), "never more than the client's bound at once")
}

// The refresh queue and its workers are the client's: with one worker and a
// queue of one, a refresh of table a running and one of table b queued, b's
// next refresh is dropped, whichever table queued first (issue 30, item 3).
func TestIdleRefreshBoundsAreTheClientsAcrossTables(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "") // the interceptor needs the in-process server
	moves := newMoveCounter()
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{
		ServerOptions: moves.options(),
		ClientOptions: []ttlclient.ClientOption{ttlclient.WithIdleRefreshConcurrency(1), ttlclient.WithIdleRefreshQueue(1), ttlclient.WithShadowSampling(0)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	recA, recB := newIdleCounter(), newIdleCounter()
	a := &env{h: h, tbl: h.MustTable(t, "a", idleSchema(), ttlclient.WithRecorder(recA)), ctx: context.Background()}
	b := &env{h: h, tbl: h.MustTable(t, "b", idleSchema(), ttlclient.WithRecorder(recB)), ctx: context.Background()}
	a.setTTL(t, "r", famIdleOne, "c", "v", time.Minute) // due at once: 1m left of a 10m idle TTL
	b.setTTL(t, "r1", famIdleOne, "c", "v", time.Minute)
	b.setTTL(t, "r2", famIdleOne, "c", "v", time.Minute)

	moves.hold.Store(true)
	require.Len(t, a.read(t, "r"), 1)
	<-moves.entered // a's refresh holds the client's only worker
	moves.hold.Store(false)
	require.Len(t, b.read(t, "r1"), 1) // queued: the client's queue is full
	require.Len(t, b.read(t, "r2"), 1)
	assert.Equal(t, 1, recB.get(famIdleOne, ttlclient.IdleDropped), "r2 found the client's queue full")
	assert.Equal(t, int64(1), moves.n.Load(), "one refresh at a time for the client")

	close(moves.release)
	a.flush(t)
	assert.Equal(t, 1, recA.get(famIdleOne, ttlclient.IdleRefreshed))
	assert.Equal(t, 1, recB.get(famIdleOne, ttlclient.IdleRefreshed), "r1, after a's")
	assert.Equal(t, int64(2), moves.n.Load())
}

// The pools' bounds were set per table, on pools the client's tables share, so
// a table opened with a larger bound took every slot and starved the others.
// Issue 34, item 3: they are ClientOptions only, so a table's bound does not
// compile (it was refused at run time); WithSQLAllowed, which PrepareStatement
// reads, is not a TableOption either. Options valid in both places are both
// (issue 30, item 3).
func TestPoolBoundsAreNotTableOptions(t *testing.T) {
	c, err := typecheck.New("time", "log/slog", "github.com/bttl/bttl/ttlclient")
	require.NoError(t, err)
	open := func(opt string) string {
		return `func() { var c *ttlclient.Client; _, _ = c.Open(nil, "t", nil, ` + opt + `) }`
	}
	wrap := func(opt string) string { return `ttlclient.Wrap(nil, ` + opt + `)` }
	for _, opt := range []string{"ttlclient.WithShadowConcurrency(64)", "ttlclient.WithIdleRefreshConcurrency(64)",
		"ttlclient.WithIdleRefreshQueue(64)", "ttlclient.WithSQLAllowed()"} {
		assert.NoError(t, c.Expr(wrap(opt)), "a client takes %s", opt)
		err := c.Expr(open(opt))
		if assert.Error(t, err, "a table takes %s", opt) {
			assert.ErrorContains(t, err, "does not implement ttlclient.TableOption")
		}
	}
	for _, opt := range []string{"ttlclient.WithLogger(slog.Default())", "ttlclient.WithClock(nil)", "ttlclient.WithRecorder(nil)",
		"ttlclient.WithKeyRedaction(nil)", "ttlclient.WithoutVerify()", "ttlclient.WithVerifyTimeout(time.Second)",
		"ttlclient.WithShadowSampling(1)", "ttlclient.WithShadowRand(nil)", "ttlclient.WithAdminClient(nil, \"p\", \"i\")"} {
		assert.NoError(t, c.Expr(wrap(opt)), "a client takes %s", opt)
		assert.NoError(t, c.Expr(open(opt)), "a table takes %s", opt)
	}
}

// Every option but the pools' bounds may be given per table.
func TestTableOptions(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", mixedSchema()))
	_, err := h.Client.Open(ctx, "t", mixedSchema(), ttlclient.WithRecorder(metrics.New()),
		ttlclient.WithShadowSampling(0.5), ttlclient.WithShadowRand(func() float64 { return 0 }),
		ttlclient.WithVerifyTimeout(time.Minute), ttlclient.WithClock(h.Clock))
	require.NoError(t, err)
}
