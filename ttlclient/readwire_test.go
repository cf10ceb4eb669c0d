package ttlclient_test

import (
	"context"
	"sync"
	"testing"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	bttestharness "github.com/bttl/bttl/bttest_harness"
)

// readCapture keeps the ReadRows requests sent, after bttl's interceptor.
type readCapture struct {
	mu   sync.Mutex
	reqs []*btpb.ReadRowsRequest
}

func (c *readCapture) dial() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return captured{s, c}, nil
	})
}

type captured struct {
	grpc.ClientStream
	c *readCapture
}

func (s captured) SendMsg(m any) error {
	if r, ok := m.(*btpb.ReadRowsRequest); ok {
		s.c.mu.Lock()
		s.c.reqs = append(s.c.reqs, proto.Clone(r).(*btpb.ReadRowsRequest))
		s.c.mu.Unlock()
	}
	return s.ClientStream.SendMsg(m)
}

// The read path no longer reads the caller's RowFilter option (bttl read it
// out of the option's private memory). The caller's options go to the client
// as they are, the client puts the last RowFilter in the request, and bttl's
// interceptor chains the TTL filter before it on the wire: the caller's filter
// is the chain's last, whichever option set it, and the caller's other options
// (the row limit) are the client's (issue 34).
func TestReadFilterComposedOnTheWire(t *testing.T) {
	capture := &readCapture{}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{DialOptions: []grpc.DialOption{capture.dial()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	tbl := h.MustTable(t, "t", mixedSchema())
	ctx := context.Background()

	first, last := bigtable.LatestNFilter(5), bigtable.StripValueFilter()
	require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"a"}, func(bigtable.Row) bool { return true },
		bigtable.RowFilter(first), bigtable.LimitRows(3), bigtable.RowFilter(last)))
	_, err = tbl.ReadRow(ctx, "a")
	require.NoError(t, err)

	capture.mu.Lock()
	defer capture.mu.Unlock()
	require.Len(t, capture.reqs, 2)
	r := capture.reqs[0]
	chain := r.GetFilter().GetChain().GetFilters()
	require.Len(t, chain, 2, "Chain(TTL, caller's): %v", r.GetFilter())
	assert.True(t, chain[1].GetStripValueTransformer(), "the caller's last RowFilter runs after the TTL filter: %v", chain[1])
	assert.Equal(t, int64(3), r.GetRowsLimit())
	assert.NotNil(t, capture.reqs[1].GetFilter(), "a read without options gets the TTL filter")
	assert.Nil(t, capture.reqs[1].GetFilter().GetChain(), "and nothing chained after it")
}
