package wireguard_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// servers are the real servers a test runs on: the in-process bttest and,
// when its binary is installed, cbtemulator.
func servers(t *testing.T, run func(t *testing.T, addr string)) {
	t.Run("bttest", func(t *testing.T) {
		t.Setenv("BIGTABLE_EMULATOR_HOST", "")
		h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Close() })
		run(t, h.Addr)
	})
	t.Run("cbtemulator", func(t *testing.T) {
		t.Setenv("BIGTABLE_EMULATOR_HOST", "")
		run(t, bttestharness.NewEmulator(t).Addr)
	})
}

// instanceEnv is a guarded client, a raw client and a table "legacy" in
// any project and instance of a server.
type instanceEnv struct {
	ctx       context.Context
	clock     *bttestharness.ManualClock
	guarded   *bigtable.Client
	raw       *bigtable.Client
	conn      *grpc.ClientConn // dialled with the guard's DialOptions
	tableName string
}

func newInstanceEnv(t *testing.T, addr, project, instance string, opts ...wireguard.Option) *instanceEnv {
	t.Helper()
	ctx := context.Background()
	e := &instanceEnv{ctx: ctx, clock: bttestharness.NewManualClock(time.Now().Truncate(time.Millisecond)),
		tableName: "projects/" + project + "/instances/" + instance + "/tables/legacy"}
	dial := []option.ClientOption{option.WithEndpoint(addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials()))}
	admin, err := bigtable.NewAdminClient(ctx, project, instance, dial...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	for _, id := range []string{"legacy", "other"} {
		if err := admin.DeleteTable(ctx, id); err != nil {
			require.Equal(t, codes.NotFound, status.Code(err), err)
		}
		fams := map[string]bigtable.Family{}
		for fam, p := range legacySchema {
			fams[fam] = bigtable.Family{GCPolicy: p.GCPolicy()}
		}
		require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: id, ColumnFamilies: fams}))
	}

	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, append([]wireguard.Option{wireguard.WithClock(e.clock)}, opts...)...)
	require.NoError(t, err)
	cfg := bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true}
	e.guarded, err = bigtable.NewClientWithConfig(ctx, project, instance, cfg, append(dial, g.ClientOptions()...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.guarded.Close() })
	e.raw, err = bigtable.NewClientWithConfig(ctx, project, instance, cfg, dial...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.raw.Close() })
	e.conn, err = grpc.NewClient(addr, append(g.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.conn.Close() })
	return e
}

func (e *instanceEnv) now() bigtable.Timestamp { return bigtable.Timestamp(e.clock.Now().UnixMicro()) }

func (e *instanceEnv) stored(t *testing.T, table, row string) bigtable.Row {
	t.Helper()
	r, err := e.raw.Open(table).ReadRow(e.ctx, row)
	require.NoError(t, err)
	return r
}

func requireCode(t *testing.T, want codes.Code, err error, msgParts ...string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, status.Code(err), err)
	for _, p := range msgParts {
		assert.Contains(t, err.Error(), p)
	}
}

// The guard took the first "/tables/" of a resource name, so a project or
// instance called "tables" (a valid ID) turned off every check and the read
// filter (issue 14, finding 1).
func TestGuardParsesNamesWithProjectOrInstanceCalledTables(t *testing.T) {
	servers(t, func(t *testing.T, addr string) {
		for _, pi := range [][2]string{{"p", "tables"}, {"tables", "i"}, {"tables", "tables"}} {
			t.Run(pi[0]+"/"+pi[1], func(t *testing.T) {
				e := newInstanceEnv(t, addr, pi[0], pi[1], wireguard.WithReadFilter())
				tbl := e.guarded.Open("legacy")
				hour := bigtable.Timestamp(time.Hour / time.Microsecond)

				m := bigtable.NewMutation()
				m.Set("one", "c", bigtable.ServerTime, []byte("v"))
				requireCode(t, codes.FailedPrecondition, tbl.Apply(e.ctx, "r", m), "rule "+wireguard.RuleServerTimestamp)

				m = bigtable.NewMutation()
				m.Set("one", "c", e.now()-hour, []byte("an hour old"))
				_, err := tbl.ApplyBulk(e.ctx, []string{"r"}, []*bigtable.Mutation{m})
				requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleExpiredOnArrival)

				rmw := bigtable.NewReadModifyWrite()
				rmw.Increment("seq", "n", 1)
				_, err = tbl.ApplyReadModifyWrite(e.ctx, "r", rmw)
				requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleServerAssignedTimestamp)
				assert.Nil(t, e.stored(t, "legacy", "r"), "nothing refused reached the server")

				// The read filter applies too: a cell expired by the
				// guard's clock is hidden, though still stored.
				m = bigtable.NewMutation()
				m.Set("one", "c", e.now()+hour, []byte("expires in 1h"))
				require.NoError(t, tbl.Apply(e.ctx, "r", m))
				e.clock.Advance(2 * time.Hour)
				row, err := tbl.ReadRow(e.ctx, "r")
				require.NoError(t, err)
				assert.Empty(t, row, "expired cell hidden")
				assert.Len(t, e.stored(t, "legacy", "r")["one"], 1)

				// Other tables of the instance are not guarded.
				m = bigtable.NewMutation()
				m.Set("one", "c", bigtable.ServerTime, []byte("v"))
				require.NoError(t, e.guarded.Open("other").Apply(e.ctx, "r", m))
			})
		}
	})
}

