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

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// With WithUnlistedFamilies(Unmanaged()) a family the schema does not name
// passes the guard as unmanaged, written and read as the raw client would,
// while the schema's managed families keep every rule and their read filter;
// without the option the same write is refused (issue 28).
func TestGuardUnlistedFamiliesPassAsUnmanaged(t *testing.T) {
	e := newEnv(t, wireguard.WithUnlistedFamilies(strategy.Unmanaged()), wireguard.WithReadFilter())
	require.NoError(t, e.h.Admin.CreateColumnFamily(e.ctx, "legacy", "extra"))

	m := bigtable.NewMutation()
	m.Set("extra", "a", 1000, []byte("old"))
	m.Set("extra", "a", bigtable.ServerTime, []byte("server"))
	m.DeleteTimestampRange("extra", "b", 0, 5000)
	require.NoError(t, e.tbl.Apply(e.ctx, "r", m))
	rmw := bigtable.NewReadModifyWrite()
	rmw.Increment("extra", "n", 2)
	_, err := e.tbl.ApplyReadModifyWrite(e.ctx, "r", rmw)
	require.NoError(t, err)
	assert.Len(t, e.stored(t, "r")["extra"], 3)

	// An expired one-second cell stored past the guard, beside them.
	raw := e.h.Raw.Open("legacy")
	old := bigtable.NewMutation()
	old.Set("one", "t", e.now()-1000, []byte("expired"))
	require.NoError(t, raw.Apply(e.ctx, "r", old))

	got, err := e.tbl.ReadRow(e.ctx, "r")
	require.NoError(t, err)
	want, err := raw.ReadRow(e.ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, want["extra"], got["extra"], "the unlisted family read as the raw client reads it")
	assert.Empty(t, got["one"], "the managed family is still filtered")
	assert.Len(t, want["one"], 1)

	// The managed families keep their rules.
	bad := bigtable.NewMutation()
	bad.Set("one", "t", bigtable.ServerTime, []byte("x"))
	requireRefused(t, e.tbl.Apply(e.ctx, "r2", bad), wireguard.RuleServerTimestamp, "one", "t")

	// An empty family name passes the guard too: what the server says
	// about it is the server's answer, not a refusal.
	empty := bigtable.NewMutation()
	empty.Set("", "", 0, nil)
	err = e.tbl.Apply(e.ctx, "r3", empty)
	if err != nil {
		assert.NotContains(t, err.Error(), "wire guard refused")
	}

	// The default stays strict.
	strict := newEnv(t)
	require.NoError(t, strict.h.Admin.CreateColumnFamily(strict.ctx, "legacy", "extra"))
	m = bigtable.NewMutation()
	m.Set("extra", "a", 1000, []byte("old"))
	requireRefused(t, strict.tbl.Apply(strict.ctx, "r", m), wireguard.RuleUnknownFamily, "extra", "a")
	m = bigtable.NewMutation()
	m.Set("", "", 0, nil)
	requireRefused(t, strict.tbl.Apply(strict.ctx, "r", m), wireguard.RuleUnknownFamily, "", "")
}

// The unlisted policy must be Unmanaged(): New refuses another.
func TestGuardUnlistedFamiliesMustBeUnmanaged(t *testing.T) {
	for _, p := range []strategy.Policy{strategy.OneSecond(), strategy.DefaultExpiry(time.Hour), strategy.Sequence(2)} {
		_, err := wireguard.New(map[string]strategy.Schema{"t": {"f": strategy.Unmanaged()}}, wireguard.WithUnlistedFamilies(p))
		require.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	}
}

// Named tables: the option holds for them only; a name the guard does not
// guard is refused.
func TestGuardUnlistedFamiliesPerTable(t *testing.T) {
	schemas := map[string]strategy.Schema{"a": {"f": strategy.Unmanaged()}, "b": {"f": strategy.Unmanaged()}}
	g, err := wireguard.New(schemas, wireguard.WithUnlistedFamilies(strategy.Unmanaged(), "a"))
	require.NoError(t, err)
	for table, want := range map[string]codes.Code{"a": codes.OK, "b": codes.FailedPrecondition} {
		sent := false
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			sent = true
			return nil
		}
		req := &btpb.MutateRowRequest{TableName: "projects/p/instances/i/tables/" + table, RowKey: []byte("r"),
			Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{FamilyName: "other", TimestampMicros: 1000}}}}}
		err := g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/MutateRow", req, &btpb.MutateRowResponse{}, nil, invoker)
		assert.Equal(t, want, status.Code(err), "table %s: %v", table, err)
		assert.Equal(t, want == codes.OK, sent, table)
	}
	_, err = wireguard.New(schemas, wireguard.WithUnlistedFamilies(strategy.Unmanaged(), "c"))
	require.ErrorIs(t, err, strategy.ErrInvalidPolicy)
}

// The Verify probe writes a family no schema names: with unlisted families
// passing, the guard still refuses it, so Verify still tells an installed
// guard.
func TestGuardUnlistedFamiliesKeepVerify(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "legacy", legacySchema))
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, wireguard.WithUnlistedFamilies(strategy.Unmanaged()))
	require.NoError(t, err)
	copts := append([]option.ClientOption{
		option.WithEndpoint(h.Addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}, g.ClientOptions()...)
	plain, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true}, copts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	require.NoError(t, g.Verify(ctx, plain, "legacy"))
}

// WithUnlistedFamilies given twice kept only the last call's tables. They add
// up; a call naming no table makes it hold for all; a refused policy is not
// replaced (suspected in issue 35 item 7, and real).
func TestGuardUnlistedFamiliesTwiceAddUp(t *testing.T) {
	schemas := map[string]strategy.Schema{"a": {"f": strategy.Unmanaged()}, "b": {"f": strategy.Unmanaged()}, "c": {"f": strategy.Unmanaged()}}
	u := strategy.Unmanaged()
	for name, c := range map[string]struct {
		opts []wireguard.Option
		pass map[string]bool
	}{
		"a then b":   {[]wireguard.Option{wireguard.WithUnlistedFamilies(u, "a"), wireguard.WithUnlistedFamilies(u, "b")}, map[string]bool{"a": true, "b": true}},
		"a then all": {[]wireguard.Option{wireguard.WithUnlistedFamilies(u, "a"), wireguard.WithUnlistedFamilies(u)}, map[string]bool{"a": true, "b": true, "c": true}},
		"all then a": {[]wireguard.Option{wireguard.WithUnlistedFamilies(u), wireguard.WithUnlistedFamilies(u, "a")}, map[string]bool{"a": true, "b": true, "c": true}},
	} {
		g, err := wireguard.New(schemas, c.opts...)
		require.NoError(t, err, name)
		for _, table := range []string{"a", "b", "c"} {
			invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
			req := &btpb.MutateRowRequest{TableName: "projects/p/instances/i/tables/" + table, RowKey: []byte("r"),
				Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{FamilyName: "other", TimestampMicros: 1000}}}}}
			err := g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/MutateRow", req, &btpb.MutateRowResponse{}, nil, invoker)
			assert.Equal(t, c.pass[table], err == nil, "%s: table %s: %v", name, table, err)
		}
	}
	_, err := wireguard.New(schemas, wireguard.WithUnlistedFamilies(strategy.OneSecond(), "a"), wireguard.WithUnlistedFamilies(u, "b"))
	require.ErrorIs(t, err, strategy.ErrInvalidPolicy, "a refused policy stays refused")
}
