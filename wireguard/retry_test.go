package wireguard_test

import (
	"context"
	"testing"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

type sentStream struct {
	grpc.ClientStream
	sent *[]any
}

func (s sentStream) SendMsg(m any) error { *s.sent = append(*s.sent, m); return nil }

// The client retries by sending the same request again: each attempt must
// carry the TTL filter once, the caller's message must stay as it was, and
// the row set must be shared, not copied.
func TestReadFilterIsIdempotentAndCopiesNothingLarge(t *testing.T) {
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, wireguard.WithReadFilter())
	require.NoError(t, err)
	var sent []any
	streamer := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return sentStream{sent: &sent}, nil
	}
	userFilter := &btpb.RowFilter{Filter: &btpb.RowFilter_ColumnQualifierRegexFilter{ColumnQualifierRegexFilter: []byte("c")}}
	keys := make([][]byte, 10000)
	for i := range keys {
		keys[i] = []byte{byte(i), byte(i >> 8)}
	}
	req := &btpb.ReadRowsRequest{TableName: "projects/p/instances/i/tables/legacy", Rows: &btpb.RowSet{RowKeys: keys}, Filter: userFilter, RowsLimit: 7}
	orig := proto.Clone(req)
	for attempt := 0; attempt < 2; attempt++ {
		cs, err := g.StreamClientInterceptor()(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, "/google.bigtable.v2.Bigtable/ReadRows", streamer)
		require.NoError(t, err)
		require.NoError(t, cs.SendMsg(req))
	}
	require.True(t, proto.Equal(orig, req), "the caller's request is untouched")
	require.Len(t, sent, 2)
	for _, m := range sent {
		got := m.(*btpb.ReadRowsRequest)
		assert.Same(t, req.Rows, got.Rows, "row set shared")
		assert.Equal(t, int64(7), got.RowsLimit)
		chain := got.GetFilter().GetChain().GetFilters()
		require.Len(t, chain, 2)
		assert.NotNil(t, chain[0].GetInterleave(), "TTL filter first")
		assert.Same(t, userFilter, chain[1], "then the caller's, once")
	}

	// Unguarded tables are sent as they are.
	other := &btpb.ReadRowsRequest{TableName: "projects/p/instances/i/tables/other"}
	cs, err := g.StreamClientInterceptor()(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, "/google.bigtable.v2.Bigtable/ReadRows", streamer)
	require.NoError(t, err)
	require.NoError(t, cs.SendMsg(other))
	assert.Same(t, other, sent[2])
}
