package prodserver_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
)

const lag = 5 * time.Second

// replicated is a two-cluster instance whose lag a manual clock measures:
// profile "a" writes to cluster a (transactions allowed), "b" reads
// cluster b, "multi" routes to either, "boost" is Data Boost on a.
func replicated(t *testing.T) (*prodserver.Server, *bttestharness.ManualClock) {
	t.Helper()
	const seed = 1
	t.Logf("seed %d (multi-cluster routing)", seed)
	clock := bttestharness.NewManualClock(time.Now())
	s := prodserver.New(t, prodserver.Config{
		Clusters: []prodserver.Cluster{{ID: "a"}, {ID: "b"}},
		Profiles: []prodserver.AppProfile{
			prodserver.SingleCluster("a", "a", true),
			prodserver.SingleCluster("b", "b", false),
			prodserver.MultiCluster("multi"),
			prodserver.DataBoost("boost", "a"),
		},
		Lag:          lag,
		DataBoostLag: 30 * time.Minute,
		Clock:        clock,
		Seed:         seed,
	})
	createTable(t, s, "t")
	return s, clock
}

func readCells(t *testing.T, tbl *bigtable.Table, row string) map[string]bigtable.ReadItem {
	t.Helper()
	r, err := tbl.ReadRow(context.Background(), row)
	require.NoError(t, err)
	return cells(r)
}

func TestReplicationAppliesAWriteToTheOtherClusterAfterTheLag(t *testing.T) {
	s, clock := replicated(t)
	ctx := context.Background()
	a, b := table(t, s, "a", "t"), table(t, s, "b", "t")
	require.NoError(t, a.Apply(ctx, "r", set("c", bigtable.ServerTime, "v")))
	onA := readCells(t, a, "r")
	require.Len(t, onA, 1)
	require.Empty(t, readCells(t, b, "r"), "cluster b before the lag")

	clock.Advance(lag - time.Millisecond)
	require.NoError(t, s.ReplicateDue(ctx))
	require.Empty(t, readCells(t, b, "r"), "cluster b a millisecond before the lag")

	clock.Advance(time.Millisecond)
	require.NoError(t, s.ReplicateDue(ctx))
	require.Equal(t, onA, readCells(t, b, "r"), "cluster b holds the same cell, server timestamp included")
	require.Equal(t, int64(1), s.Counts().Replicated)
}

func TestReplicationBothWays(t *testing.T) {
	s, _ := replicated(t)
	ctx := context.Background()
	a, b := table(t, s, "a", "t"), table(t, s, "b", "t")
	require.NoError(t, b.Apply(ctx, "r", set("c", 5000, "from b")))
	require.Empty(t, readCells(t, a, "r"))
	require.NoError(t, s.Flush(ctx))
	require.Equal(t, "from b", string(readCells(t, a, "r")[family+":c"].Value))
}

func TestMultiClusterReadMayMissAWriteMadeOnTheOtherCluster(t *testing.T) {
	s, _ := replicated(t)
	ctx := context.Background()
	multi := table(t, s, "multi", "t")
	s.RouteMultiCluster("a")
	require.NoError(t, multi.Apply(ctx, "r", set("c", 1000, "v")))
	require.NotEmpty(t, readCells(t, multi, "r"), "read on a")
	s.RouteMultiCluster("b")
	require.Empty(t, readCells(t, multi, "r"), "read on b, before replication")
	require.Equal(t, 1, s.Pending()-1, "one write pending for b (and one for a's Data Boost replica)")
	require.NoError(t, s.Flush(ctx))
	require.Zero(t, s.Pending())
	require.NotEmpty(t, readCells(t, multi, "r"), "read on b, after replication")
}

// Unpinned, multi-cluster routing is a seeded choice: with both clusters
// it reaches each.
func TestMultiClusterRoutingReachesBothClusters(t *testing.T) {
	s, _ := replicated(t)
	ctx := context.Background()
	a := table(t, s, "a", "t")
	multi := table(t, s, "multi", "t")
	require.NoError(t, a.Apply(ctx, "r", set("c", 1000, "v")))
	seen := map[bool]int{}
	for range 32 {
		seen[len(readCells(t, multi, "r")) > 0]++
	}
	require.Positive(t, seen[true], "no read reached cluster a")
	require.Positive(t, seen[false], "no read reached cluster b")
}

