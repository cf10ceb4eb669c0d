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

// ExpireColumnAt gives the newest the expiry at and the older versions
// the same shift, answering per cell (ExpireResultsTo); an instant already
// past deletes every live cell; a column without one is one ExpireNoCell.
func TestExpireColumnAtAndRowAtAnswerPerCell(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "colat", condSchema())
		now := h.Clock.Now()
		lcSet(t, tbl, "r", famOne, "c", "v1", 10*time.Minute)
		lcSet(t, tbl, "r", famOne, "c", "v2", 20*time.Minute)
		before, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)

		var res []ttlclient.ExpireCellResult
		moved, err := tbl.ExpireColumnAt(ctx, "r", famOne, "c", now.Add(time.Hour), ttlclient.OnlyIfLater, ttlclient.ExpireResultsTo(&res))
		require.NoError(t, err)
		assert.Equal(t, 2, moved)
		assert.Equal(t, []ttlclient.ExpireCellResult{
			{Family: famOne, Column: "c", Timestamp: before[famOne][0].Timestamp, Result: ttlclient.ExpireSet},
			{Family: famOne, Column: "c", Timestamp: before[famOne][1].Timestamp, Result: ttlclient.ExpireSet},
		}, res)
		after, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		require.Len(t, after[famOne], 2)
		exp, err := tbl.Expiry(after[famOne][0])
		require.NoError(t, err)
		assert.True(t, exp.Equal(now.Add(time.Hour)), "newest expires at the instant: %s", exp)
		assert.Equal(t, after[famOne][0].Timestamp-after[famOne][1].Timestamp, before[famOne][0].Timestamp-before[famOne][1].Timestamp, "spacing kept")

		// GT to an earlier instant: not met, per cell.
		moved, err = tbl.ExpireColumnAt(ctx, "r", famOne, "c", now.Add(30*time.Minute), ttlclient.OnlyIfLater, ttlclient.ExpireResultsTo(&res))
		require.NoError(t, err)
		assert.Equal(t, 0, moved)
		require.Len(t, res, 2)
		assert.Equal(t, ttlclient.ExpireNotMet, res[0].Result)
		assert.Equal(t, ttlclient.ExpireNotMet, res[1].Result)

		// No live cell.
		_, err = tbl.ExpireColumnAt(ctx, "r", famOne, "none", now.Add(time.Hour), ttlclient.ExpireResultsTo(&res))
		require.NoError(t, err)
		assert.Equal(t, []ttlclient.ExpireCellResult{{Family: famOne, Column: "none", Result: ttlclient.ExpireNoCell}}, res)

		// ExpireRowAt: every age family's cells; a past instant deletes.
		lcSet(t, tbl, "r", famDef, "d", "x", 10*time.Minute)
		moved, err = tbl.ExpireRowAt(ctx, "r", now.Add(-time.Second), ttlclient.ExpireResultsTo(&res))
		require.NoError(t, err)
		assert.Equal(t, 3, moved)
		require.Len(t, res, 3)
		for _, r := range res {
			assert.Equal(t, ttlclient.ExpireDeleted, r.Result, "%+v", r)
		}
		stored, err := h.Stored(ctx, "colat", "r")
		require.NoError(t, err)
		assert.Empty(t, stored[famOne], "deleted from storage, not hidden")
		assert.Empty(t, stored[famDef])

		// Refusals before any RPC leave no results: a cap that refuses.
		res = []ttlclient.ExpireCellResult{{}}
		_, err = tbl.ExpireRowAt(ctx, "r", now.Add(5*time.Hour), ttlclient.ExpireResultsTo(&res))
		require.ErrorIs(t, err, strategy.ErrTTLTooLong)
		assert.Nil(t, res)
		_, err = tbl.ExpireColumnAt(ctx, "r", famSeq, "c", now.Add(time.Hour))
		require.ErrorIs(t, err, ttlclient.ErrNotApplicable)
		_, err = tbl.ExpireColumnAt(ctx, "r", famOne, "c", time.UnixMicro(int64(strategy.MaxTimestamp)).Add(time.Hour))
		require.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	})
}

