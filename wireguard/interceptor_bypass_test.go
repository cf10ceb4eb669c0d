package wireguard_test

import (
	"context"
	"testing"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// onServers runs body on bttest and cbtemulator with a guarded env.
func onGuardedServers(t *testing.T, body func(t *testing.T, e *instanceEnv)) {
	servers(t, func(t *testing.T, addr string) {
		body(t, newInstanceEnv(t, addr, "p", "i", wireguard.WithReadFilter()))
	})
}

func serverTimestampCell() []*btpb.Mutation {
	return []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
		FamilyName: "one", ColumnQualifier: []byte("c"), TimestampMicros: -1, Value: []byte("v")}}}}
}

// MutateRows (a streaming method) sent through conn.Invoke: the unary
// interceptor does not check it.
func TestGuardChecksMutateRowsSentThroughInvoke(t *testing.T) {
	onGuardedServers(t, func(t *testing.T, e *instanceEnv) {
		err := e.conn.Invoke(e.ctx, "/google.bigtable.v2.Bigtable/MutateRows",
			&btpb.MutateRowsRequest{TableName: e.tableName, Entries: []*btpb.MutateRowsRequest_Entry{{RowKey: []byte("r1"), Mutations: serverTimestampCell()}}},
			&btpb.MutateRowsResponse{})
		t.Logf("Invoke MutateRows: %v", err)
		assert.Equal(t, codes.FailedPrecondition, status.Code(err))
		assert.Nil(t, e.stored(t, "legacy", "r1"), "server-timestamp cell in a one-second family stored")
	})
}

// MutateRow (a unary method) sent through conn.NewStream: the stream
// interceptor does not check it.
func TestGuardChecksMutateRowSentThroughNewStream(t *testing.T) {
	onGuardedServers(t, func(t *testing.T, e *instanceEnv) {
		cs, err := e.conn.NewStream(e.ctx, &grpc.StreamDesc{}, "/google.bigtable.v2.Bigtable/MutateRow")
		require.NoError(t, err)
		err = cs.SendMsg(&btpb.MutateRowRequest{TableName: e.tableName, RowKey: []byte("r2"), Mutations: serverTimestampCell()})
		t.Logf("SendMsg: %v", err)
		_ = cs.CloseSend()
		err = cs.RecvMsg(&btpb.MutateRowResponse{})
		t.Logf("RecvMsg: %v", err)
		assert.Equal(t, codes.FailedPrecondition, status.Code(err))
		assert.Nil(t, e.stored(t, "legacy", "r2"), "server-timestamp cell in a one-second family stored")
	})
}

// ReadRows (a streaming method) sent through conn.Invoke gets the TTL
// filter, so an expired cell is not returned.
func TestGuardFiltersReadRowsSentThroughInvoke(t *testing.T) {
	onGuardedServers(t, func(t *testing.T, e *instanceEnv) {
		hour := int64(time.Hour / time.Microsecond)
		require.NoError(t, e.conn.Invoke(e.ctx, "/google.bigtable.v2.Bigtable/MutateRow",
			&btpb.MutateRowRequest{TableName: e.tableName, RowKey: []byte("r"), Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: "one", ColumnQualifier: []byte("c"), TimestampMicros: int64(e.now()) + hour, Value: []byte("v")}}}}}, &btpb.MutateRowResponse{}))
		e.clock.Advance(2 * time.Hour)
		var resp btpb.ReadRowsResponse
		err := e.conn.Invoke(e.ctx, "/google.bigtable.v2.Bigtable/ReadRows", &btpb.ReadRowsRequest{TableName: e.tableName}, &resp)
		t.Logf("Invoke ReadRows: %v, chunks %d", err, len(resp.GetChunks()))
		assert.Zero(t, len(resp.GetChunks()), "expired cell returned")
	})
}

// CheckAndMutateRow and ReadModifyWriteRow through conn.NewStream.
func TestGuardChecksCheckAndMutateAndReadModifyWriteSentThroughNewStream(t *testing.T) {
	onGuardedServers(t, func(t *testing.T, e *instanceEnv) {
		send := func(method string, req, resp any) error {
			cs, err := e.conn.NewStream(e.ctx, &grpc.StreamDesc{}, method)
			require.NoError(t, err)
			if err := cs.SendMsg(req); err != nil {
				return err
			}
			_ = cs.CloseSend()
			return cs.RecvMsg(resp)
		}
		err := send("/google.bigtable.v2.Bigtable/CheckAndMutateRow", &btpb.CheckAndMutateRowRequest{TableName: e.tableName, RowKey: []byte("c1"),
			FalseMutations: serverTimestampCell()}, &btpb.CheckAndMutateRowResponse{})
		t.Logf("CheckAndMutateRow: %v", err)
		assert.Equal(t, codes.FailedPrecondition, status.Code(err))
		assert.Nil(t, e.stored(t, "legacy", "c1"), "server-timestamp cell stored through CheckAndMutateRow")

		err = send("/google.bigtable.v2.Bigtable/ReadModifyWriteRow", &btpb.ReadModifyWriteRowRequest{TableName: e.tableName, RowKey: []byte("c2"),
			Rules: []*btpb.ReadModifyWriteRule{{FamilyName: "seq", ColumnQualifier: []byte("n"), Rule: &btpb.ReadModifyWriteRule_IncrementAmount{IncrementAmount: 1}}}},
			&btpb.ReadModifyWriteRowResponse{})
		t.Logf("ReadModifyWriteRow: %v", err)
		assert.Equal(t, codes.FailedPrecondition, status.Code(err))
		assert.Nil(t, e.stored(t, "legacy", "c2"), "server-assigned timestamp in a sequence family")
	})
}

