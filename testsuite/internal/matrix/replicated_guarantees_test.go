package matrix_test

// The tests docs/guarantees.md#replicated-instances names, one per line of
// its section, on the replicated production-rules server of
// replicatedHarness: clusters a and b with a manual clock measuring the lag
// (replLag), the writer's profile (default, single-cluster transactional to
// a), "b" (single-cluster to b, no transactions), "multi" and "boost"
// (Data Boost on a, replBoostLag). TestGuaranteesSectionNamesExistingTests
// keeps the section and this file in step.

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
	migrate "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

const (
	gOne   = "one"   // one-second expiry with write times
	gIdle  = "idle"  // one-second expiry, time-to-idle 1h
	gSV    = "sv"    // default expiry 1h, single value
	gPlain = "plain" // unmanaged
)

func guaranteeSchema() strategy.Schema {
	return strategy.Schema{
		gOne:   strategy.OneSecond(strategy.WithWriteTime()),
		gIdle:  strategy.OneSecond(strategy.WithIdleTTL(time.Hour, 0.5)),
		gSV:    strategy.DefaultExpiry(time.Hour, strategy.SingleValue()),
		gPlain: strategy.Unmanaged(),
	}
}

// replicatedInstance is the instance with table "g" of guaranteeSchema.
type replicatedInstance struct {
	srv *prodserver.Server
	h   *bttestharness.Harness
}

func newReplicatedInstance(t *testing.T) replicatedInstance {
	t.Helper()
	srv, h := replicatedHarness(t, 1)
	require.NoError(t, h.CreateTable(context.Background(), "g", guaranteeSchema()))
	return replicatedInstance{srv, h}
}

// table opens "g" through profile ("" the writer's).
func (ri replicatedInstance) table(t *testing.T, profile string) *ttlclient.Table {
	t.Helper()
	if profile == "" {
		tbl, err := ri.h.Client.Open(context.Background(), "g", guaranteeSchema())
		require.NoError(t, err)
		return tbl
	}
	tbl, _ := ri.client(t, profile)
	return tbl
}

// client is a second program's client through profile, with opts, and
// its table "g".
func (ri replicatedInstance) client(t *testing.T, profile string, opts ...ttlclient.ClientOption) (*ttlclient.Table, *ttlclient.Client) {
	t.Helper()
	c := ttlclient.Wrap(rawClient(t, ri.srv.Addr, profile, ttlclient.DialOptions()...),
		append([]ttlclient.ClientOption{ttlclient.WithClock(ri.h.Clock), ttlclient.WithAdminClient(ri.h.Admin, bttestharness.Project, bttestharness.Instance)}, opts...)...)
	t.Cleanup(func() { _ = c.Close() })
	tbl, err := c.Open(context.Background(), "g", guaranteeSchema())
	require.NoError(t, err)
	return tbl, c
}

// stored is row as cluster id stores it, unfiltered, past every rule.
func (ri replicatedInstance) stored(t *testing.T, cluster, row string) bigtable.Row {
	t.Helper()
	r, err := rawClient(t, ri.srv.ClusterAddr(cluster), "").Open("g").ReadRow(context.Background(), row)
	require.NoError(t, err)
	return r
}

// replicate moves the clock by d and applies what is due.
func (ri replicatedInstance) replicate(t *testing.T, d time.Duration) {
	t.Helper()
	ri.h.Clock.Advance(d)
	require.NoError(t, ri.srv.ReplicateDue(context.Background()))
}

func values(r bigtable.Row, fam string) []string {
	var out []string
	for _, it := range r[fam] {
		out = append(out, it.Column+"="+string(it.Value))
	}
	return out
}

func setTTL(fam, col string, ttl time.Duration, v string) *ttlclient.Mutation {
	m := ttlclient.NewMutation()
	m.SetTTL(fam, col, ttl, []byte(v))
	return m
}

