package ttlclient_test

import (
	"context"
	"errors"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
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

// bttl's own refusal of a Table.API write is not the server's refusal of
// an app profile, whatever the row key says: a key holding the words of
// the Data Boost refusal ("Data Boost") does not make the refusal of an
// expired cell a *ProfileError wrapping ErrReadOnlyProfile.
func TestOwnRefusalIsNotAProfileRefusal(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := bigtable.NewMutation()
	m.Set(famDef, "c", 1000, []byte("v")) // expired on arrival
	err := e.tbl.API().Apply(e.ctx, "Data Boost export", m)
	require.ErrorIs(t, err, strategy.ErrAlreadyExpired)
	assert.NotErrorIs(t, err, ttlclient.ErrReadOnlyProfile)
	var pe *ttlclient.ProfileError
	assert.False(t, errors.As(err, &pe), "%v", err)
	var ce *ttlclient.CellError
	require.ErrorAs(t, err, &ce)
}
