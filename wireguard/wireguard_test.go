package wireguard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

var legacySchema = strategy.Schema{
	"one":   strategy.OneSecond(),
	"seq":   strategy.Sequence(2),
	"plain": strategy.Unmanaged(),
}

type env struct {
	h     *bttestharness.Harness
	plain *bigtable.Client // carries the guard's interceptors
	tbl   *bigtable.Table
	ctx   context.Context
}

// newEnv starts the in-process server and a plain *bigtable.Client dialled
// to it with the guard installed through option.WithGRPCDialOption.
func newEnv(t *testing.T, opts ...wireguard.Option) *env {
	t.Helper()
	// With BIGTABLE_EMULATOR_HOST set the client ignores dial options; this
	// test dials the endpoint itself.
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	// NoGC: the tests check what the guard hides among cells still stored.
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "legacy", legacySchema))
	require.NoError(t, h.CreateTable(ctx, "other", strategy.Schema{"one": strategy.OneSecond()}))

	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, append([]wireguard.Option{wireguard.WithClock(h.Clock)}, opts...)...)
	require.NoError(t, err)
	plain := guardedClient(t, h.Addr, g)
	return &env{h: h, plain: plain, tbl: plain.Open("legacy"), ctx: ctx}
}

func (e *env) now() bigtable.Timestamp { return bigtable.Timestamp(e.h.Clock.Now().UnixMicro()) }

func (e *env) stored(t *testing.T, row string) bigtable.Row {
	t.Helper()
	r, err := e.h.Stored(e.ctx, "legacy", row)
	require.NoError(t, err)
	return r
}

func requireRefused(t *testing.T, err error, rule, family, column string) {
	t.Helper()
	require.Error(t, err)
	st, ok := status.FromError(err)
	require.True(t, ok, err)
	assert.Equal(t, codes.FailedPrecondition, st.Code(), err)
	for _, part := range []string{"rule " + rule, `table "legacy"`, `family "` + family + `"`, `column "` + column + `"`} {
		assert.Contains(t, st.Message(), part)
	}
}

func TestGuardRefusesServerTimestampOnOneSecondFamily(t *testing.T) {
	e := newEnv(t)
	m := bigtable.NewMutation()
	m.Set("one", "token", bigtable.ServerTime, []byte("oops"))
	requireRefused(t, e.tbl.Apply(e.ctx, "r1", m), wireguard.RuleServerTimestamp, "one", "token")
	assert.Nil(t, e.stored(t, "r1"), "nothing reached the server")

	// A real timestamp on a one-second family would expire at once.
	m = bigtable.NewMutation()
	m.Set("one", "token", e.now(), []byte("oops"))
	requireRefused(t, e.tbl.Apply(e.ctx, "r1", m), wireguard.RuleExpiredOnArrival, "one", "token")
	assert.Nil(t, e.stored(t, "r1"))

	// A valid write passes: the expiry instant, in the future.
	m = bigtable.NewMutation()
	m.Set("one", "token", e.now()+bigtable.Timestamp(time.Hour/time.Microsecond), []byte("ok"))
	m.Set("plain", "n", bigtable.ServerTime, []byte("any")) // unmanaged: untouched
	require.NoError(t, e.tbl.Apply(e.ctx, "r1", m))
	assert.Len(t, e.stored(t, "r1")["one"], 1)
	assert.Len(t, e.stored(t, "r1")["plain"], 1)

	// Unguarded tables pass untouched.
	m = bigtable.NewMutation()
	m.Set("one", "token", bigtable.ServerTime, []byte("not guarded"))
	require.NoError(t, e.plain.Open("other").Apply(e.ctx, "r1", m))
}

func TestGuardRefusesReadModifyWriteOnManagedFamily(t *testing.T) {
	e := newEnv(t)
	rmw := bigtable.NewReadModifyWrite()
	rmw.Increment("seq", "n", 1)
	_, err := e.tbl.ApplyReadModifyWrite(e.ctx, "r", rmw)
	requireRefused(t, err, wireguard.RuleServerAssignedTimestamp, "seq", "n")
	assert.Nil(t, e.stored(t, "r"))

	rmw = bigtable.NewReadModifyWrite()
	rmw.Increment("plain", "n", 1)
	_, err = e.tbl.ApplyReadModifyWrite(e.ctx, "r", rmw)
	require.NoError(t, err)

	m := bigtable.NewMutation()
	m.AddIntToCell("one", "sum", 1000, 1)
	requireRefused(t, e.tbl.Apply(e.ctx, "r2", m), wireguard.RuleServerAssignedTimestamp, "one", "sum")
}