// Every routing's reads hide a cell expired at the client's clock, on
// every cluster, before and after replication, while both clusters still
// store it: the filter is the client's (ttlclient's, or the wire guard's
// WithReadFilter on a plain client).
func TestReplicatedReadsNeverReturnAnExpiredCell(t *testing.T) {
	ri := newReplicatedInstance(t)
	ctx := context.Background()
	w := ri.table(t, "")
	// A minute: the servers' GC, on real time, leaves the cell stored
	// while the test runs.
	require.NoError(t, w.Apply(ctx, "r", setTTL(gOne, "c", time.Minute, "v")))
	require.NoError(t, w.Apply(ctx, "r", setTTL(gOne, "keep", time.Hour, "k")))
	g, err := wireguard.New(map[string]strategy.Schema{"g": guaranteeSchema()}, wireguard.WithReadFilter(), wireguard.WithClock(ri.h.Clock))
	require.NoError(t, err)
	guarded := rawClient(t, ri.srv.Addr, "multi", g.DialOptions()...).Open("g")
	readers := map[string]func() bigtable.Row{}
	for _, p := range []string{"", "b", "multi", "boost"} {
		tbl := ri.table(t, p)
		readers["profile "+p] = func() bigtable.Row { r, err := tbl.ReadRow(ctx, "r"); require.NoError(t, err); return r }
	}
	readers["multi under the wire guard"] = func() bigtable.Row { r, err := guarded.ReadRow(ctx, "r"); require.NoError(t, err); return r }
	check := func(when string) {
		for _, cluster := range []string{"a", "b"} {
			ri.srv.RouteMultiCluster(cluster)
			for name, read := range readers {
				got := values(read(), gOne)
				require.NotContains(t, got, gOne+":c=v", "%s, multi-cluster on %s, %s", name, cluster, when)
			}
		}
	}
	ri.h.Clock.Advance(time.Minute + time.Millisecond) // c expired, the lags passed
	require.Len(t, ri.stored(t, "a", "r")[gOne], 2+2, "a stores the expired cell (and both companions)")
	check("before replication")
	require.NoError(t, ri.srv.ReplicateDue(ctx))
	require.Len(t, ri.stored(t, "b", "r")[gOne], 2+2, "b stores the expired cell (and both companions)")
	check("after replication")
	// The same readers return the live cell wherever it has arrived.
	ri.srv.RouteMultiCluster("b")
	for name, read := range readers {
		require.Equal(t, []string{gOne + ":keep=k"}, values(read(), gOne), name)
	}
}

// Single-row transactions (Expire, ExpireColumn, ExpireRow, conditional
// mutations) go through a single-cluster transactional profile only:
// through any other the server refuses them (FAILED_PRECONDITION) and
// nothing is written on any cluster; Data Boost refuses every write.
func TestReplicatedTransactionsNeedASingleClusterTransactionalProfile(t *testing.T) {
	ri := newReplicatedInstance(t)
	ctx := context.Background()
	w := ri.table(t, "")
	require.NoError(t, w.Apply(ctx, "r", setTTL(gOne, "c", time.Hour, "v")))
	require.NoError(t, ri.srv.Flush(ctx))
	before := map[string]bigtable.Row{"a": ri.stored(t, "a", "r"), "b": ri.stored(t, "b", "r")}
	for _, p := range []string{"b", "multi", "boost"} {
		tbl := ri.table(t, p)
		_, err := tbl.Expire(ctx, "r", gOne, "c", time.Millisecond)
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "Expire through %s: %v", p, err)
		_, err = tbl.ExpireColumn(ctx, "r", gOne, "c", time.Millisecond)
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "ExpireColumn through %s: %v", p, err)
		_, err = tbl.ExpireRow(ctx, "r", time.Millisecond)
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "ExpireRow through %s: %v", p, err)
		err = tbl.Apply(ctx, "r", ttlclient.NewCondMutation(nil, setTTL(gOne, "d", time.Hour, "x"), nil))
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "a conditional mutation through %s: %v", p, err)
	}
	// Data Boost takes no write at all.
	boost := ri.table(t, "boost")
	err := boost.Apply(ctx, "r", setTTL(gOne, "d", time.Hour, "x"))
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "Apply through Data Boost: %v", err)
	_, err = boost.ApplyBulk(ctx, []string{"r"}, []*ttlclient.Mutation{setTTL(gOne, "d", time.Hour, "x")})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "ApplyBulk through Data Boost: %v", err)
	require.NoError(t, ri.srv.Flush(ctx))
	require.Equal(t, before, map[string]bigtable.Row{"a": ri.stored(t, "a", "r"), "b": ri.stored(t, "b", "r")})
	// The writer's profile takes them.
	applied, err := w.Expire(ctx, "r", gOne, "c", time.Millisecond)
	require.NoError(t, err)
	require.True(t, applied)
}

