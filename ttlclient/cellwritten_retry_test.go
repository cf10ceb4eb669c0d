package ttlclient_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// partialFailStream answers the first MutateRows response's entries
// Unavailable, so that the client retries them (the same entry protos).
type partialFailStream struct {
	grpc.ServerStream
}

func (s partialFailStream) SendMsg(m any) error {
	if r, ok := m.(*btpb.MutateRowsResponse); ok {
		for _, e := range r.GetEntries() {
			e.Status = status.New(codes.Unavailable, "injected").Proto()
		}
	}
	return s.ServerStream.SendMsg(m)
}

// Table.API's writes retried by the client count their cells once: the
// first attempt of a MutateRow fails Unavailable, and a MutateRows's entries
// are answered Unavailable once, then retried.
func TestCellWrittenCountsTableAPIRetriesOnce(t *testing.T) {
	var unary, stream atomic.Int32
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if info.FullMethod == "/google.bigtable.v2.Bigtable/MutateRow" && unary.Add(1) == 1 {
				return nil, status.Error(codes.Unavailable, "injected")
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if info.FullMethod == "/google.bigtable.v2.Bigtable/MutateRows" {
				switch stream.Add(1) {
				case 1:
					return status.Error(codes.Unavailable, "injected")
				case 2:
					return h(srv, partialFailStream{ss})
				}
			}
			return h(srv, ss)
		}),
	}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{ServerOptions: opts})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	rec := &cellCounter{}
	schema := strategy.Schema{"d": strategy.OneSecond(strategy.WithDefaultTTL(time.Hour))}
	tbl := h.MustTable(t, "t", schema, ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(0))
	api := tbl.API()

	ts, err := tbl.Timestamp("d", time.Hour) // explicit: the client retries only idempotent mutations
	require.NoError(t, err)
	m := bigtable.NewMutation()
	m.Set("d", "a", ts, []byte("v"))
	require.NoError(t, api.Apply(ctx, "r1", m))
	require.EqualValues(t, 2, unary.Load(), "the MutateRow was retried")
	assert.Equal(t, map[string]int{"d": 1}, rec.get())

	errs, err := api.ApplyBulk(ctx, []string{"r2", "r3"}, []*bigtable.Mutation{m, m})
	require.NoError(t, err)
	require.Nil(t, errs)
	require.EqualValues(t, 3, stream.Load(), "the MutateRows was retried whole, then its entries")
	assert.Equal(t, map[string]int{"d": 3}, rec.get())
}
