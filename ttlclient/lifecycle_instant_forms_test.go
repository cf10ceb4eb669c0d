package ttlclient_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

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
