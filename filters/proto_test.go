package filters_test

import (
	"context"
	"math/rand"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// TTLProto must be exactly the proto the client sends for TTL(now): the
// test reads through a client whose interceptor records each request's
// filter, for random schemas and read times.
func TestTTLProtoIsWhatTheClientSends(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "") // dial options are ignored under it
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))

	tbl, lastFilter := recordingTable(t)
	ctx := context.Background()

	policies := []strategy.Policy{
		strategy.OneSecond(), strategy.OneSecond(strategy.WithMaxVersions(2)),
		strategy.DefaultExpiry(time.Hour), strategy.DefaultExpiry(1500*time.Millisecond, strategy.WithMaxVersions(1)),
		strategy.Sequence(3), strategy.Unmanaged(),
		strategy.OneSecond(strategy.WithWriteTime()), strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime()),
	}
	names := []string{"a", "b.c", "b", "x-y", "_z"}
	for i := 0; i < 40; i++ {
		schema := strategy.Schema{}
		for _, n := range names {
			if rng.Intn(2) == 0 {
				schema[n] = policies[rng.Intn(len(policies))]
			}
		}
		b, err := filters.New(schema)
		require.NoError(t, err)
		now := bigtable.Timestamp(rng.Int63n(4_000_000_000_000_000))
		if i%4 == 0 {
			now = strategy.MaxTimestamp + bigtable.Timestamp(rng.Int63n(808)) // past the end (issue 14, 10(b))
		}
		want := b.TTLProto(now)
		if !b.Managed() {
			assert.Nil(t, want)
			continue
		}
		require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"r"}, func(bigtable.Row) bool { return true }, bigtable.RowFilter(b.TTL(now))))
		got := lastFilter()
		assert.True(t, proto.Equal(got, want), "schema %v now %d:\n sent %v\n TTLProto %v", schema, now, got, want)
	}

	assert.Nil(t, filters.ChainProto(nil, nil))
	one := &btpb.RowFilter{Filter: &btpb.RowFilter_PassAllFilter{PassAllFilter: true}}
	assert.Same(t, one, filters.ChainProto(one, nil))
	assert.Same(t, one, filters.ChainProto(nil, one))
	assert.Len(t, filters.ChainProto(one, one).GetChain().GetFilters(), 2)
}

// recordingTable opens table "t" (families f, g, g.h) on a fresh bttest server through a client
// whose interceptor records the filter of each ReadRows request it sends;
// lastFilter returns the latest.
func recordingTable(t *testing.T) (tbl *bigtable.Table, lastFilter func() *btpb.RowFilter) {
	t.Helper()
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	var mu sync.Mutex
	var sent *btpb.RowFilter
	capture := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		return &recordingStream{ClientStream: cs, record: func(f *btpb.RowFilter) { mu.Lock(); sent = f; mu.Unlock() }}, err
	}
	ctx := context.Background()
	c, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true},
		option.WithEndpoint(h.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithGRPCDialOption(grpc.WithStreamInterceptor(capture)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, h.Admin.CreateTable(ctx, "t"))
	for _, fam := range []string{"f", "g", "g.h"} {
		require.NoError(t, h.Admin.CreateColumnFamily(ctx, "t", fam))
	}
	return c.Open("t"), func() *btpb.RowFilter { mu.Lock(); defer mu.Unlock(); return sent }
}

type recordingStream struct {
	grpc.ClientStream
	record func(*btpb.RowFilter)
}

func (s *recordingStream) SendMsg(m any) error {
	if r, ok := m.(*btpb.ReadRowsRequest); ok {
		s.record(r.GetFilter())
	}
	return s.ClientStream.SendMsg(m)
}
