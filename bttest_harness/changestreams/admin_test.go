package changestreams_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/bttest"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func adminOn(t *testing.T, addr string) *bigtable.AdminClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ac, err := bigtable.NewAdminClient(context.Background(), "project", "instance", option.WithGRPCConn(conn))
	require.NoError(t, err)
	return ac
}

// retention is what TableInfo says of the table's change stream (0: off).
func retention(t *testing.T, ac *bigtable.AdminClient, table string) time.Duration {
	t.Helper()
	ti, err := ac.TableInfo(context.Background(), table)
	require.NoError(t, err)
	if ti.ChangeStreamRetention == nil {
		return 0
	}
	return ti.ChangeStreamRetention.(time.Duration)
}

// The change stream configuration through the client's public API
// (UpdateTableWithChangeStream, UpdateTableDisableChangeStream,
// TableConf.ChangeStreamRetention, TableInfo), per the proto docs cited in
// admin.go.
func TestChangeStreamConfig(t *testing.T) {
	ctx := context.Background()
	srv, err := changestreams.Start(ctx, changestreams.Config{})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	ac := adminOn(t, srv.Addr)
	require.NoError(t, ac.CreateTable(ctx, "t"))
	assert.Zero(t, retention(t, ac, "t"), "a new table has no change stream")

	require.NoError(t, ac.UpdateTableWithChangeStream(ctx, "t", 3*24*time.Hour))
	assert.Equal(t, 3*24*time.Hour, retention(t, ac, "t"))
	require.NoError(t, ac.UpdateTableWithChangeStream(ctx, "t", 7*24*time.Hour+time.Nanosecond))
	assert.Equal(t, 7*24*time.Hour, retention(t, ac, "t"), "truncated to microseconds")

	for _, d := range []time.Duration{time.Hour, 24*time.Hour - time.Microsecond, 7*24*time.Hour + time.Microsecond} {
		err := ac.UpdateTableWithChangeStream(ctx, "t", d)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", d, err)
	}
	assert.Equal(t, 7*24*time.Hour, retention(t, ac, "t"), "a refused update changes nothing")

	require.NoError(t, ac.UpdateTableDisableChangeStream(ctx, "t"))
	assert.Zero(t, retention(t, ac, "t"))

	// Deletion protection still reaches the backend, the stream untouched.
	require.NoError(t, ac.UpdateTableWithChangeStream(ctx, "t", 24*time.Hour))
	require.NoError(t, ac.UpdateTableWithDeletionProtection(ctx, "t", bigtable.Protected))
	assert.Equal(t, 24*time.Hour, retention(t, ac, "t"))
	ti, err := ac.TableInfo(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, bigtable.Protected, ti.DeletionProtection)

	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "u", ChangeStreamRetention: 2 * 24 * time.Hour}))
	assert.Equal(t, 2*24*time.Hour, retention(t, ac, "u"))
	err = ac.UpdateTableWithChangeStream(ctx, "absent", 24*time.Hour)
	assert.Equal(t, codes.NotFound, status.Code(err), "%v", err)
}

// Why this server keeps the configuration: bttest (and cbtemulator, built
// from it) accepts UpdateTableWithChangeStream but keeps nothing, so
// TableInfo reports no change stream after it.
func TestBttestKeepsNoChangeStreamConfig(t *testing.T) {
	srv, err := bttest.NewServer("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	ac := adminOn(t, srv.Addr)
	ctx := context.Background()
	require.NoError(t, ac.CreateTable(ctx, "t"))
	require.NoError(t, ac.UpdateTableWithChangeStream(ctx, "t", 3*24*time.Hour))
	assert.Zero(t, retention(t, ac, "t"))
}
