package wireguard_test

import (
	"context"
	"errors"
	"testing"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// touchFirst is a stream interceptor installed before the guard that
// touches the stream (Context, Header on another goroutine, Trailer)
// before the client sends its request, as tracing or logging interceptors
// do.
type touchFirst struct {
	grpc.ClientStream
	touched   bool
	headerErr chan error
}

func (s *touchFirst) SendMsg(m any) error {
	if !s.touched {
		s.touched = true
		_ = s.ClientStream.Context()
		_ = s.ClientStream.Trailer()
		go func() {
			_, err := s.ClientStream.Header()
			s.headerErr <- err
		}()
	}
	return s.ClientStream.SendMsg(m)
}

// An interceptor before the guard that called Context() or Header() on a
// MutateRows stream opened it early; the guard's refusal was then lost and the
// server saw a stream with no request ("cardinality violation") instead of the
// client seeing FailedPrecondition (issue 14, finding 5).
func TestRefusalSurvivesAnInterceptorTouchingTheStreamFirst(t *testing.T) {
	servers(t, func(t *testing.T, addr string) {
		headerErr := make(chan error, 4)
		probe := grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || method != "/google.bigtable.v2.Bigtable/MutateRows" {
				return cs, err
			}
			return &touchFirst{ClientStream: cs, headerErr: headerErr}, nil
		})
		e := newInstanceEnv(t, addr, "p", "i")
		// A client whose interceptor chain is probe, then the guard.
		g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, wireguard.WithClock(e.clock))
		require.NoError(t, err)
		opts := append([]option.ClientOption{option.WithEndpoint(addr), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpcInsecure()), option.WithGRPCDialOption(probe)}, g.ClientOptions()...)
		client, err := bigtable.NewClientWithConfig(e.ctx, "p", "i",
			bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true}, opts...)
		require.NoError(t, err)
		defer client.Close()

		bad := bigtable.NewMutation()
		bad.Set("one", "c", bigtable.ServerTime, []byte("v"))
		_, err = client.Open("legacy").ApplyBulk(e.ctx, []string{"r"}, []*bigtable.Mutation{bad})
		requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleServerTimestamp)
		requireCode(t, codes.FailedPrecondition, <-headerErr, "rule "+wireguard.RuleServerTimestamp)
		assert.Nil(t, e.stored(t, "legacy", "r"))

		good := bigtable.NewMutation()
		good.Set("seq", "c", 2000, []byte("v"))
		errs, err := client.Open("legacy").ApplyBulk(e.ctx, []string{"r"}, []*bigtable.Mutation{good})
		require.NoError(t, err)
		require.Nil(t, errs)
		require.NoError(t, <-headerErr, "Header waits for the stream the good request opens")
		assert.Len(t, e.stored(t, "legacy", "r")["seq"], 1)
	})
}

// Whatever is done to the stream before SendMsg, the server is reached
// only by a request that passed the guard, and a refusal reads as
// FailedPrecondition on every call after it.
func TestLazyStreamOpensOnlyForACheckedRequest(t *testing.T) {
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema})
	require.NoError(t, err)
	bad := &btpb.MutateRowsRequest{TableName: "projects/p/instances/i/tables/legacy", Entries: []*btpb.MutateRowsRequest_Entry{{
		RowKey: []byte("r"), Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
			FamilyName: "one", ColumnQualifier: []byte("c"), TimestampMicros: -1}}}}}}}
	open := func(t *testing.T, ctx context.Context) (grpc.ClientStream, *bool) {
		opened := new(bool)
		streamer := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			*opened = true
			return nil, errors.New("the server must not be reached")
		}
		cs, err := g.StreamClientInterceptor()(ctx, &grpc.StreamDesc{ServerStreams: true}, nil, "/google.bigtable.v2.Bigtable/MutateRows", streamer)
		require.NoError(t, err)
		return cs, opened
	}
	refused := func(t *testing.T, err error, rule string) {
		t.Helper()
		requireCode(t, codes.FailedPrecondition, err, "rule "+rule)
	}

	t.Run("CloseSend then SendMsg", func(t *testing.T) {
		cs, opened := open(t, context.Background())
		require.NoError(t, cs.CloseSend())
		refused(t, cs.SendMsg(bad), wireguard.RuleServerTimestamp)
		refused(t, cs.RecvMsg(&btpb.MutateRowsResponse{}), wireguard.RuleUnclassifiable)
		assert.False(t, *opened)
	})
	t.Run("CloseSend then RecvMsg", func(t *testing.T) {
		cs, opened := open(t, context.Background())
		require.NoError(t, cs.CloseSend())
		refused(t, cs.RecvMsg(&btpb.MutateRowsResponse{}), wireguard.RuleUnclassifiable)
		_, err := cs.Header()
		refused(t, err, wireguard.RuleUnclassifiable)
		assert.False(t, *opened)
	})
	t.Run("RecvMsg and Header waiting before SendMsg", func(t *testing.T) {
		cs, opened := open(t, context.Background())
		recv, header := make(chan error, 1), make(chan error, 1)
		go func() { recv <- cs.RecvMsg(&btpb.MutateRowsResponse{}) }()
		go func() { _, err := cs.Header(); header <- err }()
		assert.NotNil(t, cs.Context())
		assert.Nil(t, cs.Trailer())
		refused(t, cs.SendMsg(bad), wireguard.RuleServerTimestamp)
		refused(t, <-recv, wireguard.RuleServerTimestamp)
		refused(t, <-header, wireguard.RuleServerTimestamp)
		assert.Nil(t, cs.Trailer())
		assert.False(t, *opened)
	})
	t.Run("RecvMsg with no request ends with the context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cs, opened := open(t, ctx)
		cancel()
		requireCode(t, codes.Canceled, cs.RecvMsg(&btpb.MutateRowsResponse{}))
		assert.False(t, *opened)
	})
}
