package wireguard_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

var lifecycleSchema = strategy.Schema{
	"wt":    strategy.OneSecond(strategy.WithWriteTime()),
	"cap":   strategy.DefaultExpiry(time.Hour, strategy.WithMaxTTL(2*time.Hour, strategy.RefuseLonger)),
	"clamp": strategy.DefaultExpiry(time.Hour, strategy.WithMaxTTL(2*time.Hour, strategy.ClampLonger)),
	"plain": strategy.Unmanaged(),
}

// lifecycleEnv is a guarded plain client on table "t" of lifecycleSchema,
// on the in-process server.
func lifecycleEnv(t *testing.T) (*bttestharness.Harness, *bigtable.Table) {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", lifecycleSchema))
	g, err := wireguard.New(map[string]strategy.Schema{"t": lifecycleSchema}, wireguard.WithClock(h.Clock), wireguard.WithReadFilter())
	require.NoError(t, err)
	return h, guardedClient(t, h.Addr, g).Open("t")
}

// A plain client's write to a write-time family gets the companion bttl's
// client writes (same timestamp, the guard's clock as write time), so
// Table.WriteTime works for it; deletes take the companion along.
func TestGuardAddsWriteTimeCompanions(t *testing.T) {
	h, tbl := lifecycleEnv(t)
	ctx := context.Background()
	now := h.Clock.Now()
	exp := bigtable.Time(now.Add(time.Hour)).TruncateToMilliseconds()

	for _, col := range []string{"c", ""} {
		m := bigtable.NewMutation()
		m.Set("wt", col, exp, []byte("v"))
		m.Set("plain", col, exp, []byte("p"))
		require.NoError(t, tbl.Apply(ctx, "r"+col, m))
		stored, err := h.Stored(ctx, "t", "r"+col)
		require.NoError(t, err)
		require.Len(t, stored["wt"], 2, "the cell and its companion")
		assert.Equal(t, "wt:"+strategy.WriteTimeColumn(col), stored["wt"][1].Column)
		assert.Equal(t, exp, stored["wt"][1].Timestamp, "same timestamp: GC removes both together")
		wt, err := strategy.ParseWriteTime(stored["wt"][1].Value)
		require.NoError(t, err)
		assert.Equal(t, bigtable.Time(now).TruncateToMilliseconds(), wt)
		assert.Len(t, stored["plain"], 1, "other families get none")
	}

	// bttl's client through the guard: reads hide the companion, WriteTime finds it.
	bt, err := h.Client.Open(context.Background(), "t", lifecycleSchema)
	require.NoError(t, err)
	row, err := bt.ReadRow(ctx, "rc")
	require.NoError(t, err)
	require.Len(t, row["wt"], 1)
	got, err := bt.WriteTime(ctx, row["wt"][0])
	require.NoError(t, err)
	assert.True(t, now.Truncate(time.Millisecond).Equal(got), "write time %s, want %s", got, now)

	del := bigtable.NewMutation()
	del.DeleteCellsInColumn("wt", "c")
	require.NoError(t, tbl.Apply(ctx, "rc", del))
	stored, err := h.Stored(ctx, "t", "rc")
	require.NoError(t, err)
	assert.Empty(t, stored["wt"], "the delete took the companion too")
}

