package matrix_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/matrix"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

// The replicated slice's instance: clusters a and b; the default profile
// (the harness's clients: the writer) single-cluster to a with
// transactions; "b" single-cluster to b without; "multi" multi-cluster;
// "boost" Data Boost on a.
const (
	replLag       = 250 * time.Millisecond // a to b: most reads within it, some after
	replBoostLag  = time.Second            // a to its Data Boost replica
	replicatedOps = 200                    // each cell's steps in the CI slice
)

// replRouting is one read profile of the slice.
type replRouting struct {
	profile string // "" the writer's (default)
	reads   matrix.ReadRouting
	lag     time.Duration
	guard   bool // reads by a plain client under the wire guard (WithReadFilter)
}

var replRoutings = []replRouting{
	{profile: "", reads: matrix.ReadsWriter},
	{profile: "b", reads: matrix.ReadsReplica, lag: replLag},
	{profile: "multi", reads: matrix.ReadsEither, lag: replLag},
	{profile: "multi", reads: matrix.ReadsEither, lag: replLag, guard: true},
	{profile: "boost", reads: matrix.ReadsReplica, lag: replBoostLag},
}

func (r replRouting) name() string {
	name := r.profile
	if name == "" {
		name = "writer"
	}
	if r.guard {
		name += "+guard"
	}
	return name
}

// clockRef lets the server read the harness's clock, which exists only
// once the harness is dialled to the server.
type clockRef struct {
	c atomic.Pointer[bttestharness.ManualClock]
}

func (r *clockRef) Now() time.Time { return r.c.Load().Now() }

// replicatedHarness starts the slice's instance on a manual clock shared
// by the server (its replication lag) and the harness (the library's
// time).
func replicatedHarness(t *testing.T, seed uint64) (*prodserver.Server, *bttestharness.Harness) {
	t.Helper()
	ref := &clockRef{}
	ref.c.Store(bttestharness.NewManualClock(time.Now()))
	srv := prodserver.New(t, prodserver.Config{
		Clusters: []prodserver.Cluster{{ID: "a"}, {ID: "b"}},
		Profiles: []prodserver.AppProfile{
			prodserver.SingleCluster(prodserver.DefaultProfileID, "a", true),
			prodserver.SingleCluster("b", "b", false),
			prodserver.MultiCluster("multi"),
			prodserver.DataBoost("boost", "a"),
		},
		Lag:          replLag,
		DataBoostLag: replBoostLag,
		Clock:        ref,
		Seed:         seed,
	})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: srv.Addr})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ref.c.Store(h.Clock)
	return srv, h
}

// rawClient is a plain data client on addr through app profile profile.
func rawClient(t *testing.T, addr, profile string, dial ...grpc.DialOption) *bigtable.Client {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)...)
	require.NoError(t, err)
	c, err := bigtable.NewClientWithConfig(context.Background(), bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{AppProfile: profile, MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(conn))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(); _ = conn.Close() })
	return c
}

