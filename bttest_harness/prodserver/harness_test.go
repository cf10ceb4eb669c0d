package prodserver_test

import (
	"context"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
	"github.com/bttl/bttl/strategy"
)

// The harness runs on the server as on an emulator (Config.Addr): its
// clients use the default profile, and its tables are created on every
// cluster.
func TestHarnessOnAReplicatedInstance(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{
		Clusters: []prodserver.Cluster{{ID: "a"}, {ID: "b"}},
		Profiles: []prodserver.AppProfile{prodserver.SingleCluster("b", "b", false)},
	})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: s.Addr, NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	require.NoError(t, h.CreateTable(context.Background(), "events", strategy.Schema{family: strategy.Unmanaged()}))
	s.RouteMultiCluster("a")
	tbl := h.Raw.Open("events")
	require.NoError(t, tbl.Apply(context.Background(), "r", set("c", 1000, "v")))
	// The default profile of a replicated instance is multi-cluster:
	// transactions are refused.
	requireCode(t, tbl.Apply(context.Background(), "r", condMutation()), codes.FailedPrecondition, "Single-row transactions")
	require.NoError(t, s.Flush(context.Background()))
	onB, err := bigtable.NewClientWithConfig(context.Background(), bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{AppProfile: "b", MetricsProvider: bigtable.NoopMetricsProvider{}}, optionConn(t, s.Addr))
	require.NoError(t, err)
	t.Cleanup(func() { _ = onB.Close() })
	require.Len(t, readCells(t, onB.Open("events"), "r"), 1)
}
