package ttlclient_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/ttlclient"
)

// traceKey is a value a caller puts in its context, as a tracer's span or
// a request ID would be.
type traceKey struct{}

// contextSeen records, per RPC method (short name), the traceKey value of
// each call's context as the client's interceptors see it.
type contextSeen struct {
	mu   sync.Mutex
	seen map[string][]any
}

func (c *contextSeen) record(ctx context.Context, method string) {
	short := method[strings.LastIndex(method, "/")+1:]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string][]any{}
	}
	c.seen[short] = append(c.seen[short], ctx.Value(traceKey{}))
}

func (c *contextSeen) values(method string) []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]any(nil), c.seen[method]...)
}

func (c *contextSeen) dialOptions() []grpc.DialOption {
	return observeCalls(func(ctx context.Context, method string) { c.record(ctx, method) }, nil)
}

// observeCalls is a client connection's interceptors calling call at the
// start of each call (unary or stream) and sent with each request message
// (a unary call's, each one a stream sends); either may be nil.
func observeCalls(call func(ctx context.Context, method string), sent func(method string, msg any)) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if call != nil {
				call(ctx, method)
			}
			if sent != nil {
				sent(method, req)
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if call != nil {
				call(ctx, method)
			}
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || sent == nil {
				return cs, err
			}
			return &observedStream{ClientStream: cs, method: method, sent: sent}, nil
		}),
	}
}

type observedStream struct {
	grpc.ClientStream
	method string
	sent   func(method string, msg any)
}

func (s *observedStream) SendMsg(m any) error {
	s.sent(s.method, m)
	return s.ClientStream.SendMsg(m)
}

func newContextSeenHarness(t *testing.T) (*bttestharness.Harness, *contextSeen) {
	t.Helper()
	seen := &contextSeen{}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{DialOptions: seen.dialOptions()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h, seen
}

// A shadow read keeps the values of the caller's context (its trace), not
// its cancellation: before, it started from context.Background() and the
// trace stopped at the caller's read.
func TestShadowReadKeepsCallerContextValues(t *testing.T) {
	h, seen := newContextSeenHarness(t)
	rec := newShadowRecorder()
	tbl := h.MustTable(t, "t", mixedSchema(), ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(1))
	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "c", time.Hour, []byte("v"))
	require.NoError(t, tbl.Apply(context.Background(), "r", m))

	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), traceKey{}, "row-read"))
	_, err := tbl.ReadRow(ctx, "r")
	require.NoError(t, err)
	cancel() // the caller is done: the shadow read goes on
	assert.Equal(t, 0, rec.wait(t), "the shadow read ended without error")

	ctx, cancel = context.WithCancel(context.WithValue(context.Background(), traceKey{}, "rows-read"))
	require.NoError(t, tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { return true }))
	cancel()
	assert.Equal(t, 0, rec.wait(t), "the shadow read ended without error")

	// The caller's read and its shadow read, each with the caller's value.
	assert.Equal(t, []any{"row-read", "row-read", "rows-read", "rows-read"}, seen.values("ReadRows"))
}

// A time-to-idle refresh keeps the values of the read's context, not its
// cancellation.
func TestIdleRefreshKeepsCallerContextValues(t *testing.T) {
	h, seen := newContextSeenHarness(t)
	rec := newIdleCounter()
	tbl := h.MustTable(t, "t", idleSchema(), ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(0))
	e := &env{h: h, tbl: tbl, ctx: context.Background()}
	e.setTTL(t, "a", famIdleOne, "c", "v", time.Minute) // under the idle TTL: refreshed when read

	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), traceKey{}, "idle-read"))
	_, err := tbl.ReadRow(ctx, "a")
	require.NoError(t, err)
	cancel()
	e.flush(t)
	assert.Equal(t, 1, rec.get(famIdleOne, ttlclient.IdleRefreshed), "refreshed after the caller's context was cancelled")
	assert.Equal(t, []any{"idle-read"}, seen.values("CheckAndMutateRow"), "the refresh's conditional move")
}