// TestMatrixReplicated is the matrix's slice on the production-rules
// server (docs/guarantees.md#replicated-instances): a replicated instance
// with app profiles, millisecond granularity and a replication lag on the
// run's clock. ttlclient writes, expires and refreshes through a
// single-cluster transactional profile and reads through each routing:
// the writer's cluster, the other cluster, multi-cluster routing (also by
// a plain client under the wire guard) and Data Boost; every read is checked against the states the routing allows
// (matrix.Replication), every full check after a Flush. The CI slice runs
// each routing once, with the family option the seed rotates to;
// BTTL_REPLICATED=all runs every routing with every option, BTTL_OPS sets
// each cell's steps.
func TestMatrixReplicated(t *testing.T) {
	t.Parallel()
	seed, _ := settings(t)
	ops := replicatedOps
	if s := os.Getenv("BTTL_OPS"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "BTTL_OPS")
		ops = v
	}
	type cell struct {
		routing replRouting
		option  matrix.FamilyOption
	}
	var cells []cell
	for i, r := range replRoutings {
		if os.Getenv("BTTL_REPLICATED") == "all" {
			for _, o := range matrix.FamilyOptions {
				cells = append(cells, cell{r, o})
			}
			continue
		}
		cells = append(cells, cell{r, matrix.FamilyOptions[(seed+uint64(i))%uint64(len(matrix.FamilyOptions))]})
	}
	t.Logf("replicated matrix: seed %d, %d cells, %d operations each, lag %s (Data Boost %s) (replay with BTTL_SEED=%d BTTL_OPS=%d)",
		seed, len(cells), ops, replLag, replBoostLag, seed, ops)
	start := time.Now()
	var total matrix.Stats
	var repl matrix.ReplicationStats
	var failed []string
	for i, c := range cells {
		name := c.routing.name() + "/" + c.option.Name
		ok := t.Run(name, func(t *testing.T) {
			st, err := runReplicatedCell(t, fmt.Sprintf("r%d", i), c.routing, c.option, seed, ops)
			total = addStats(total, st)
			repl.Flushes += st.Replication.Flushes
			repl.StaleReads += st.Replication.StaleReads
			repl.FreshReads += st.Replication.FreshReads
			repl.ReplicaChecks += st.Replication.ReplicaChecks
			if err != nil {
				t.Fatalf("replicated cell %s: %v\nreplay: BTTL_SEED=%d BTTL_OPS=%d go test -run '^TestMatrixReplicated$/^%s$' ./testsuite/internal/matrix/",
					name, err, seed, ops, name)
			}
		})
		if !ok {
			failed = append(failed, name)
		}
	}
	summary := fmt.Sprintf("replicated matrix on prodserver (lag %s, Data Boost %s): seed %d, %d cells of %d operations: %s; %s in %s (replay with BTTL_SEED=%d BTTL_OPS=%d)",
		replLag, replBoostLag, seed, len(cells), ops, total, repl, time.Since(start).Round(time.Millisecond), seed, ops)
	t.Log(summary)
	var runErr error
	if len(failed) > 0 {
		runErr = fmt.Errorf("failed cells: %v", failed)
	}
	reportSummary(t, summary, runErr)
}

// runReplicated runs one cell on its own instance; check, when set, is
// called after a run without a mismatch.
func runReplicated(t *testing.T, table string, r replRouting, opt matrix.FamilyOption, seed uint64, ops int, check func(*prodserver.Server, matrix.Config, matrix.Stats)) (matrix.Stats, error) {
	ctx := context.Background()
	srv, h := replicatedHarness(t, seed)
	schema, fams, _ := matrix.MatrixSchema(opt)
	require.NoError(t, h.CreateTable(ctx, table, schema))
	writer, err := h.Client.Open(ctx, table, schema)
	require.NoError(t, err)
	cfg := matrix.Config{
		Seed: seed, Ops: ops, Clock: h.Clock, Raw: rawClient(t, srv.ClusterAddr("a"), "").Open(table),
		Schema: schema, Families: fams, FullCheckEvery: min(100, ops),
		WriteTimeAfterRefresh: true,
		Replication: &matrix.Replication{
			Reads: r.reads, Lag: r.lag,
			ReplicateDue: srv.ReplicateDue, Flush: srv.Flush,
			RawReplica: rawClient(t, srv.ClusterAddr("b"), "").Open(table),
		},
	}
	switch {
	case r.profile == "":
		cfg.Target, cfg.FlushIdle = matrix.TableTarget(writer), h.Client.FlushIdleRefreshes
	case r.guard:
		// A plain program reading under the wire guard, which filters
		// its reads at the shared clock.
		g, err := wireguard.New(map[string]strategy.Schema{table: schema}, wireguard.WithReadFilter(), wireguard.WithClock(h.Clock))
		require.NoError(t, err)
		rt, err := matrix.WireTarget(rawClient(t, srv.Addr, r.profile, g.DialOptions()...).Open(table), schema, h.Clock, false)
		require.NoError(t, err)
		cfg.Target = matrix.SplitTarget(writer, rt)
	default:
		// A second program's client on the read profile, on the same
		// clock. Its time-to-idle refreshes need a transactional profile:
		// the server refuses them, and the model applies none.
		reader := ttlclient.Wrap(rawClient(t, srv.Addr, r.profile, ttlclient.DialOptions()...), ttlclient.WithClock(h.Clock),
			ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance))
		t.Cleanup(func() { _ = reader.Close() })
		rt, err := reader.Open(ctx, table, schema)
		require.NoError(t, err)
		cfg.Target = matrix.SplitTarget(writer, matrix.TableTarget(rt))
		if r.profile == "boost" {
			cfg.Replication.RawReplica = rawClient(t, srv.Addr, "boost").Open(table)
		}
	}
	st, err := matrix.Run(ctx, cfg)
	if err != nil || check == nil {
		return st, err
	}
	check(srv, cfg, st)
	return st, nil
}