// idleCount counts time-to-idle results by kind.
type idleCount struct {
	mu sync.Mutex
	n  map[ttlclient.IdleResult]int
}

func (c *idleCount) Table(string, ttlclient.Schema) ttlclient.TableRecorder { return c }
func (c *idleCount) IdleRefresh(_ string, r ttlclient.IdleResult, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[ttlclient.IdleResult]int{}
	}
	c.n[r] += n
}
func (c *idleCount) get(r ttlclient.IdleResult) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[r]
}
func (*idleCount) Read(time.Duration)                               {}
func (*idleCount) Write(time.Duration)                              {}
func (*idleCount) CellWritten(string, strategy.Kind, time.Duration) {}
func (*idleCount) Refused(string, string)                           {}
func (*idleCount) ExpiredCell(string, strategy.Kind, time.Duration) {}
func (*idleCount) ShadowRead(int, error)                            {}
func (*idleCount) ShadowDropped()                                   {}
func (*idleCount) VerifySkipped()                                   {}

// A time-to-idle refresh is a single-row transaction: a read through a
// profile without transactions queues it, the server refuses it, the
// client counts it failed (IdleFailed, bttl_idle_refreshes_total), and the
// cell keeps its expiry on every cluster. Through the writer's profile the
// same read refreshes it, and the move reaches the other cluster after the
// lag.
func TestReplicatedIdleRefreshNeedsATransactionalProfile(t *testing.T) {
	ri := newReplicatedInstance(t)
	ctx := context.Background()
	w := ri.table(t, "")
	// 10 minutes left of a 1-hour idle TTL: due for a refresh, and stored
	// while the test runs.
	require.NoError(t, w.Apply(ctx, "r", setTTL(gIdle, "c", 10*time.Minute, "v")))
	require.NoError(t, ri.srv.Flush(ctx))
	stamp := ri.stored(t, "a", "r")[gIdle][0].Timestamp
	for _, p := range []string{"b", "multi", "boost"} {
		rec := &idleCount{}
		tbl, c := ri.client(t, p, ttlclient.WithRecorder(rec))
		_, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		require.NoError(t, c.FlushIdleRefreshes(ctx))
		require.Equal(t, 1, rec.get(ttlclient.IdleFailed), "the refused refresh through %s is counted", p)
		require.Zero(t, rec.get(ttlclient.IdleRefreshed), p)
	}
	require.NoError(t, ri.srv.Flush(ctx))
	for _, cl := range []string{"a", "b"} {
		require.Equal(t, stamp, ri.stored(t, cl, "r")[gIdle][0].Timestamp, "cluster %s: the cell kept its expiry", cl)
	}
	_, err := w.ReadRow(ctx, "r")
	require.NoError(t, err)
	require.NoError(t, ri.h.Client.FlushIdleRefreshes(ctx))
	moved := ri.stored(t, "a", "r")[gIdle][0].Timestamp
	require.Greater(t, moved, stamp, "the writer's read refreshed the cell")
	require.Equal(t, stamp, ri.stored(t, "b", "r")[gIdle][0].Timestamp, "b before the lag")
	ri.replicate(t, replLag)
	require.Equal(t, moved, ri.stored(t, "b", "r")[gIdle][0].Timestamp, "b after the lag")
}

