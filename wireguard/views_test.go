package wireguard_test

import (
	"context"
	"testing"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// sendReadRows runs req through g's stream interceptor and returns what
// would reach the server (nil when nothing) and the interceptor's error.
func sendReadRows(t *testing.T, g *wireguard.Guard, req *btpb.ReadRowsRequest) (*btpb.ReadRowsRequest, error) {
	t.Helper()
	var sent []any
	streamer := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
		return sentStream{sent: &sent}, nil
	}
	cs, err := g.StreamClientInterceptor()(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, "/google.bigtable.v2.Bigtable/ReadRows", streamer)
	require.NoError(t, err)
	if err := cs.SendMsg(req); err != nil {
		require.Empty(t, sent)
		return nil, err
	}
	require.Len(t, sent, 1)
	return sent[0].(*btpb.ReadRowsRequest), nil
}

// hasTTLFilter: the request's filter is the TTL filter (an interleave of
// one branch per managed family and one for the rest), or a chain starting
// with it.
func hasTTLFilter(r *btpb.ReadRowsRequest) bool {
	f := r.GetFilter()
	if c := f.GetChain().GetFilters(); len(c) == 2 {
		f = c[0]
	}
	return len(f.GetInterleave().GetFilters()) > 1
}

// A request naming a guarded table's authorized view is checked and filtered
// as the table; one that names an unguarded table and a guarded table's view
// is refused, not checked against the unguarded table only
// (issue 14, finding 7 (and issue 18)).
func TestGuardChecksAuthorizedViewsAsTheirTable(t *testing.T) {
	servers(t, func(t *testing.T, addr string) {
		e := newInstanceEnv(t, addr, "p", "i", wireguard.WithReadFilter())
		view := e.guarded.OpenAuthorizedView("legacy", "v")
		bad := bigtable.NewMutation()
		bad.Set("one", "c", bigtable.ServerTime, []byte("v"))
		requireCode(t, codes.FailedPrecondition, view.Apply(e.ctx, "r", bad), "rule "+wireguard.RuleServerTimestamp, `table "legacy"`)
		rmw := bigtable.NewReadModifyWrite()
		rmw.Increment("seq", "n", 1)
		_, err := view.ApplyReadModifyWrite(e.ctx, "r", rmw)
		requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleServerAssignedTimestamp)

		// Both names set, disagreeing: the emulators write to table_name,
		// the guard cannot tell which one a server would use.
		err = e.conn.Invoke(e.ctx, "/google.bigtable.v2.Bigtable/MutateRow", &btpb.MutateRowRequest{
			TableName:          "projects/p/instances/i/tables/other",
			AuthorizedViewName: e.tableName + "/authorizedViews/v",
			RowKey:             []byte("r"),
			Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: "one", ColumnQualifier: []byte("c"), TimestampMicros: -1, Value: []byte("v")}}}},
		}, &btpb.MutateRowResponse{})
		requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleUnclassifiable, "names both")
		assert.Nil(t, e.stored(t, "other", "r"), "nothing reached the server")
		assert.Nil(t, e.stored(t, "legacy", "r"))
	})

	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, wireguard.WithReadFilter())
	require.NoError(t, err)
	got, err := sendReadRows(t, g, &btpb.ReadRowsRequest{AuthorizedViewName: "projects/p/instances/i/tables/legacy/authorizedViews/v"})
	require.NoError(t, err)
	assert.True(t, hasTTLFilter(got), "a read of the view gets the table's TTL filter")
}