// Companions change in step with their cells, in request order: a cell
// set, deleted and set again in one request keeps its companion, and a
// column delete after a Set takes both. A client's own companion delete
// is refused like its companion Set: the guard removes companions only
// with their cells.
func TestGuardKeepsCompanionsInStepWithTheirCells(t *testing.T) {
	h, tbl := lifecycleEnv(t)
	ctx := context.Background()
	exp := bigtable.Time(h.Clock.Now().Add(time.Hour)).TruncateToMilliseconds()
	again := bigtable.NewMutation()
	again.Set("wt", "c", exp, []byte("v1"))
	again.DeleteCellsInColumn("wt", "c")
	again.Set("wt", "c", exp, []byte("v2"))
	gone := bigtable.NewMutation()
	gone.Set("wt", "c", exp, []byte("v"))
	gone.DeleteCellsInColumn("wt", "c")
	errs, err := tbl.ApplyBulk(ctx, []string{"again", "gone"}, []*bigtable.Mutation{again, gone})
	require.NoError(t, err)
	require.Nil(t, errs)
	stored, err := h.Stored(ctx, "t", "again")
	require.NoError(t, err)
	require.Len(t, stored["wt"], 2, "the cell and its companion")
	assert.Equal(t, "v2", string(stored["wt"][0].Value))
	assert.Equal(t, "wt:"+strategy.WriteTimeColumn("c"), stored["wt"][1].Column)
	stored, err = h.Stored(ctx, "t", "gone")
	require.NoError(t, err)
	assert.Empty(t, stored)

	paired := bigtable.NewMutation()
	paired.DeleteCellsInColumn("wt", "c")
	paired.DeleteCellsInColumn("wt", strategy.WriteTimeColumn("c"))
	assert.ErrorContains(t, tbl.Apply(ctx, "again", paired), "rule "+wireguard.RuleReservedColumn)
	stored, err = h.Stored(ctx, "t", "again")
	require.NoError(t, err)
	assert.Len(t, stored["wt"], 2, "nothing of the refused request was applied")
}

// Writes to the reserved qualifiers are refused: they would forge or
// orphan write times.
func TestGuardRefusesForgedCompanions(t *testing.T) {
	h, tbl := lifecycleEnv(t)
	ctx := context.Background()
	exp := bigtable.Time(h.Clock.Now().Add(time.Hour)).TruncateToMilliseconds()
	for _, col := range []string{strategy.WriteTimeColumn("c"), "\xff\xffx", "\xff\xff"} {
		m := bigtable.NewMutation()
		m.Set("wt", col, exp, []byte("forged"))
		err := tbl.Apply(ctx, "r", m)
		require.Error(t, err, "%q", col)
		assert.Contains(t, err.Error(), "rule "+wireguard.RuleReservedColumn)
	}
	// A companion at another timestamp than its cell's is no companion.
	m := bigtable.NewMutation()
	m.Set("wt", "c", exp, []byte("v"))
	m.Set("wt", strategy.WriteTimeColumn("c"), exp+1000, strategy.WriteTimeValue(1000))
	assert.ErrorContains(t, tbl.Apply(ctx, "r", m), "rule "+wireguard.RuleReservedColumn)
	// Unmanaged families reserve nothing.
	ok := bigtable.NewMutation()
	ok.Set("plain", "\xff\xffx", exp, []byte("p"))
	require.NoError(t, tbl.Apply(ctx, "p", ok))

	stored, err := h.Stored(ctx, "t", "r")
	require.NoError(t, err)
	assert.Empty(t, stored, "nothing refused was written")
}

// A timestamp over the family's max TTL is refused with its own rule; the
// guard does not clamp (it never rewrites a caller's timestamp), even where
// bttl's client would.
func TestGuardRefusesTTLOverTheCap(t *testing.T) {
	h, tbl := lifecycleEnv(t)
	ctx := context.Background()
	now := h.Clock.Now()
	// Default expiry D=1h: ts = expiry - D, so a 3h TTL is ts = now + 2h.
	over := bigtable.Time(now.Add(2 * time.Hour)).TruncateToMilliseconds()
	within := bigtable.Time(now.Add(30 * time.Minute)).TruncateToMilliseconds()
	for _, fam := range []string{"cap", "clamp"} {
		m := bigtable.NewMutation()
		m.Set(fam, "c", over, []byte("v"))
		err := tbl.Apply(ctx, "r", m)
		require.Error(t, err, fam)
		assert.Contains(t, err.Error(), "rule "+wireguard.RuleTTLTooLong, fam)

		ok := bigtable.NewMutation()
		ok.Set(fam, "c", within, []byte("v"))
		require.NoError(t, tbl.Apply(ctx, "ok", ok), fam)
	}
	stored, err := h.Stored(ctx, "t", "r")
	require.NoError(t, err)
	assert.Empty(t, stored)
}