// runReplicatedCell runs one cell on its own instance and checks the
// server's counts.
func runReplicatedCell(t *testing.T, table string, r replRouting, opt matrix.FamilyOption, seed uint64, ops int) (matrix.Stats, error) {
	return runReplicated(t, table, r, opt, seed, ops, func(srv *prodserver.Server, cfg matrix.Config, st matrix.Stats) {
		checkReplicatedCounts(t, srv, r, cfg, st, ops)
	})
}

// runReplicatedCellErr is a run's error alone.
func runReplicatedCellErr(t *testing.T, table string, r replRouting, opt matrix.FamilyOption, seed uint64, ops int) error {
	_, err := runReplicated(t, table, r, opt, seed, ops, nil)
	return err
}

func checkReplicatedCounts(t *testing.T, srv *prodserver.Server, r replRouting, cfg matrix.Config, st matrix.Stats, ops int) {
	schema := cfg.Schema
	counts := srv.Counts()
	t.Logf("%s: %s; %s; server: %d refused, %d replicated", r.name(), st, st.Replication, counts.Refused, counts.Replicated)
	// Nothing bttl sends through the writer's profile is refused by
	// production's rules (profiles, millisecond granularity, sizes).
	hasIdle := false
	for _, p := range schema {
		hasIdle = hasIdle || p.IdleTTL() > 0
	}
	if r.reads == matrix.ReadsWriter || !hasIdle {
		require.Zero(t, counts.Refused, "requests refused by the server")
	}
	require.Positive(t, counts.Replicated)
	require.Equal(t, ops/cfg.FullCheckEvery+min(1, ops%cfg.FullCheckEvery), st.Replication.Flushes/2)
	if r.reads != matrix.ReadsWriter {
		require.Positive(t, st.Replication.StaleReads, "no read saw the replica behind the writer: the lag was not exercised")
	}
}

// The replicated check is exact, not a tolerance: told the replica lags
// twice as long as it does, or that multi-cluster reads see the writer
// only, the suite fails the run with a mismatch naming its seed.
func TestMatrixReplicatedCheckIsExact(t *testing.T) {
	t.Parallel()
	const seed, ops = 7, 100
	for _, c := range []struct {
		name    string
		routing replRouting
		claim   replRouting
	}{
		{"b with twice its lag", replRoutings[1], replRouting{profile: "b", reads: matrix.ReadsReplica, lag: 2 * replLag}},
		{"multi as the writer", replRoutings[2], replRouting{profile: "multi", reads: matrix.ReadsWriter}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.routing
			r.reads, r.lag = c.claim.reads, c.claim.lag
			err := runReplicatedCellErr(t, "x", r, matrix.FamilyOptions[0], seed, ops)
			var mm *matrix.MismatchError
			require.ErrorAs(t, err, &mm, "the run passed with a wrong claim about the replica")
			require.Equal(t, uint64(seed), mm.Seed)
		})
	}
}
