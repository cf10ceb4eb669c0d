package metrics_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/expiry"
)

// streamStock runs a real expiry notifier (changestream/expiry) on the
// change-stream test server, registering its stock gauge on reg: table t
// holds one one-second cell expired a minute ago, which the notifier is
// handed as its change, announces and counts (family one: 1; def: 0).
func streamStock(t *testing.T, reg prometheus.Registerer) {
	t.Helper()
	ctx := context.Background()
	srv, err := changestreams.Start(ctx, changestreams.Config{})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	admin, err := bigtable.NewAdminClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(conn))
	require.NoError(t, err)
	// No GC rule: the cell stays stored past its expiry, as on Bigtable
	// until its GC runs.
	fams := map[string]bigtable.GCPolicy{}
	for f := range schema() {
		fams[f] = bigtable.NoGcPolicy()
	}
	for id, fs := range map[string]map[string]bigtable.GCPolicy{
		table:   fams,
		"idx":   {expiry.TimerFamily: bigtable.NoGcPolicy(), expiry.LeaseFamily: bigtable.NoGcPolicy(), expiry.ExpiredFamily: bigtable.NoGcPolicy()},
		"state": {"cs": bigtable.NoGcPolicy()},
	} {
		require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: id, Families: fs}))
	}
	client, err := bigtable.NewClientWithConfig(ctx, changestreams.DefaultProject, changestreams.DefaultInstance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(conn))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })

	ts := bigtable.Time(time.Now().Add(-time.Minute)).TruncateToMilliseconds()
	m := bigtable.NewMutation()
	m.Set(famOne, "c", ts, []byte("v"))
	require.NoError(t, client.Open(table).Apply(ctx, "r", m))
	store := changestream.NewBigtableStore(client.Open("state"), "cs", table+"#")
	nt, err := expiry.New(client, table, schema(), "idx", store, func(context.Context, expiry.Event) error { return nil },
		expiry.WithRegisterer(reg))
	require.NoError(t, err)
	require.NoError(t, nt.Handle(ctx, changestream.Change{Table: table, Type: changestream.User, RowKey: []byte("r"), CommitTime: time.Now(),
		Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
			FamilyName: famOne, ColumnQualifier: []byte("c"), TimestampMicros: int64(ts), Value: []byte("v")}}}}}))
	n, err := nt.Poll(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the expired cell is announced")
}
