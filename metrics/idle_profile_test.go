package metrics_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/ttlclient"
)

// On a multi-cluster profile every time-to-idle refresh is a single-row
// transaction the server refuses (prodserver: "Single-row transactions are not
// allowed by this app profile"). The refusal is never silent: each failed
// refresh is counted by reason in bttl_idle_refresh_failures_total (which
// BttlIdleRefreshesFailing watches), as failed in bttl_idle_refreshes_total,
// and the first is a warning naming the profile. With a transactional profile
// the same read refreshes the cell (issue 36).
func TestIdleRefreshOnMultiClusterProfileIsCountedAndLogged(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{Profiles: []prodserver.AppProfile{
		prodserver.MultiCluster("multi"),
		prodserver.SingleCluster("txn", prodserver.DefaultCluster, true),
	}})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: s.Addr})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	require.NoError(t, h.CreateTable(context.Background(), idleTable, idleSchema()))

	run := func(txnProfile string) (*metrics.Recorder, string) {
		conn, err := grpc.NewClient(s.Addr, append(ttlclient.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		rec := metrics.New()
		var logs bytes.Buffer
		c, err := ttlclient.NewClientWithConfig(context.Background(), bttestharness.Project, bttestharness.Instance, ttlclient.ClientConfig{
			ClientConfig:            bigtable.ClientConfig{AppProfile: "multi", MetricsProvider: bigtable.NoopMetricsProvider{}},
			TransactionalAppProfile: txnProfile,
			Options:                 []ttlclient.ClientOption{ttlclient.WithRecorder(rec), ttlclient.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))},
		}, option.WithGRPCConn(conn))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		ctx := context.Background()
		tbl, err := c.Open(ctx, idleTable, idleSchema())
		require.NoError(t, err)
		m := ttlclient.NewMutation()
		m.SetTTL(famIdle, "c", time.Minute, []byte("v")) // 1m left of a 1h idle TTL: due
		require.NoError(t, tbl.Apply(ctx, "session-"+txnProfile, m))
		r, err := tbl.ReadRow(ctx, "session-"+txnProfile)
		require.NoError(t, err)
		require.Len(t, r[famIdle], 1, "the read is unaffected")
		require.NoError(t, c.FlushIdleRefreshes(ctx))
		return rec, logs.String()
	}

	rec, logs := run("")
	assert.Equal(t, 1.0, promValue(t, rec, metrics.IdleRefreshFailuresTotal, "table", idleTable, "family", famIdle, "reason", "transactions_not_allowed"))
	assert.Equal(t, 1.0, promValue(t, rec, metrics.IdleRefreshesTotal, "table", idleTable, "family", famIdle, "result", "failed"))
	assert.Contains(t, logs, "level=WARN")
	assert.Contains(t, logs, `app profile \"multi\"`)

	rec, _ = run("txn")
	assert.Equal(t, 0.0, promValue(t, rec, metrics.IdleRefreshFailuresTotal, "table", idleTable, "family", famIdle, "reason", "transactions_not_allowed"))
	assert.Equal(t, 1.0, promValue(t, rec, metrics.IdleRefreshesTotal, "table", idleTable, "family", famIdle, "result", "refreshed"))
}