// ReadRowAndExpireAt: the returned cells get the expiry at in one
// mutation; a past instant deletes them (ExpireDeleted); a write between
// the read and the mutation that the move would cross makes nothing
// change.
func TestReadRowAndExpireAt(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "getexat", condSchema())
		now := h.Clock.Now()
		lcSet(t, tbl, "r", famOne, "a", "a", 10*time.Minute)
		lcSet(t, tbl, "r", famDef, "b", "b", 10*time.Minute)
		r, res, err := tbl.ReadRowAndExpireAt(ctx, "r", nil, now.Add(time.Hour))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, res)
		assert.Len(t, r[famOne], 1)
		assert.Equal(t, time.Hour, lcLeft(t, tbl, "r", famOne, "a"))
		assert.Equal(t, time.Hour, lcLeft(t, tbl, "r", famDef, "b"))

		hc.before("CheckAndMutateRow", func() { lcSet(t, tbl, "r", famOne, "a", "new", 90*time.Minute) })
		_, res, err = tbl.ReadRowAndExpireAt(ctx, "r", nil, now.Add(2*time.Hour))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireChanged, res)
		assert.Equal(t, time.Hour, lcLeft(t, tbl, "r", famDef, "b"), "not moved in part")
		it, _ := lcCell(t, tbl, "r", famOne, "a")
		assert.Equal(t, "new", string(it.Value), "the write stays the newest")

		_, res, err = tbl.ReadRowAndExpireAt(ctx, "r", bigtable.FamilyFilter(famDef), now.Add(-time.Millisecond))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireDeleted, res)
		stored, err := h.Stored(ctx, "getexat", "r")
		require.NoError(t, err)
		assert.Empty(t, stored[famDef], "deleted from storage")
		assert.Len(t, stored[famOne], 2, "other families untouched")

		_, _, err = tbl.ReadRowAndExpireAt(ctx, "r", nil, time.UnixMicro(int64(strategy.MaxTimestamp)).Add(time.Hour))
		require.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	})
}

// Interleaving: between ExpireColumnAt's read and its conditional
// mutation a concurrent Expire moves the cell past the instant; the GT
// condition no longer holds and the server, not the stale read, decides:
// ExpireChanged, the concurrent expiry kept.
func TestExpireColumnAtConditionJudgedOnTheServer(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "colatrace", condSchema())
		now := h.Clock.Now()
		for _, fam := range []string{famOne, famDef, "wt"} {
			lcSet(t, tbl, "r", fam, "c", "v", 10*time.Minute)
			hc.before("CheckAndMutateRow", func() {
				applied, err := tbl.Expire(ctx, "r", fam, "c", 3*time.Hour)
				assert.NoError(t, err)
				assert.True(t, applied)
			})
			var res []ttlclient.ExpireCellResult
			moved, err := tbl.ExpireColumnAt(ctx, "r", fam, "c", now.Add(time.Hour), ttlclient.OnlyIfLater, ttlclient.ExpireResultsTo(&res))
			require.NoError(t, err)
			assert.Equal(t, 0, moved, fam)
			require.Len(t, res, 1)
			assert.Equal(t, ttlclient.ExpireChanged, res[0].Result, fam)
			assert.Equal(t, 3*time.Hour, lcLeft(t, tbl, "r", fam, "c"), "%s: never shortened by a stale condition", fam)
		}
	})
}

