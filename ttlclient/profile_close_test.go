package ttlclient_test

import (
	"context"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/ttlclient"
)

// A client given the caller's connection (option.WithGRPCConn) dials its
// transactional client on it too: Close closes that connection once per
// client, and the second close's "already closed" is not an error of
// Close, with a transactional profile as without one.
func TestCloseWithATransactionalProfileOnTheCallersConnection(t *testing.T) {
	s := profileServer(t)
	for name, txn := range map[string]string{"without": "", "with": profTxn} {
		t.Run(name, func(t *testing.T) {
			conn, err := grpc.NewClient(s.Addr, append(ttlclient.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			c, err := ttlclient.NewClientWithConfig(context.Background(), bttestharness.Project, bttestharness.Instance,
				ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{AppProfile: profMulti, MetricsProvider: bigtable.NoopMetricsProvider{}}, TransactionalAppProfile: txn},
				option.WithGRPCConn(conn))
			require.NoError(t, err)
			require.NoError(t, c.Close())
		})
	}
}
