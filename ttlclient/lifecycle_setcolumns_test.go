package ttlclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

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