func TestGuardRefusesWholeMutateRows(t *testing.T) {
	e := newEnv(t)
	good := bigtable.NewMutation()
	good.Set("seq", "body", 3000, []byte("v3"))
	bad := bigtable.NewMutation()
	bad.Set("seq", "body", 0, []byte("seq 0"))
	unknown := bigtable.NewMutation()
	unknown.Set("nope", "x", 1000, []byte("?"))

	errs, err := e.tbl.ApplyBulk(e.ctx, []string{"a", "b"}, []*bigtable.Mutation{good, bad})
	if err == nil {
		require.Len(t, errs, 2)
		err = errs[1]
	}
	requireRefused(t, err, wireguard.RuleInvalidSequence, "seq", "body")
	assert.Contains(t, err.Error(), "entry 1")
	assert.Nil(t, e.stored(t, "a"), "the valid entry of a refused request is not written either")
	assert.Nil(t, e.stored(t, "b"))

	_, err = e.tbl.ApplyBulk(e.ctx, []string{"a"}, []*bigtable.Mutation{unknown})
	requireRefused(t, err, wireguard.RuleUnknownFamily, "nope", "x")

	errs, err = e.tbl.ApplyBulk(e.ctx, []string{"a", "c"}, []*bigtable.Mutation{good, good})
	require.NoError(t, err)
	require.Nil(t, errs)
	assert.Len(t, e.stored(t, "a")["seq"], 1)
}

func TestGuardChecksBothBranchesOfCheckAndMutate(t *testing.T) {
	e := newEnv(t)
	ok := bigtable.NewMutation()
	ok.Set("plain", "x", 1000, []byte("1"))
	bad := bigtable.NewMutation()
	bad.Set("one", "x", bigtable.ServerTime, []byte("2"))
	for _, m := range []*bigtable.Mutation{
		bigtable.NewCondMutation(bigtable.PassAllFilter(), ok, bad),
		bigtable.NewCondMutation(bigtable.PassAllFilter(), bad, ok),
	} {
		requireRefused(t, e.tbl.Apply(e.ctx, "r", m), wireguard.RuleServerTimestamp, "one", "x")
	}
	assert.Nil(t, e.stored(t, "r"))
	require.NoError(t, e.tbl.Apply(e.ctx, "r", bigtable.NewCondMutation(bigtable.PassAllFilter(), ok, ok)))
}

func TestGuardReadFilterHidesExpiredCells(t *testing.T) {
	e := newEnv(t, wireguard.WithReadFilter())
	now := e.now()
	hour := bigtable.Timestamp(time.Hour / time.Microsecond)
	m := bigtable.NewMutation()
	m.Set("one", "short", now+hour, []byte("expires in 1h"))
	m.Set("one", "long", now+3*hour, []byte("expires in 3h"))
	m.Set("plain", "meta", 1000, []byte("untouched"))
	for v := int64(1); v <= 3; v++ {
		m.Set("seq", "body", bigtable.Timestamp(v*1000), []byte{byte('0' + v)})
	}
	require.NoError(t, e.tbl.Apply(e.ctx, "r", m))

	// Two hours later by the guard's clock: "short" is expired but the
	// server (on real time) has not collected it.
	e.h.Clock.Advance(2 * time.Hour)
	stored := e.stored(t, "r")
	require.Len(t, stored["one"], 2, "still physically stored")
	assert.Len(t, stored["seq"], 3, "max versions GC has not run yet")

	row, err := e.tbl.ReadRow(e.ctx, "r")
	require.NoError(t, err)
	require.Len(t, row["one"], 1)
	assert.Equal(t, "one:long", row["one"][0].Column)
	assert.Len(t, row["seq"], 2, "only the N kept")
	assert.Len(t, row["plain"], 1)

	// The caller's own filter runs after the TTL filter.
	row, err = e.tbl.ReadRow(e.ctx, "r", bigtable.RowFilter(bigtable.ColumnFilter("short")))
	require.NoError(t, err)
	assert.Empty(t, row)

	var rows int
	require.NoError(t, e.tbl.ReadRows(e.ctx, bigtable.PrefixRange(""), func(r bigtable.Row) bool {
		rows++
		assert.Len(t, r["one"], 1)
		return true
	}))
	assert.Equal(t, 1, rows)

	// A condition on the expired cell no longer holds.
	set := bigtable.NewMutation()
	set.Set("plain", "hit", 1000, []byte("yes"))
	require.NoError(t, e.tbl.Apply(e.ctx, "r", bigtable.NewCondMutation(bigtable.ColumnFilter("short"), set, nil)))
	assert.Len(t, e.stored(t, "r")["plain"], 1, "predicate did not match the expired cell")
}