// Names are matched segment by segment; anything that is not exactly a
// table, authorized view or materialized view name is refused on a guarded
// method, since the guard cannot tell what it names.
func TestGuardRefusesNamesItCannotClassify(t *testing.T) {
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema})
	require.NoError(t, err)
	bad := []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
		FamilyName: "one", ColumnQualifier: []byte("c"), TimestampMicros: -1}}}}
	for _, c := range []struct {
		table, view string
		want        string // rule refused, "" when sent
	}{
		{table: "projects/p/instances/i/tables/legacy", want: wireguard.RuleServerTimestamp},
		{table: "projects/tables/instances/tables/tables/legacy", want: wireguard.RuleServerTimestamp},
		{view: "projects/p/instances/i/tables/legacy/authorizedViews/v", want: wireguard.RuleServerTimestamp},
		{view: "projects/p/instances/i/tables/legacy/authorizedViews/tables", want: wireguard.RuleServerTimestamp},
		{table: "projects/p/instances/i/tables/legacy", view: "projects/p/instances/i/tables/legacy/authorizedViews/v", want: wireguard.RuleServerTimestamp},
		{table: "projects/p/instances/legacy/tables/x"},
		{table: "projects/legacy/instances/tables/tables/tables"},
		{table: "projects/p/instances/i/tables/other", view: "projects/p/instances/i/tables/legacy/authorizedViews/v", want: wireguard.RuleUnclassifiable},
		{table: "projects/p/instances/i/tables/legacy", view: "projects/q/instances/i/tables/legacy/authorizedViews/v", want: wireguard.RuleUnclassifiable},
		{table: "projects/p/instances/i/tables/legacy/authorizedViews/v", want: wireguard.RuleUnclassifiable},
		{view: "projects/p/instances/i/tables/legacy", want: wireguard.RuleUnclassifiable},
		{table: "projects/p/instances/i/tables/legacy/", want: wireguard.RuleUnclassifiable},
		{table: "projects/p/instances/i/tables/", want: wireguard.RuleUnclassifiable},
		{table: "projects//instances/i/tables/legacy", want: wireguard.RuleUnclassifiable},
		{table: "tables/legacy", want: wireguard.RuleUnclassifiable},
		{table: "legacy", want: wireguard.RuleUnclassifiable},
		{want: wireguard.RuleUnclassifiable},
	} {
		sent := false
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			sent = true
			return nil
		}
		req := &btpb.MutateRowRequest{TableName: c.table, AuthorizedViewName: c.view, RowKey: []byte("r"), Mutations: bad}
		err := g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/MutateRow", req, &btpb.MutateRowResponse{}, nil, invoker)
		if c.want == "" {
			assert.NoError(t, err, "%+v", c)
			assert.True(t, sent, "%+v", c)
			continue
		}
		if assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%+v: %v", c, err) {
			assert.Contains(t, err.Error(), "rule "+c.want, "%+v", c)
		}
		assert.False(t, sent, "%+v", c)
	}
}

