package prodserver_test

import (
	"context"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/bttest_harness/prodserver"
)

const (
	project  = "p"
	instance = "i"
	family   = "f"
)

// dial returns a connection to addr, closed when the test ends.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// client is the raw bigtable client on addr with app profile profile.
func client(t *testing.T, addr, profile string) *bigtable.Client {
	t.Helper()
	c, err := bigtable.NewClientWithConfig(context.Background(), project, instance,
		bigtable.ClientConfig{AppProfile: profile, MetricsProvider: bigtable.NoopMetricsProvider{}},
		option.WithGRPCConn(dial(t, addr)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// table is table name of the server s through profile.
func table(t *testing.T, s *prodserver.Server, profile, name string) *bigtable.Table {
	t.Helper()
	return client(t, s.Addr, profile).Open(name)
}

// createTable creates name, with family f (no GC rule), through the
// server's admin API: on every cluster.
func createTable(t *testing.T, s *prodserver.Server, name string) {
	t.Helper()
	ac, err := bigtable.NewAdminClient(context.Background(), project, instance, option.WithGRPCConn(dial(t, s.Addr)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ac.Close() })
	require.NoError(t, ac.CreateTableFromConf(context.Background(), &bigtable.TableConf{
		TableID: name, ColumnFamilies: map[string]bigtable.Family{family: {}},
	}))
}

// set is a mutation writing v to column c at ts.
func set(c string, ts bigtable.Timestamp, v string) *bigtable.Mutation {
	m := bigtable.NewMutation()
	m.Set(family, c, ts, []byte(v))
	return m
}

// requireCode fails unless err has code c and its message contains msg.
func requireCode(t *testing.T, err error, c codes.Code, msg string) {
	t.Helper()
	require.Error(t, err)
	st, ok := status.FromError(err)
	require.True(t, ok, "not a gRPC status: %v", err)
	require.Equal(t, c, st.Code(), "%v", err)
	require.Contains(t, st.Message(), msg)
}

// cells is row's newest cell per column of family f.
func cells(row bigtable.Row) map[string]bigtable.ReadItem {
	out := map[string]bigtable.ReadItem{}
	for _, it := range row[family] {
		if _, seen := out[it.Column]; !seen {
			out[it.Column] = it
		}
	}
	return out
}

func optionConn(t *testing.T, addr string) option.ClientOption {
	return option.WithGRPCConn(dial(t, addr))
}
