package ttlclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// rawSet writes value to fam:col of row at ts with the raw client, as a
// plain program (or this table before its cap) would: a cell whose TTL
// the table's rules would not give it.
func rawSet(t *testing.T, h *bttestharness.Harness, table, row, fam, col string, ts bigtable.Timestamp, value string) {
	t.Helper()
	m := bigtable.NewMutation()
	m.Set(fam, col, ts, []byte(value))
	require.NoError(t, h.Raw.Open(table).Apply(context.Background(), row, m))
}

// Review suspicion (a): Persist, and ReadRowAndPersist, on a clamping
// family never shorten a cell whose TTL is already longer than the cap
// (written before the cap, or by a plain client): "forever" there is the
// cap, and a cell living longer already is left alone (ExpireNotMet).
// Before the fix both moved it down to the cap.
func TestPersistOnAClampingFamilyNeverShortens(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "clamp37", condSchema())
		now := h.Clock.Now()
		// clamp: default expiry D, cap 3h; this cell expires in 10h.
		ts := bigtable.Timestamp(now.Add(10*time.Hour-defaultD).UnixMilli() * 1000)
		rawSet(t, h, "clamp37", "r", "clamp", "c", ts, "long")
		rawSet(t, h, "clamp37", "g", "clamp", "c", ts, "long")

		r, err := tbl.Persist(ctx, "r", "clamp", "c")
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireNotMet, r)
		it, ok := lcCell(t, tbl, "r", "clamp", "c")
		require.True(t, ok)
		assert.Equal(t, ts, it.Timestamp, "not shortened to the cap")

		_, res, err := tbl.ReadRowAndPersist(ctx, "g", nil)
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, res, "every returned cell already lives at least as long as forever here")
		it, ok = lcCell(t, tbl, "g", "clamp", "c")
		require.True(t, ok)
		assert.Equal(t, ts, it.Timestamp, "not shortened to the cap")

		// A shorter cell still gets the cap.
		lcSet(t, tbl, "r", "clamp", "d", "v", time.Minute)
		r, err = tbl.Persist(ctx, "r", "clamp", "d")
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, r)
		assert.Equal(t, 3*time.Hour, lcLeft(t, tbl, "r", "clamp", "d"))
	})
}

// Review suspicion (b): ReadRowAndExpire with a filter that returns an
// older version of a column moves that version when the move crosses no
// newer cell (it was "changed" every time: the predicate required it to be
// the column's newest), and refuses the move that would lift it over the
// newer version (which it would hide).
func TestReadRowAndExpireOfAnOlderVersion(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "older37", condSchema())
		lcSet(t, tbl, "r", famOne, "c", "old", 10*time.Minute)
		lcSet(t, tbl, "r", famOne, "c", "new", 20*time.Minute)
		newest, ok := lcCell(t, tbl, "r", famOne, "c")
		require.True(t, ok)
		older := bigtable.ChainFilters(bigtable.ColumnRangeFilter(famOne, "c", "c\x00"),
			bigtable.TimestampRangeFilterMicros(0, newest.Timestamp))

		r, res, err := tbl.ReadRowAndExpire(ctx, "r", older, 15*time.Minute)
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, res)
		require.Len(t, r[famOne], 1)
		assert.Equal(t, "old", string(r[famOne][0].Value))
		all, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		require.Len(t, all[famOne], 2)
		assert.Equal(t, "new", string(all[famOne][0].Value), "the newer version is still the newest")
		assert.Equal(t, newest.Timestamp, all[famOne][0].Timestamp)
		left, err := tbl.RemainingTTL(all[famOne][1])
		require.NoError(t, err)
		assert.Equal(t, 15*time.Minute, left, "the older version has the TTL")

		// Over the newer version: it would hide it; nothing changes.
		_, res, err = tbl.ReadRowAndExpire(ctx, "r", older, time.Hour)
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireChanged, res)
		again, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		assert.Equal(t, all, again)
	})
}