// A ReadRows naming a materialized view reached the server with no TTL filter.
// Its name does not say which table it reads: an undeclared view is refused, a
// declared one gets its schema's filter (issue 14, finding 7).
func TestGuardMaterializedViews(t *testing.T) {
	servers(t, func(t *testing.T, addr string) {
		e := newInstanceEnv(t, addr, "p", "i", wireguard.WithReadFilter())
		err := e.guarded.OpenMaterializedView("mv").ReadRows(e.ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { return true })
		requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleUndeclaredMaterializedView, `"mv"`, "WithMaterializedView")

		// Without WithReadFilter the guard filters no read, views included.
		e = newInstanceEnv(t, addr, "p", "i")
		err = e.guarded.OpenMaterializedView("mv").ReadRows(e.ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { return true })
		assert.NotEqual(t, codes.FailedPrecondition, status.Code(err), "reached the server: %v", err)
	})

	mv := &btpb.ReadRowsRequest{MaterializedViewName: "projects/p/instances/i/materializedViews/mv"}
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, wireguard.WithReadFilter(),
		wireguard.WithMaterializedView("mv", legacySchema), wireguard.WithMaterializedView("counts", strategy.Schema{}))
	require.NoError(t, err)
	got, err := sendReadRows(t, g, mv)
	require.NoError(t, err)
	assert.True(t, hasTTLFilter(got), "the declared schema's filter")
	counts := &btpb.ReadRowsRequest{MaterializedViewName: "projects/p/instances/i/materializedViews/counts"}
	got, err = sendReadRows(t, g, counts)
	require.NoError(t, err)
	assert.Same(t, counts, got, "a view declared with no managed family is sent as it is")
	_, err = sendReadRows(t, g, &btpb.ReadRowsRequest{MaterializedViewName: "projects/p/instances/i/materializedViews/other"})
	requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleUndeclaredMaterializedView)
	_, err = sendReadRows(t, g, &btpb.ReadRowsRequest{MaterializedViewName: "projects/p/instances/i/tables/legacy/materializedViews/mv"})
	requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleUnclassifiable)
	_, err = sendReadRows(t, g, &btpb.ReadRowsRequest{TableName: "projects/p/instances/i/tables/legacy", MaterializedViewName: mv.MaterializedViewName})
	requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleUnclassifiable, "names both")

	_, err = wireguard.New(nil, wireguard.WithMaterializedView("mv", nil), wireguard.WithMaterializedView("mv", legacySchema))
	assert.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	_, err = wireguard.New(nil, wireguard.WithMaterializedView("projects/p/instances/i/materializedViews/mv", nil))
	assert.ErrorIs(t, err, strategy.ErrInvalidPolicy)
}

// SQL reaches the server with no row filter. The guard refuses PrepareQuery
// and ExecuteQuery while it guards a managed family, unless WithSQLAllowed
// says otherwise (issue 18).
func TestGuardRefusesSQLUnlessAllowed(t *testing.T) {
	servers(t, func(t *testing.T, addr string) {
		e := newInstanceEnv(t, addr, "p", "i")
		_, err := e.guarded.PrepareStatement(e.ctx, "SELECT _key FROM legacy", nil)
		requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleSQL, "WithSQLAllowed")
		_, err = e.conn.NewStream(e.ctx, &grpc.StreamDesc{ServerStreams: true}, "/google.bigtable.v2.Bigtable/ExecuteQuery")
		requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleSQL)

		e = newInstanceEnv(t, addr, "p", "i", wireguard.WithSQLAllowed())
		_, err = e.guarded.PrepareStatement(e.ctx, "SELECT _key FROM legacy", nil)
		assert.NotEqual(t, codes.FailedPrecondition, status.Code(err), "reached the server (neither emulator runs SQL): %v", err)
	})

	// A guard of unmanaged families only has nothing SQL could leak.
	g, err := wireguard.New(map[string]strategy.Schema{"plain": {"p": strategy.Unmanaged()}})
	require.NoError(t, err)
	sent := false
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		sent = true
		return nil
	}
	require.NoError(t, g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/PrepareQuery",
		&btpb.PrepareQueryRequest{InstanceName: "projects/p/instances/i", Query: "SELECT 1"}, &btpb.PrepareQueryResponse{}, nil, invoker))
	assert.True(t, sent)
}

// A server-timestamp write sent through a raw client to a guarded table's
// authorized view is refused on every write path (MutateRow, MutateRows, both
// branches of CheckAndMutateRow). The emulators answer a request naming a view
// NotFound (they serve no views), so FailedPrecondition with the rule is what
// shows the guard refused it (issue 18, acceptance 4).
func TestGuardRefusesServerTimeWritesThroughAView(t *testing.T) {
	servers(t, func(t *testing.T, addr string) {
		e := newInstanceEnv(t, addr, "p", "i")
		view := e.guarded.OpenAuthorizedView("legacy", "v")
		bad := bigtable.NewMutation()
		bad.Set("one", "c", bigtable.ServerTime, []byte("v"))
		requireCode(t, codes.FailedPrecondition, view.Apply(e.ctx, "r", bad), "rule "+wireguard.RuleServerTimestamp, `table "legacy"`)

		good := bigtable.NewMutation()
		good.Set("plain", "c", bigtable.ServerTime, []byte("v"))
		_, err := view.ApplyBulk(e.ctx, []string{"ok", "r"}, []*bigtable.Mutation{good, bad})
		requireCode(t, codes.FailedPrecondition, err, "rule "+wireguard.RuleServerTimestamp)

		for _, cond := range []*bigtable.Mutation{
			bigtable.NewCondMutation(bigtable.PassAllFilter(), bad, nil),
			bigtable.NewCondMutation(bigtable.PassAllFilter(), nil, bad),
		} {
			requireCode(t, codes.FailedPrecondition, view.Apply(e.ctx, "r", cond), "rule "+wireguard.RuleServerTimestamp)
		}
	})
}
