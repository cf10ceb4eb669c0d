package migratejob_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/strategy"
)

// lastPredicate is the predicate of the last conditional mutation a
// countingClient sent.
var lastPredicate atomic.Pointer[btpb.RowFilter]

// countingClient is a data client of h's server counting the conditional
// mutations it sends (and recording the last one's predicate in
// lastPredicate).
func countingClient(t *testing.T, h *bttestharness.Harness) (*bigtable.Client, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/google.bigtable.v2.Bigtable/CheckAndMutateRow" {
			n.Add(1)
			lastPredicate.Store(req.(*btpb.CheckAndMutateRowRequest).GetPredicateFilter())
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c, err := bigtable.NewClientWithConfig(context.Background(), bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true},
		option.WithEndpoint(h.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithGRPCDialOption(grpc.WithUnaryInterceptor(count)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, &n
}

// countingTable is table "t" (family "f", no GC rule) on an in-process
// server, through a client counting its conditional mutations.
func countingTable(t *testing.T) (*bttestharness.Harness, *bigtable.Table, *atomic.Int64) {
	t.Helper()
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	require.NoError(t, h.CreateTable(context.Background(), "t", strategy.Schema{"f": strategy.Unmanaged()}))
	c, calls := countingClient(t, h)
	return h, c.Open("t"), calls
}

// A row's cells move in one conditional mutation; when one of them changed
// between the read and the move, the others still move (each on its own)
// and only the changed one is counted and left.
func TestARowMovesInOneConditionalMutation(t *testing.T) {
	h, tbl, calls := countingTable(t)
	ctx := context.Background()
	now := h.Clock.Now()
	model := load(t, tbl, "f", 10, 10, now, day)
	h.Clock.Set(now.Add(time.Second))
	mg := inPlaceMigrator(t, h, tbl, now)
	rep, err := mg.Run(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(100), rep.Moved)
	assert.Equal(t, int64(10), calls.Load(), "one conditional mutation per row")
	assert.Equal(t, shifted(model, 30*day), stored(t, tbl, "f"))

	// One row again, one of its cells replaced after the read.
	drop := bigtable.NewMutation()
	drop.DeleteRow()
	require.NoError(t, tbl.Apply(ctx, "row0000000", drop))
	model = load(t, tbl, "f", 1, 10, now, day)
	mg = inPlaceMigrator(t, h, tbl, now)
	row, err := tbl.ReadRow(ctx, "row0000000", bigtable.RowFilter(mg.Filter()))
	require.NoError(t, err)
	require.Len(t, row["f"], 10)
	var changed key
	for k := range model {
		changed = k
		break
	}
	w := bigtable.NewMutation()
	w.Set("f", changed.col, changed.ts, []byte("a writer's new value"))
	require.NoError(t, tbl.Apply(ctx, changed.row, w))
	calls.Store(0)
	require.NoError(t, mg.MigrateRow(ctx, row))
	st := mg.Stats()
	assert.Equal(t, int64(9), st.Moved)
	assert.Equal(t, int64(1), st.Changed)
	assert.Equal(t, int64(11), calls.Load(), "the row's mutation, then each cell on its own")
	got := stored(t, tbl, "f")
	assert.Equal(t, "a writer's new value", got[changed], "the writer's value is untouched")
	for k, v := range model {
		if k != changed {
			k.ts += bigtable.Timestamp(30 * day / time.Microsecond)
			assert.Equal(t, v, got[k])
		}
	}
}

// A row whose predicate would pass the filter size limit is moved by
// several conditional mutations, each within it; every cell moves.
func TestALargeRowMovesInSeveralMutations(t *testing.T) {
	h, tbl, calls := countingTable(t)
	ctx := context.Background()
	now := h.Clock.Now()
	m := bigtable.NewMutation()
	model := map[key]string{}
	for i := 0; i < 40; i++ {
		col := fmt.Sprintf("c%02d", i)
		ts := bigtable.Time(now.Add(-time.Duration(i+1) * time.Minute))
		v := strings.Repeat(string(rune('a'+i%26)), 1000)
		m.Set("f", col, ts, []byte(v))
		model[key{"big", col, ts}] = v
	}
	require.NoError(t, tbl.Apply(ctx, "big", m))
	h.Clock.Set(now.Add(time.Second))
	mg, err := migrate.New(tbl, "t", inPlace(now, day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	calls.Store(0)
	rep, err := mg.Run(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(40), rep.Moved)
	assert.Zero(t, rep.Unmoved())
	// 40 pins of a 1,000-byte value (held twice) cannot fit in 20 KiB.
	assert.GreaterOrEqual(t, calls.Load(), int64(4))
	assert.Less(t, calls.Load(), int64(10), "as many cells per mutation as fit")
	assert.Equal(t, shifted(model, day), stored(t, tbl, "f"))
}

// inPlaceMigrator migrates tbl's family "f" in place, real timestamps to
// one-second expiry 30 days on, every writer switched at now.
func inPlaceMigrator(t *testing.T, h *bttestharness.Harness, tbl *bigtable.Table, now time.Time) *migrate.Migrator {
	t.Helper()
	mg, err := migrate.New(tbl, "t", inPlace(now, 30*day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	return mg
}

// A row's target slots are checked as one span (one filter, not one per
// slot) when the row as read holds nothing in it; as exact slots when it
// does; and a cell written into the span after the read, on no slot,
// stops nothing from moving: the cells are then moved one by one, each
// with its exact slot, and the writer's cell is left as it is.
func TestARowsSlotsAreCheckedAsOneSpan(t *testing.T) {
	h, tbl, calls := countingTable(t)
	ctx := context.Background()
	now := h.Clock.Now()
	model := load(t, tbl, "f", 1, 10, now, day)
	h.Clock.Set(now.Add(time.Second))
	slots := func() *btpb.RowFilter { return lastPredicate.Load().GetCondition().GetPredicateFilter() }
	mg := inPlaceMigrator(t, h, tbl, now)
	_, err := mg.Run(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(10), mg.Stats().Moved)
	assert.Equal(t, int64(1), calls.Load())
	assert.NotNil(t, slots().GetChain(), "the slots as one span: %v", slots())
	assert.Equal(t, shifted(model, 30*day), stored(t, tbl, "f"))

	// A bttl cell (stamped after the switch) inside the span as read: the
	// exact slots, still one mutation.
	drop := bigtable.NewMutation()
	drop.DeleteRow()
	require.NoError(t, tbl.Apply(ctx, "row0000000", drop))
	model = load(t, tbl, "f", 1, 10, now, day)
	var lo, hi bigtable.Timestamp
	for k := range model {
		if lo == 0 || k.ts < lo {
			lo = k.ts
		}
		hi = max(hi, k.ts)
	}
	inside := key{"row0000000", "c05", (lo+hi)/2/1000*1000 + bigtable.Timestamp(30*day/time.Microsecond)}
	w := bigtable.NewMutation()
	w.Set("f", inside.col, inside.ts, []byte("bttl"))
	require.NoError(t, tbl.Apply(ctx, inside.row, w))
	calls.Store(0)
	mg = inPlaceMigrator(t, h, tbl, now)
	_, err = mg.Run(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(10), mg.Stats().Moved)
	assert.Equal(t, int64(1), mg.Stats().OnTarget)
	assert.Equal(t, int64(1), calls.Load())
	assert.NotNil(t, slots().GetInterleave(), "exact slots: %v", slots())
	want := shifted(model, 30*day)
	want[inside] = "bttl"
	assert.Equal(t, want, stored(t, tbl, "f"))

	// Read, then a writer puts a cell in the span on no slot: the span
	// does not match, each cell moves on its own, nothing is changed.
	require.NoError(t, tbl.Apply(ctx, "row0000000", drop))
	model = load(t, tbl, "f", 1, 10, now, day)
	mg = inPlaceMigrator(t, h, tbl, now)
	row, err := tbl.ReadRow(ctx, "row0000000", bigtable.RowFilter(mg.Filter()))
	require.NoError(t, err)
	require.NoError(t, tbl.Apply(ctx, inside.row, w))
	calls.Store(0)
	require.NoError(t, mg.MigrateRow(ctx, row))
	st := mg.Stats()
	assert.Equal(t, int64(10), st.Moved)
	assert.Zero(t, st.Unmoved())
	assert.Equal(t, int64(11), calls.Load(), "the span, then each cell on its own")
	want = shifted(model, 30*day)
	want[inside] = "bttl" // the writer's cell, untouched
	assert.Equal(t, want, stored(t, tbl, "f"))
}