func TestCheckAndMutateRowReplicatesTheAppliedBranch(t *testing.T) {
	s, _ := replicated(t)
	ctx := context.Background()
	a, b := table(t, s, "a", "t"), table(t, s, "b", "t")
	require.NoError(t, a.Apply(ctx, "r", set("x", 1000, "present")))
	matched := false
	cond := bigtable.NewCondMutation(bigtable.ColumnFilter("x"), set("yes", bigtable.ServerTime, "t"), set("no", bigtable.ServerTime, "f"))
	require.NoError(t, a.Apply(ctx, "r", cond, bigtable.GetCondMutationResult(&matched)))
	require.True(t, matched)
	require.NoError(t, s.Flush(ctx))
	onB := readCells(t, b, "r")
	require.Contains(t, onB, family+":yes")
	require.NotContains(t, onB, family+":no")
	require.Equal(t, readCells(t, a, "r"), onB)

	// The false branch, when it is the one applied.
	cond = bigtable.NewCondMutation(bigtable.ColumnFilter("absent"), set("yes2", bigtable.ServerTime, "t"), set("no2", bigtable.ServerTime, "f"))
	require.NoError(t, a.Apply(ctx, "r", cond))
	require.NoError(t, s.Flush(ctx))
	onB = readCells(t, b, "r")
	require.Contains(t, onB, family+":no2")
	require.NotContains(t, onB, family+":yes2")
	require.Equal(t, readCells(t, a, "r"), onB)
}

func TestReadModifyWriteRowReplicatesTheResultingCells(t *testing.T) {
	s, _ := replicated(t)
	ctx := context.Background()
	a, b := table(t, s, "a", "t"), table(t, s, "b", "t")
	for range 3 {
		_, err := a.ApplyReadModifyWrite(ctx, "r", increment())
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx))
	onA, onB := readCells(t, a, "r"), readCells(t, b, "r")
	require.Equal(t, onA[family+":n"], onB[family+":n"])
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 3}, onB[family+":n"].Value)
}

func TestMutateRowsReplicatesTheAppliedEntries(t *testing.T) {
	s, _ := replicated(t)
	ctx := context.Background()
	a, b := table(t, s, "a", "t"), table(t, s, "b", "t")
	tooLong := string(make([]byte, prodserver.MaxRowKeyBytes+1))
	errs, err := a.ApplyBulk(ctx, []string{"r1", tooLong, "r2"}, []*bigtable.Mutation{set("c", 1000, "1"), set("c", 1000, "x"), set("c", bigtable.ServerTime, "2")})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	requireCode(t, errs[1], codes.InvalidArgument, "Row key is too long")
	require.NoError(t, errs[2])
	require.NoError(t, s.Flush(ctx))
	for _, r := range []string{"r1", "r2"} {
		require.Equal(t, readCells(t, a, r), readCells(t, b, r), "row %s", r)
	}
	var rows int
	require.NoError(t, b.ReadRows(ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { rows++; return true }))
	require.Equal(t, 2, rows)
}

// Data Boost reads see the table as of DataBoostLag ago: a write is
// missing until then, and a deleted cell stays visible until then.
func TestDataBoostReadsLag(t *testing.T) {
	s, clock := replicated(t)
	ctx := context.Background()
	a, boost := table(t, s, "a", "t"), table(t, s, "boost", "t")
	require.NoError(t, a.Apply(ctx, "r", set("c", 1000, "v")))
	clock.Advance(30*time.Minute - time.Millisecond)
	require.NoError(t, s.ReplicateDue(ctx))
	require.Empty(t, readCells(t, boost, "r"), "a write younger than the Data Boost lag")
	clock.Advance(time.Millisecond)
	require.NoError(t, s.ReplicateDue(ctx))
	require.Equal(t, readCells(t, a, "r"), readCells(t, boost, "r"))

	del := bigtable.NewMutation()
	del.DeleteRow()
	require.NoError(t, a.Apply(ctx, "r", del))
	clock.Advance(time.Minute)
	require.NoError(t, s.ReplicateDue(ctx))
	require.NotEmpty(t, readCells(t, boost, "r"), "a deleted cell is still visible to Data Boost")
	require.NoError(t, s.Flush(ctx))
	require.Empty(t, readCells(t, boost, "r"))
}