// A write-time companion is written in the same row mutation as its cell
// (and an idle refresh or Expire moves both in one), which the replicator
// applies whole: at every moment a cluster holds a cell with its companion
// or neither, and WriteTime through a reader on the lagging cluster gives
// the writer's answer once the cell is there.
func TestReplicatedWriteTimeCompanionTravelsWithItsCell(t *testing.T) {
	ri := newReplicatedInstance(t)
	ctx := context.Background()
	w, onB := ri.table(t, ""), ri.table(t, "b")
	require.NoError(t, w.Apply(ctx, "r", setTTL(gOne, "keep", time.Hour, "k")))
	require.NoError(t, ri.srv.Flush(ctx))
	ri.h.Clock.Advance(time.Millisecond)
	require.NoError(t, w.Apply(ctx, "r", setTTL(gOne, "c", time.Hour, "v")))
	cell := func(cluster string) (cells, companions int) {
		for _, it := range ri.stored(t, cluster, "r")[gOne] {
			switch it.Column {
			case gOne + ":c":
				cells++
			case gOne + ":" + strategy.WriteTimePrefix + "c":
				companions++
			}
		}
		return cells, companions
	}
	n, k := cell("b")
	require.Equal(t, [2]int{0, 0}, [2]int{n, k}, "b before the lag: neither")
	item := func(tbl *ttlclient.Table) bigtable.ReadItem {
		r, err := tbl.ReadRow(ctx, "r", bigtable.RowFilter(bigtable.ColumnFilter("c")))
		require.NoError(t, err)
		require.Len(t, r[gOne], 1)
		return r[gOne][0]
	}
	want, err := w.WriteTime(ctx, item(w))
	require.NoError(t, err)
	ri.replicate(t, replLag)
	n, k = cell("b")
	require.Equal(t, [2]int{1, 1}, [2]int{n, k}, "b after the lag: both")
	got, err := onB.WriteTime(ctx, item(onB))
	require.NoError(t, err)
	require.Equal(t, want, got)
	// Expire moves the cell and its companion in one mutation.
	applied, err := w.Expire(ctx, "r", gOne, "c", 30*time.Minute)
	require.NoError(t, err)
	require.True(t, applied)
	old := ri.stored(t, "b", "r")
	ri.replicate(t, replLag-time.Millisecond)
	require.Equal(t, old, ri.stored(t, "b", "r"), "b a millisecond before the lag: the old cell and companion")
	ri.replicate(t, time.Millisecond)
	n, k = cell("b")
	require.Equal(t, [2]int{1, 1}, [2]int{n, k}, "b after the lag: the moved cell and its companion")
	got, err = onB.WriteTime(ctx, item(onB))
	require.NoError(t, err)
	require.Equal(t, want, got, "the move keeps the write time, on b too")
}

// Single value under lag: a read on a cluster the newer value has not
// reached returns the older one, live (a stale read, never an expired or
// never-written value); multi-cluster routing may do so until the lag has
// passed, and no read does after it.
func TestReplicatedSingleValueStaleReadReturnsTheOlderValue(t *testing.T) {
	ri := newReplicatedInstance(t)
	ctx := context.Background()
	w, onB, multi := ri.table(t, ""), ri.table(t, "b"), ri.table(t, "multi")
	read := func(tbl *ttlclient.Table) []string {
		r, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		return values(r, gSV)
	}
	m := ttlclient.NewMutation()
	m.Set(gSV, "c", bigtable.ServerTime, []byte("v1"))
	require.NoError(t, w.Apply(ctx, "r", m))
	require.NoError(t, ri.srv.Flush(ctx))
	ri.h.Clock.Advance(time.Second)
	m = ttlclient.NewMutation()
	m.Set(gSV, "c", bigtable.ServerTime, []byte("v2"))
	require.NoError(t, w.Apply(ctx, "r", m))
	require.Equal(t, []string{gSV + ":c=v2"}, read(w))
	require.Equal(t, []string{gSV + ":c=v1"}, read(onB), "b before the lag: the older value")
	ri.srv.RouteMultiCluster("b")
	require.Equal(t, []string{gSV + ":c=v1"}, read(multi), "multi-cluster on b before the lag")
	ri.replicate(t, replLag)
	require.Equal(t, []string{gSV + ":c=v2"}, read(onB))
	require.Equal(t, []string{gSV + ":c=v2"}, read(multi))
}