// Edge cases of ExpireColumnAt: a cell at the largest timestamp (no TTL)
// takes NX; a clamping cap clamps the instant, a refusing one refuses it;
// a cell expiring between the read and the move's liveness check is not
// moved, so never revived.
func TestExpireColumnAtEdges(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "colatedge", condSchema())
		now := h.Clock.Now()

		lcSet(t, tbl, "r", famOne, "p", "v", time.Minute)
		r, err := tbl.Persist(ctx, "r", famOne, "p")
		require.NoError(t, err)
		require.Equal(t, ttlclient.ExpireSet, r)
		var res []ttlclient.ExpireCellResult
		moved, err := tbl.ExpireColumnAt(ctx, "r", famOne, "p", now.Add(time.Hour), ttlclient.OnlyIfNoTTL, ttlclient.ExpireResultsTo(&res))
		require.NoError(t, err)
		assert.Equal(t, 1, moved)
		assert.Equal(t, strategy.MaxTimestamp, res[0].Timestamp)
		assert.Equal(t, time.Hour, lcLeft(t, tbl, "r", famOne, "p"))

		lcSet(t, tbl, "r", "clamp", "c", "v", time.Minute)
		_, err = tbl.ExpireColumnAt(ctx, "r", "clamp", "c", now.Add(5*time.Hour))
		require.NoError(t, err)
		assert.Equal(t, 3*time.Hour, lcLeft(t, tbl, "r", "clamp", "c"), "clamped to the cap")
		lcSet(t, tbl, "r", "refuse", "c", "v", time.Minute)
		_, err = tbl.ExpireColumnAt(ctx, "r", "refuse", "c", now.Add(5*time.Hour))
		require.ErrorIs(t, err, strategy.ErrTTLTooLong)
		assert.Equal(t, time.Minute, lcLeft(t, tbl, "r", "refuse", "c"), "refused: unchanged")

		// wt: the move reads the companion after the column; the clock
		// passes the cell's expiry in between.
		lcSet(t, tbl, "e", "wt", "c", "v", time.Minute)
		it, ok := lcCell(t, tbl, "e", "wt", "c")
		require.True(t, ok)
		hc.before("ReadRows", func() {
			hc.before("ReadRows", func() { h.Clock.Advance(2 * time.Minute) })
		})
		moved, err = tbl.ExpireColumnAt(ctx, "e", "wt", "c", now.Add(time.Hour), ttlclient.ExpireResultsTo(&res))
		require.NoError(t, err)
		assert.Equal(t, 0, moved)
		assert.Equal(t, []ttlclient.ExpireCellResult{{Family: "wt", Column: "c", Timestamp: it.Timestamp, Result: ttlclient.ExpireChanged}}, res)
		_, ok = lcCell(t, tbl, "e", "wt", "c")
		assert.False(t, ok, "the expired cell is not revived")
		stored, err := h.Stored(ctx, "colatedge", "e")
		require.NoError(t, err)
		require.NotEmpty(t, stored["wt"])
		assert.Equal(t, it.Timestamp, stored["wt"][0].Timestamp, "left where it was")
	})
}

// SetColumnsKeepTTL (HSETEX FXX KEEPTTL): every column keeps its own TTL;
// a column without a live cell, or a write to one of them between the
// read and the mutation, writes nothing.
func TestSetColumnsKeepTTL(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "hsetexkeep", condSchema())
		for _, fam := range []string{famOne, "wt"} {
			lcSet(t, tbl, "r", fam, "a", "a0", 10*time.Minute)
			r, err := tbl.SetColumnsKeepTTL(ctx, "r", fam, map[string][]byte{"a": []byte("a1"), "b": []byte("b1")})
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireNoCell, r, "%s: b has no live cell", fam)
			it, _ := lcCell(t, tbl, "r", fam, "a")
			assert.Equal(t, "a0", string(it.Value), "nothing written in part")

			lcSet(t, tbl, "r", fam, "b", "b0", 20*time.Minute)
			r, err = tbl.SetColumnsKeepTTL(ctx, "r", fam, map[string][]byte{"a": []byte("a1"), "b": []byte("b1")})
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireSet, r, fam)
			it, _ = lcCell(t, tbl, "r", fam, "a")
			assert.Equal(t, "a1", string(it.Value))
			assert.Equal(t, 10*time.Minute, lcLeft(t, tbl, "r", fam, "a"), "a keeps its TTL")
			assert.Equal(t, 20*time.Minute, lcLeft(t, tbl, "r", fam, "b"), "b keeps its TTL")
			stored, err := h.Stored(ctx, "hsetexkeep", "r")
			require.NoError(t, err)
			n := 0
			for _, c := range stored[fam] {
				if c.Column == fam+":a" {
					n++
				}
			}
			assert.Equal(t, 1, n, "%s: replaced, not added", fam)

			hc.before("CheckAndMutateRow", func() { lcSet(t, tbl, "r", fam, "b", "new", 30*time.Minute) })
			r, err = tbl.SetColumnsKeepTTL(ctx, "r", fam, map[string][]byte{"a": []byte("a2"), "b": []byte("b2")})
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireChanged, r, fam)
			it, _ = lcCell(t, tbl, "r", fam, "a")
			assert.Equal(t, "a1", string(it.Value), "nothing written")
			it, _ = lcCell(t, tbl, "r", fam, "b")
			assert.Equal(t, "new", string(it.Value), "the concurrent write kept")
		}
		_, err := tbl.SetColumnsKeepTTL(ctx, "r", famSeq, map[string][]byte{"a": nil})
		require.ErrorIs(t, err, ttlclient.ErrNotApplicable)
		_, err = tbl.SetColumnsKeepTTL(ctx, "r", famOne, nil)
		require.ErrorIs(t, err, ttlclient.ErrEmptyMutation)
	})
}
