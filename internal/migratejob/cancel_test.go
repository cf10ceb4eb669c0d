package migratejob_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/strategy"
)

// A run stopped while a write is in flight returns an error that is
// context.Canceled, as a run stopped between writes does: gRPC reports
// the cancelled call as a status (code Canceled) that does not wrap it,
// and TestRestartedDeletionRunResumes failed so about once in three runs.
func TestRunStoppedDuringAWriteIsCanceled(t *testing.T) {
	entered := make(chan struct{}, 1)
	block := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/CheckAndMutateRow") {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-ctx.Done() // answers only once the caller gives up
			return nil, ctx.Err()
		}
		return handler(ctx, req)
	}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{ServerOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(block)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	raw := h.Raw.Open("t")
	now := h.Clock.Now()
	load(t, raw, "f", 3, 1, now, 10*day)
	h.Clock.Set(now.Add(time.Second))
	mg, err := migrate.New(raw, "t", inPlace(now, 30*day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	rctx, stop := context.WithCancel(ctx)
	go func() {
		<-entered
		stop()
	}()
	_, err = mg.Run(rctx)
	require.ErrorIs(t, err, context.Canceled)
}