func TestGuardWithoutReadFilterLeavesReadsAlone(t *testing.T) {
	e := newEnv(t)
	m := bigtable.NewMutation()
	m.Set("one", "short", e.now()+bigtable.Timestamp(time.Hour/time.Microsecond), []byte("v"))
	require.NoError(t, e.tbl.Apply(e.ctx, "r", m))
	e.h.Clock.Advance(2 * time.Hour)
	row, err := e.tbl.ReadRow(e.ctx, "r")
	require.NoError(t, err)
	assert.Len(t, row["one"], 1)
}

// The session data plane carries mutations the guard cannot read: the guard
// keeps the server's configuration from moving traffic there and refuses
// session streams.
func TestGuardPinsTheClassicDataPlane(t *testing.T) {
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema})
	require.NoError(t, err)
	reply := &btpb.ClientConfiguration{}
	invoker := func(ctx context.Context, method string, req, rep any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		rep.(*btpb.ClientConfiguration).SessionConfiguration = &btpb.SessionClientConfiguration{SessionLoad: 1}
		return nil
	}
	require.NoError(t, g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/GetClientConfiguration",
		&btpb.GetClientConfigurationRequest{}, reply, nil, invoker))
	assert.Zero(t, reply.GetSessionConfiguration().GetSessionLoad())

	opened := false
	streamer := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		opened = true
		return nil, errors.New("unreachable")
	}
	_, err = g.StreamClientInterceptor()(context.Background(), &grpc.StreamDesc{}, nil, "/google.bigtable.v2.Bigtable/OpenTable", streamer)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	assert.Contains(t, err.Error(), "DisableSession")
	assert.False(t, opened)
}

func TestRefusalCarriesPreconditionFailure(t *testing.T) {
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema})
	require.NoError(t, err)
	sent := false
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		sent = true
		return nil
	}
	req := &btpb.MutateRowRequest{TableName: "projects/p/instances/i/tables/legacy", RowKey: []byte("r"),
		Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
			FamilyName: "one", ColumnQualifier: []byte("c"), TimestampMicros: -1}}}}}
	err = g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/MutateRow", req, &btpb.MutateRowResponse{}, nil, invoker)
	assert.False(t, sent)
	st := status.Convert(err)
	assert.Equal(t, codes.FailedPrecondition, st.Code())
	require.Len(t, st.Details(), 2, "a PreconditionFailure, then the ErrorInfo of the refusal registry")
	pf, ok := st.Details()[0].(*errdetails.PreconditionFailure)
	require.True(t, ok)
	assert.Equal(t, wireguard.RuleServerTimestamp, pf.Violations[0].Type)
	assert.Equal(t, `legacy/one:"c"`, pf.Violations[0].Subject, "the column as every message shows it: quoted")
}

func TestNewRejectsBadInput(t *testing.T) {
	_, err := wireguard.New(map[string]strategy.Schema{"t": {"a b": strategy.OneSecond()}})
	assert.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	_, err = wireguard.New(map[string]strategy.Schema{"projects/p/t": {}})
	assert.ErrorIs(t, err, strategy.ErrInvalidPolicy)
}