// SetColumns: FNX writes only when no column holds a live cell, FXX only
// when every one does; an expired cell not yet collected does not count;
// nothing is written in part.
func TestSetColumnsIfNoneOrAllExist(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "hsetex", condSchema())
		vals := map[string][]byte{"a": []byte("A"), "b": []byte("B")}

		applied, err := tbl.SetColumns(ctx, "r", famOne, vals, time.Hour, ttlclient.SetIfAllExist)
		require.NoError(t, err)
		assert.False(t, applied, "FXX: none exists")
		lcSet(t, tbl, "r", famOne, "a", "old", time.Minute)
		applied, err = tbl.SetColumns(ctx, "r", famOne, vals, time.Hour, ttlclient.SetIfAllExist)
		require.NoError(t, err)
		assert.False(t, applied, "FXX: b does not exist")
		applied, err = tbl.SetColumns(ctx, "r", famOne, vals, time.Hour, ttlclient.SetIfNoneExist)
		require.NoError(t, err)
		assert.False(t, applied, "FNX: a exists")
		it, _ := lcCell(t, tbl, "r", famOne, "a")
		assert.Equal(t, "old", string(it.Value), "nothing written")
		_, ok := lcCell(t, tbl, "r", famOne, "b")
		assert.False(t, ok, "nothing written in part")

		// a expires (still stored, GC off): it no longer exists.
		h.Clock.Advance(2 * time.Minute)
		applied, err = tbl.SetColumns(ctx, "r", famOne, vals, time.Hour, ttlclient.SetIfNoneExist)
		require.NoError(t, err)
		assert.True(t, applied, "FNX: the expired cell does not count")
		assert.Equal(t, time.Hour, lcLeft(t, tbl, "r", famOne, "a"))
		assert.Equal(t, time.Hour, lcLeft(t, tbl, "r", famOne, "b"))

		applied, err = tbl.SetColumns(ctx, "r", famOne, map[string][]byte{"a": []byte("A2"), "b": []byte("B2")}, 2*time.Hour, ttlclient.SetIfAllExist)
		require.NoError(t, err)
		assert.True(t, applied, "FXX: both exist")
		it, _ = lcCell(t, tbl, "r", famOne, "b")
		assert.Equal(t, "B2", string(it.Value))
		assert.Equal(t, 2*time.Hour, lcLeft(t, tbl, "r", famOne, "b"))

		// Refusals before any RPC.
		_, err = tbl.SetColumns(ctx, "r", famSeq, vals, time.Hour, ttlclient.SetIfNoneExist)
		require.ErrorIs(t, err, ttlclient.ErrNotApplicable)
		_, err = tbl.SetColumns(ctx, "r", famOne, nil, time.Hour, ttlclient.SetIfNoneExist)
		require.ErrorIs(t, err, ttlclient.ErrEmptyMutation)
		_, err = tbl.SetColumns(ctx, "r", "refuse", vals, 5*time.Hour, ttlclient.SetIfNoneExist)
		require.ErrorIs(t, err, strategy.ErrTTLTooLong)
	})
}

// Interleaving: writers racing SetColumns FNX on the same columns; the
// server judges each in its own conditional mutation, so exactly one
// writes (run with -race).
func TestSetColumnsIfNoneExistRace(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "hsetexrace", condSchema())
		const n = 8
		var wg sync.WaitGroup
		results := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := []byte{byte('0' + i)}
				results[i], errs[i] = tbl.SetColumns(ctx, "r", famOne, map[string][]byte{"a": v, "b": v}, time.Hour, ttlclient.SetIfNoneExist)
			}()
		}
		wg.Wait()
		won := -1
		for i := range n {
			require.NoError(t, errs[i])
			if results[i] {
				assert.Equal(t, -1, won, "two writers applied")
				won = i
			}
		}
		require.NotEqual(t, -1, won, "no writer applied")
		a, _ := lcCell(t, tbl, "r", famOne, "a")
		b, _ := lcCell(t, tbl, "r", famOne, "b")
		assert.Equal(t, []byte{byte('0' + won)}, a.Value)
		assert.Equal(t, a.Value, b.Value, "one writer's values, both columns")
	})
}