// Expire acts on the writer's cluster: another cluster returns the cell
// (live by its stored timestamp) until the move reaches it, a lag later;
// and Expire's pin sees only what the writer's cluster holds, so a newer
// version written on another cluster within the lag is not expired.
func TestReplicatedExpireReachesOtherClustersAfterTheLag(t *testing.T) {
	ri := newReplicatedInstance(t)
	ctx := context.Background()
	w, onB := ri.table(t, ""), ri.table(t, "b")
	read := func(tbl *ttlclient.Table) []string {
		r, err := tbl.ReadRow(ctx, "r", bigtable.RowFilter(bigtable.ColumnFilter("c")))
		require.NoError(t, err)
		return values(r, gOne)
	}
	require.NoError(t, w.Apply(ctx, "r", setTTL(gOne, "c", time.Hour, "v1")))
	require.NoError(t, ri.srv.Flush(ctx))
	applied, err := w.Expire(ctx, "r", gOne, "c", time.Millisecond) // a logout
	require.NoError(t, err)
	require.True(t, applied)
	ri.h.Clock.Advance(2 * time.Millisecond)
	require.Empty(t, read(w))
	require.Equal(t, []string{gOne + ":c=v1"}, read(onB), "b before the lag still returns the cell")
	ri.replicate(t, replLag)
	require.Empty(t, read(onB), "b after the lag")

	// A newer version written on b, not yet on a: Expire on a moves only
	// the version a holds.
	require.NoError(t, w.Apply(ctx, "r", setTTL(gOne, "c", time.Hour, "v2")))
	require.NoError(t, ri.srv.Flush(ctx))
	ri.h.Clock.Advance(time.Second)
	require.NoError(t, onB.Apply(ctx, "r", setTTL(gOne, "c", 2*time.Hour, "v3 on b")))
	applied, err = w.Expire(ctx, "r", gOne, "c", time.Millisecond)
	require.NoError(t, err)
	require.True(t, applied, "a's newest, v2, expired")
	ri.h.Clock.Advance(2 * time.Millisecond)
	require.NoError(t, ri.srv.Flush(ctx))
	require.Equal(t, []string{gOne + ":c=v3 on b"}, read(w), "after replication the version written on b is live on a")
	require.Equal(t, []string{gOne + ":c=v3 on b"}, read(onB))
}