// The table admin API's consistency token reports the replicator, so the
// client's WaitForReplication returns once the writes are applied.
func TestConsistencyTokenReportsReplication(t *testing.T) {
	s, _ := replicated(t)
	ctx := context.Background()
	ac, err := bigtable.NewAdminClient(ctx, project, instance, optionConn(t, s.Addr))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ac.Close() })
	require.NoError(t, table(t, s, "a", "t").Apply(ctx, "r", set("c", 1000, "v")))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, ac.WaitForReplication(short, "t"), context.DeadlineExceeded, "a write is pending")
	require.NoError(t, s.Flush(ctx))
	require.NoError(t, ac.WaitForReplication(ctx, "t"), "consistent at the first check")
}

// With the real clock, the background replicator applies writes on its
// own once their lag has passed.
func TestBackgroundReplicatorOnRealTime(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{
		Clusters: []prodserver.Cluster{{ID: "a"}, {ID: "b"}},
		Profiles: []prodserver.AppProfile{prodserver.SingleCluster("a", "a", false), prodserver.SingleCluster("b", "b", false)},
		Lag:      time.Millisecond,
	})
	createTable(t, s, "t")
	ctx := context.Background()
	require.NoError(t, table(t, s, "a", "t").Apply(ctx, "r", set("c", 1000, "v")))
	b := table(t, s, "b", "t")
	require.Eventually(t, func() bool { return len(readCells(t, b, "r")) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Zero(t, s.Pending())
}

// The default profile of an instance created with two clusters routes to
// any cluster and refuses transactions.
func TestDefaultProfileOfAReplicatedInstance(t *testing.T) {
	s, _ := replicated(t)
	p, ok := s.Profile("")
	require.True(t, ok)
	require.True(t, p.IsMultiCluster())
	requireCode(t, table(t, s, "", "t").Apply(context.Background(), "r", condMutation()), codes.FailedPrecondition, "Single-row transactions are not allowed")
}

// A cluster can be any emulator: here cluster b is cbtemulator.
func TestReplicationOntoCbtemulator(t *testing.T) {
	e := bttestharness.NewEmulator(t)
	clock := bttestharness.NewManualClock(time.Now())
	s := prodserver.New(t, prodserver.Config{
		Clusters: []prodserver.Cluster{{ID: "a"}, {ID: "b", Addr: e.Addr}},
		Profiles: []prodserver.AppProfile{prodserver.SingleCluster("a", "a", true), prodserver.SingleCluster("b", "b", false)},
		Lag:      lag,
		Clock:    clock,
	})
	createTable(t, s, "t")
	ctx := context.Background()
	a, b := table(t, s, "a", "t"), table(t, s, "b", "t")
	cond := bigtable.NewCondMutation(bigtable.ColumnFilter("x"), set("yes", bigtable.ServerTime, "t"), set("no", bigtable.ServerTime, "f"))
	require.NoError(t, a.Apply(ctx, "r", cond))
	require.Empty(t, readCells(t, b, "r"))
	clock.Advance(lag)
	require.NoError(t, s.ReplicateDue(ctx))
	onB := readCells(t, b, "r")
	require.Equal(t, readCells(t, a, "r"), onB)
	require.Contains(t, onB, family+":no")
	// Cluster b's own backend holds it: read past the server.
	direct := client(t, s.ClusterAddr("b"), "").Open("t")
	require.Equal(t, onB, readCells(t, direct, "r"))
}
