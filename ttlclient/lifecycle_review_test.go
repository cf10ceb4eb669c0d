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

// longD is a default TTL longer than the time since the epoch: on such a
// family timestamp 0 is live, and an expiry less than D away has no
// timestamp (it would be before the epoch).
const longD = 100 * 365 * 24 * time.Hour

// ExpireAt on a default-expiry family whose D is longer than the time
// since the epoch: an instant in the future whose timestamp would be
// before the epoch is refused as Expire refuses the same TTL
// (strategy.ErrBeforeEpoch), not taken for a past instant that deletes the
// live cell; an instant in the past deletes the cell, rather than moving
// it to timestamp 0, which is live there for decades.
func TestExpireAtOnAFamilyWithADefaultTTLLongerThanTheEpoch(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "longd", strategy.Schema{"d": strategy.DefaultExpiry(longD)})
		write := func(row string) {
			m := ttlclient.NewMutation()
			m.Set("d", "c", bigtable.ServerTime, []byte("v")) // the family default: lives D
			require.NoError(t, tbl.Apply(ctx, row, m))
			_, ok := lcCell(t, tbl, row, "d", "c")
			require.True(t, ok)
		}

		write("future")
		_, err := tbl.Expire(ctx, "future", "d", "c", time.Hour)
		require.ErrorIs(t, err, strategy.ErrBeforeEpoch, "Expire's refusal of the same TTL")
		r, err := tbl.ExpireAt(ctx, "future", "d", "c", time.Now().Add(time.Hour))
		require.ErrorIs(t, err, strategy.ErrBeforeEpoch, "an instant an hour away is not past")
		assert.Equal(t, ttlclient.ExpireNoCell, r)
		_, ok := lcCell(t, tbl, "future", "d", "c")
		assert.True(t, ok, "the live cell is still there")

		write("past")
		r, err = tbl.ExpireAt(ctx, "past", "d", "c", time.Now().Add(-time.Hour))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireDeleted, r)
		_, ok = lcCell(t, tbl, "past", "d", "c")
		assert.False(t, ok, "a past instant deletes the cell")
	})
}

// ReadRowAndExpire and ReadRowAndPersist on a row holding no cell of an
// age family (only sequence cells here) return ExpireNoCell, as they
// document, not ExpireSet: nothing was given a TTL.
func TestReadRowAndExpireWithoutAnAgeCellIsNoCell(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "getexseq", condSchema())
		m := ttlclient.NewMutation()
		m.SetVersion(famSeq, "s", 1, []byte("s"))
		require.NoError(t, tbl.Apply(ctx, "r", m))

		r, res, err := tbl.ReadRowAndExpire(ctx, "r", nil, time.Hour)
		require.NoError(t, err)
		assert.Len(t, r[famSeq], 1, "the row as read")
		assert.Equal(t, ttlclient.ExpireNoCell, res)
		r, res, err = tbl.ReadRowAndPersist(ctx, "r", nil)
		require.NoError(t, err)
		assert.Len(t, r[famSeq], 1, "the row as read")
		assert.Equal(t, ttlclient.ExpireNoCell, res)
	})
}

// ExpireColumn shortening a column on a family whose D is longer than the
// time since the epoch: an older version shifted to before the epoch, its
// new expiry already past, is deleted as the doc says ("an older one
// shifted into the past is deleted"), not kept at timestamp 0, which is
// live there for decades.
func TestExpireColumnShiftsAnOlderVersionBeforeTheEpochOnALongDefaultTTL(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "longdcol", strategy.Schema{"d": strategy.DefaultExpiry(longD)})
		m := ttlclient.NewMutation()
		m.Set("d", "c", 1000, []byte("old")) // expires D after the epoch: live
		m.Set("d", "c", bigtable.ServerTime, []byte("new"))
		require.NoError(t, tbl.Apply(ctx, "r", m))
		r, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		require.Len(t, r["d"], 2)

		// The newest gets 50 years: every cell moves 50 years earlier, the
		// old one to an expiry about six years ago.
		moved, err := tbl.ExpireColumn(ctx, "r", "d", "c", 50*365*24*time.Hour)
		require.NoError(t, err)
		assert.Equal(t, 2, moved)
		r, err = tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		require.Len(t, r["d"], 1, "the old version, its expiry past, is deleted: %v", r["d"])
		assert.Equal(t, "new", string(r["d"][0].Value))
	})
}

// A move that wrote the cell at a live target is ExpireSet even when the
// target has expired by the time the answer comes back (a TTL shorter
// than the RPC): ExpireDeleted says the cell was deleted from storage,
// and here it was written.
func TestExpireResultIsWhatTheMutationDid(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "result", condSchema())
		lcSet(t, tbl, "r", famOne, "c", "v", time.Hour)
		hc.before("CheckAndMutateRow", func() { h.Clock.Advance(time.Second) })
		var r ttlclient.ExpireResult
		applied, err := tbl.Expire(ctx, "r", famOne, "c", time.Millisecond, ttlclient.ExpireResultTo(&r))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, r, "the cell was written at its target")
		assert.True(t, applied)
		stored, err := h.Stored(ctx, "result", "r")
		require.NoError(t, err)
		assert.Len(t, stored[famOne], 1, "stored at its (now past) target, not deleted")
	})
}

