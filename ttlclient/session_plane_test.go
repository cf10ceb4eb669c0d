package ttlclient_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/sessionserver"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// A client dialled with ClientOptions but sessions left on (what a caller
// of bigtable.NewClientWithConfig and Wrap may do) keeps every call on the
// classic RPCs, which the interceptor sees, against a server that sends
// all eligible calls to sessions: the interceptor sets the session load of
// GetClientConfiguration replies to 0 (docs/design.md#tableapi). A client
// without the interceptor, on the same server, moves to sessions.
func TestInterceptorKeepsSessionsOff(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "") // a client given a connection builds no session plane
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := sessionserver.New(sessionserver.Config{SessionLoad: 1})
	require.NoError(t, err)
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{ServerOptions: sess.ServerOptions()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	schema := strategy.Schema{"s": strategy.OneSecond()}
	require.NoError(t, h.CreateTable(ctx, "events", schema))

	// replies counts the GetClientConfiguration replies the client got,
	// as ttlclient's interceptor left them (this one runs outside it).
	var replies, loaded atomic.Int64
	count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if cfg, ok := reply.(*btpb.ClientConfiguration); ok && err == nil {
			replies.Add(1)
			if cfg.GetSessionConfiguration().GetSessionLoad() > 0 {
				loaded.Add(1)
			}
		}
		return err
	})
	dial := func(extra ...option.ClientOption) []option.ClientOption {
		return append([]option.ClientOption{
			option.WithEndpoint(h.Addr),
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		}, extra...)
	}
	cfg := bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}} // sessions on
	raw, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, cfg,
		dial(append([]option.ClientOption{option.WithGRPCDialOption(count)}, ttlclient.ClientOptions()...)...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, raw.Close()) })
	plain, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, cfg, dial()...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, plain.Close()) })

	// The control: the same server moves a plain client's calls.
	require.NoError(t, sess.AwaitSessions(ctx, func(ctx context.Context) error {
		_, err := plain.Open("events").ReadRow(ctx, "probe")
		return err
	}))
	// The guarded client's start-up probe and first poll are back.
	for replies.Load() < 2 {
		require.NoError(t, ctx.Err(), "the client got %d configuration replies", replies.Load())
		_, err := raw.Open("events").ReadRow(ctx, "probe")
		require.NoError(t, err)
	}
	require.Zero(t, loaded.Load(), "a reply reached the client with a session load")

	tbl, err := ttlclient.Wrap(raw, ttlclient.WithClock(h.Clock), ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance)).Open(ctx, "events", schema)
	require.NoError(t, err)
	before := sess.Stats()
	const calls = 20
	for i := 0; i < calls; i++ {
		m := ttlclient.NewMutation()
		m.SetTTL("s", "c", time.Hour, []byte("v"))
		require.NoError(t, tbl.Apply(ctx, "row", m))
		del := bigtable.NewMutation()
		del.DeleteRow()
		require.NoError(t, tbl.API().Apply(ctx, "row", del))
		_, err := tbl.ReadRow(ctx, "row")
		require.NoError(t, err)
		_, err = raw.Open("events").ReadRow(ctx, "row")
		require.NoError(t, err)
	}
	after := sess.Stats()
	require.Zero(t, after.VirtualMutateRows+after.VirtualReadRows-before.VirtualMutateRows-before.VirtualReadRows,
		"no call of the guarded client went through a session")
	require.Equal(t, int64(2*calls), after.MutateRow-before.MutateRow)
	require.Equal(t, int64(2*calls), after.ReadRows-before.ReadRows)
}