// The interceptors type-switched on the generated request types, so the same
// MutateRowRequest sent as a dynamicpb.Message through conn.Invoke was not
// inspected and its cell was stored (issue 14, finding 2).
func TestGuardInspectsRequestsOfAnotherGoType(t *testing.T) {
	servers(t, func(t *testing.T, addr string) {
		e := newInstanceEnv(t, addr, "p", "i", wireguard.WithReadFilter())
		dynamic := func(m proto.Message) *dynamicpb.Message {
			b, err := proto.Marshal(m)
			require.NoError(t, err)
			d := dynamicpb.NewMessage(m.ProtoReflect().Descriptor())
			require.NoError(t, proto.Unmarshal(b, d))
			return d
		}
		setCell := func(ts int64) []*btpb.Mutation {
			return []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: "one", ColumnQualifier: []byte("c"), TimestampMicros: ts, Value: []byte("v")}}}}
		}

		err := e.conn.Invoke(e.ctx, "/google.bigtable.v2.Bigtable/MutateRow",
			dynamic(&btpb.MutateRowRequest{TableName: e.tableName, RowKey: []byte("r"), Mutations: setCell(-1)}), &btpb.MutateRowResponse{})
		requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleServerTimestamp)

		cs, err := e.conn.NewStream(e.ctx, &grpc.StreamDesc{ServerStreams: true}, "/google.bigtable.v2.Bigtable/MutateRows")
		require.NoError(t, err)
		err = cs.SendMsg(dynamic(&btpb.MutateRowsRequest{TableName: e.tableName,
			Entries: []*btpb.MutateRowsRequest_Entry{{RowKey: []byte("r"), Mutations: setCell(-1)}}}))
		requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleServerTimestamp)
		requireCode(t, codes.FailedPrecondition, cs.RecvMsg(&btpb.MutateRowsResponse{}))
		assert.Nil(t, e.stored(t, "legacy", "r"), "nothing reached the server")

		// A dynamic read gets the read filter like a generated one.
		hour := int64(time.Hour / time.Microsecond)
		require.NoError(t, e.conn.Invoke(e.ctx, "/google.bigtable.v2.Bigtable/MutateRow",
			dynamic(&btpb.MutateRowRequest{TableName: e.tableName, RowKey: []byte("r"), Mutations: setCell(int64(e.now()) + hour)}), &btpb.MutateRowResponse{}))
		e.clock.Advance(2 * time.Hour)
		cs, err = e.conn.NewStream(e.ctx, &grpc.StreamDesc{ServerStreams: true}, "/google.bigtable.v2.Bigtable/ReadRows")
		require.NoError(t, err)
		require.NoError(t, cs.SendMsg(dynamic(&btpb.ReadRowsRequest{TableName: e.tableName})))
		require.NoError(t, cs.CloseSend())
		var chunks int
		for {
			var resp btpb.ReadRowsResponse
			if err := cs.RecvMsg(&resp); err != nil {
				break
			}
			chunks += len(resp.GetChunks())
		}
		assert.Zero(t, chunks, "the expired cell is filtered out")
		assert.Len(t, e.stored(t, "legacy", "r")["one"], 1, "though still stored")
	})
}

// What the guard cannot decode or does not know is refused, not sent.
func TestGuardRefusesWhatItCannotDecode(t *testing.T) {
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema})
	require.NoError(t, err)
	const name = "projects/p/instances/i/tables/legacy"
	call := func(req any) (bool, error) {
		sent := false
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			sent = true
			return nil
		}
		err := g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/MutateRow", req, &btpb.MutateRowResponse{}, nil, invoker)
		return sent, err
	}

	sent, err := call(struct{ TableName string }{name})
	requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleUnclassifiable, "not a protocol buffer message")
	assert.False(t, sent)

	// A field from a newer proto (number 99): it might name a resource.
	req := &btpb.MutateRowRequest{TableName: name, RowKey: []byte("r")}
	req.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "x"))
	sent, err = call(req)
	requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleUnclassifiable, "[99]")
	assert.False(t, sent)

	// A kind of mutation newer than the guard's protos.
	m := &btpb.Mutation{}
	m.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), nil))
	sent, err = call(&btpb.MutateRowRequest{TableName: name, RowKey: []byte("r"), Mutations: []*btpb.Mutation{m}})
	requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleUnclassifiable, "mutations[0].99")
	assert.False(t, sent)

	// A mutation with no kind set at all.
	sent, err = call(&btpb.MutateRowRequest{TableName: name, RowKey: []byte("r"), Mutations: []*btpb.Mutation{{}}})
	requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleUnclassifiable, "mutation of a kind")
	assert.False(t, sent)

	// A message that does not decode as the method's request.
	sent, err = call(&btpb.ReadRowsResponse{Chunks: []*btpb.ReadRowsResponse_CellChunk{{RowKey: []byte("k")}}})
	requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleUnclassifiable)
	assert.False(t, sent)

	// Unguarded tables are untouched whatever their type.
	sent, err = call(&btpb.MutateRowRequest{TableName: "projects/p/instances/i/tables/other", RowKey: []byte("r")})
	require.NoError(t, err)
	assert.True(t, sent)
}

func grpcInsecure() grpc.DialOption { return grpc.WithTransportCredentials(insecure.NewCredentials()) }