// ExpireRow and ExpireColumn on a write-time family with a condition move
// each cell with its companion (the write time read after is the one
// recorded at the write), and never act on the companions themselves.
func TestExpireRowOnAWriteTimeFamilyMovesTheCompanions(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "wtrow", condSchema())
		lcSet(t, tbl, "r", "wt", "a", "a", time.Hour)
		lcSet(t, tbl, "r", "wt", "b", "b", 2*time.Hour)
		before, err := tbl.MaxWriteTime(ctx, "r", "wt")
		require.NoError(t, err)
		h.Clock.Advance(time.Minute)
		moved, err := tbl.ExpireRow(ctx, "r", 90*time.Minute, ttlclient.OnlyIfLater)
		require.NoError(t, err)
		assert.Equal(t, 1, moved, "only a's expiry is later")
		assert.Equal(t, 90*time.Minute, lcLeft(t, tbl, "r", "wt", "a"))
		it, _ := lcCell(t, tbl, "r", "wt", "a")
		wt, err := tbl.WriteTime(ctx, it)
		require.NoError(t, err)
		after, err := tbl.MaxWriteTime(ctx, "r", "wt")
		require.NoError(t, err)
		assert.True(t, before.Equal(after), "write times kept: %s, %s", before, after)
		assert.False(t, wt.After(before))
		stored, err := h.Stored(ctx, "wtrow", "r")
		require.NoError(t, err)
		assert.Len(t, stored["wt"], 4, "two cells and two companions, none left behind")
	})
}

// A time-to-idle refresh between SetKeepTTL's or ReadRowAndExpire's read
// and its mutation: the refresh moved the cell, so neither applies (the
// value is not replaced at the old expiry, undoing the refresh, nor the
// refreshed cell moved), on both servers.
func TestKeepTTLAndGetAndExpireAfterAnIdleRefresh(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "idlekeep", strategy.Schema{"idle": strategy.OneSecond(strategy.WithIdleTTL(10*time.Minute, 0.1))})
		refresh := func() {
			err := tbl.ReadRows(ctx, bigtable.PrefixRange("r"), func(bigtable.Row) bool { return true }) // queues the refreshes
			require.NoError(t, err)
			require.NoError(t, h.Client.FlushIdleRefreshes(ctx))
		}
		lcSet(t, tbl, "r", "idle", "c", "v", time.Minute) // due: 1m left of 10m
		hc.before("CheckAndMutateRow", refresh)
		r, err := tbl.SetKeepTTL(ctx, "r", "idle", "c", []byte("w"))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireChanged, r)
		it, ok := lcCell(t, tbl, "r", "idle", "c")
		require.True(t, ok)
		assert.Equal(t, "v", string(it.Value))
		assert.Equal(t, 10*time.Minute, lcLeft(t, tbl, "r", "idle", "c"), "the refresh stands")

		lcSet(t, tbl, "r2", "idle", "c", "x", time.Minute)
		hc.before("CheckAndMutateRow", refresh)
		_, r, err = tbl.ReadRowAndExpire(ctx, "r2", nil, 2*time.Minute)
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireChanged, r)
		it, ok = lcCell(t, tbl, "r2", "idle", "c")
		require.True(t, ok)
		assert.Equal(t, "x", string(it.Value))
		assert.Equal(t, 10*time.Minute, lcLeft(t, tbl, "r2", "idle", "c"), "the refresh stands")
	})
}

// ReadRowAndPersist leaves a cell already without a TTL where it is, as it
// documents, on a family whose cap clamps too (where "forever" is the cap
// from now): a cell stored at the largest timestamp (written before the
// cap, say) is not moved down to the cap, which would give it a TTL.
// Persist, whose default condition is XX, leaves it too.
func TestReadRowAndPersistLeavesACellWithoutATTL(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "persistmax", condSchema())
		m := bigtable.NewMutation()
		m.Set("clamp", "c", strategy.MaxTimestamp, []byte("v"))
		require.NoError(t, tbl.Raw().Apply(ctx, "r", m))

		r, err := tbl.Persist(ctx, "r", "clamp", "c")
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireNotMet, r)
		_, r, err = tbl.ReadRowAndPersist(ctx, "r", nil)
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, r)
		it, ok := lcCell(t, tbl, "r", "clamp", "c")
		require.True(t, ok)
		assert.Equal(t, strategy.MaxTimestamp, it.Timestamp, "still without a TTL")
	})
}