// migrate's moves are single-row transactions: through a profile without
// them the run fails on its first move (FAILED_PRECONDITION) and changes
// nothing. Through the writer's profile, a legacy cell written on another
// cluster less than the lag before the run is not in what the run reads:
// left unmoved and unreported, and moved by a run after the lag (its
// provenance is its timestamp, which replication keeps).
func TestReplicatedMigrateNeedsTheWritersProfileAndSeesOnlyReplicatedCells(t *testing.T) {
	ri := newReplicatedInstance(t)
	ctx := context.Background()
	now := ri.h.Clock.Now()
	plan := migrate.Plan{
		Family: gPlain, From: strategy.Unmanaged(), To: strategy.OneSecond(),
		TTL:         migrate.TTLRules{{TTL: 30 * 24 * time.Hour}},
		FirstSwitch: now.Add(-2 * time.Hour), WrittenBefore: now.Add(-time.Hour),
	}
	legacy := func(tbl *bigtable.Table, row string) {
		m := bigtable.NewMutation()
		m.Set(gPlain, "c", bigtable.Time(now.Add(-24*time.Hour)), []byte("legacy"))
		require.NoError(t, tbl.Apply(ctx, row, m))
	}
	legacy(rawClient(t, ri.srv.Addr, "").Open("g"), "on-a")
	require.NoError(t, ri.srv.Flush(ctx))
	before := ri.stored(t, "a", "on-a")

	for _, p := range []string{"b", "multi", "boost"} {
		mm, err := migrate.New(rawClient(t, ri.srv.Addr, p).Open("g"), "g", plan, migrate.WithClock(ri.h.Clock))
		require.NoError(t, err)
		_, err = mm.Run(ctx, scan.WithWorkers(1))
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "a run through %s: %v", p, err)
	}
	require.NoError(t, ri.srv.Flush(ctx))
	require.Equal(t, before, ri.stored(t, "a", "on-a"))
	require.Equal(t, before, ri.stored(t, "b", "on-a"))

	legacy(rawClient(t, ri.srv.Addr, "b").Open("g"), "on-b") // not on a yet
	writer := rawClient(t, ri.srv.Addr, "").Open("g")
	m1, err := migrate.New(writer, "g", plan, migrate.WithClock(ri.h.Clock))
	require.NoError(t, err)
	rep, err := m1.Run(ctx, scan.WithWorkers(1))
	require.NoError(t, err)
	require.Equal(t, int64(1), rep.Moved, "only the cell a holds")
	require.Equal(t, "legacy", string(ri.stored(t, "a", "on-a")[gPlain][0].Value))
	require.Empty(t, ri.stored(t, "a", "on-b"))
	ri.replicate(t, replLag)
	m2, err := migrate.New(writer, "g", plan, migrate.WithClock(ri.h.Clock))
	require.NoError(t, err)
	rep, err = m2.Run(ctx, scan.WithWorkers(1))
	require.NoError(t, err)
	require.Equal(t, int64(1), rep.Moved, "the cell written on b, moved once it reached a")
	require.NoError(t, ri.srv.Flush(ctx))
	for _, cl := range []string{"a", "b"} {
		for _, row := range []string{"on-a", "on-b"} {
			it := ri.stored(t, cl, row)[gPlain]
			require.Len(t, it, 1, "%s on %s", row, cl)
			require.Equal(t, bigtable.Time(now.Add(-24*time.Hour).Add(30*24*time.Hour)), it[0].Timestamp, "%s on %s: write time + TTL", row, cl)
		}
	}
}

// Every test docs/guarantees.md's replicated section names exists in this
// package's tests, and every test of this file is named there.
func TestGuaranteesSectionNamesExistingTests(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "guarantees.md"))
	require.NoError(t, err)
	start := regexp.MustCompile(`(?m)^<a id="replicated-instances"></a>$`).FindIndex(doc)
	require.NotNil(t, start, "docs/guarantees.md has no replicated-instances section")
	section := doc[start[1]:]
	if end := regexp.MustCompile(`(?m)^## `).FindAllIndex(section, 2); len(end) > 1 {
		section = section[:end[1][0]]
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`Test[A-Z][A-Za-z]+`).FindAll(section, -1) {
		named[string(m)] = true
	}
	require.NotEmpty(t, named)
	defined := map[string]bool{}
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`(?m)^func (Test[A-Za-z]+)\(t \*testing\.T\)`).FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
	}
	for name := range named {
		require.True(t, defined[name], "docs/guarantees.md names %s, which testsuite/internal/matrix does not define", name)
	}
	src, err := os.ReadFile("replicated_guarantees_test.go")
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`(?m)^func (TestReplicated[A-Za-z]+)\(`).FindAllSubmatch(src, -1) {
		require.True(t, named[string(m[1])], "%s backs no line of docs/guarantees.md's replicated section", m[1])
	}
}