// Every guarded method must be checked whichever interceptor the call
// takes: conn.Invoke runs the unary interceptor for any method name, and
// conn.NewStream the stream interceptor. A request the guard would refuse
// must not reach the invoker or streamer.
func TestGuardChecksEveryMethodOnBothInterceptors(t *testing.T) {
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, wireguard.WithReadFilter())
	require.NoError(t, err)
	const name = "projects/p/instances/i/tables/legacy"
	rmw := []*btpb.ReadModifyWriteRule{{FamilyName: "seq", ColumnQualifier: []byte("n"), Rule: &btpb.ReadModifyWriteRule_IncrementAmount{IncrementAmount: 1}}}
	for _, c := range []struct {
		method string
		req    any
	}{
		{"MutateRow", &btpb.MutateRowRequest{TableName: name, RowKey: []byte("r"), Mutations: serverTimestampCell()}},
		{"MutateRows", &btpb.MutateRowsRequest{TableName: name, Entries: []*btpb.MutateRowsRequest_Entry{{RowKey: []byte("r"), Mutations: serverTimestampCell()}}}},
		{"CheckAndMutateRow", &btpb.CheckAndMutateRowRequest{TableName: name, RowKey: []byte("r"), TrueMutations: serverTimestampCell()}},
		{"ReadModifyWriteRow", &btpb.ReadModifyWriteRowRequest{TableName: name, RowKey: []byte("r"), Rules: rmw}},
		{"PrepareQuery", &btpb.PrepareQueryRequest{InstanceName: "projects/p/instances/i", Query: "SELECT * FROM legacy"}},
		//lint:ignore SA1019 a request as an older client sends it, the query as text
		{"ExecuteQuery", &btpb.ExecuteQueryRequest{InstanceName: "projects/p/instances/i", Query: "SELECT * FROM legacy"}},
		{"OpenTable", &btpb.MutateRowRequest{}},
	} {
		method := "/google.bigtable.v2.Bigtable/" + c.method
		t.Run("unary/"+c.method, func(t *testing.T) {
			sent := false
			err := g.UnaryClientInterceptor()(context.Background(), method, c.req, nil, nil,
				func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
					sent = true
					return nil
				})
			assert.False(t, sent, "reached the invoker unchecked (err %v)", err)
			assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
		})
		t.Run("stream/"+c.method, func(t *testing.T) {
			var got []any
			streamer := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				return &sentRecordingStream{ctx: ctx, sent: &got}, nil
			}
			cs, err := g.StreamClientInterceptor()(context.Background(), &grpc.StreamDesc{}, nil, method, streamer)
			if err == nil {
				err = cs.SendMsg(c.req)
			}
			assert.Empty(t, got, "reached the streamer unchecked (err %v)", err)
			assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
		})
	}
}

type sentRecordingStream struct {
	grpc.ClientStream
	ctx  context.Context
	sent *[]any
}

func (s *sentRecordingStream) SendMsg(m any) error      { *s.sent = append(*s.sent, m); return nil }
func (s *sentRecordingStream) Context() context.Context { return s.ctx }

// An unknown field nested in a SetCell (not only at the top level) makes
// the request unclassifiable: it is refused, nothing sent.
func TestGuardRefusesNestedUnknownFields(t *testing.T) {
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema})
	require.NoError(t, err)
	newRequest := func() (*btpb.MutateRowRequest, *btpb.Mutation_SetCell) {
		set := &btpb.Mutation_SetCell{FamilyName: "one", ColumnQualifier: []byte("c"),
			TimestampMicros: time.Now().Add(time.Hour).UnixMilli() * 1000, Value: []byte("v")}
		return &btpb.MutateRowRequest{TableName: "projects/p/instances/i/tables/legacy", RowKey: []byte("r"),
			Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: set}}}}, set
	}
	sent := false
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		sent = true
		return nil
	}
	// Control: without the unknown field the same request is sent.
	req, _ := newRequest()
	require.NoError(t, g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/MutateRow", req, nil, nil, invoker))
	require.True(t, sent)

	sent = false
	req, set := newRequest()
	set.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
	err = g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/MutateRow", req, nil, nil, invoker)
	t.Logf("nested unknown field: sent=%v err=%v", sent, err)
	assert.False(t, sent, "a request with an unknown nested field reached the invoker")
	requireCode(t, codes.FailedPrecondition, err, wireguard.RuleUnclassifiable, "set_cell")
}
