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

// ReadRowAndExpire returns the row as read and gives the newest cell of
// each returned column the TTL in one mutation; a concurrent write
// between the read and the mutation makes it not apply at all.
func TestReadRowAndExpire(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "getex", condSchema())
		m := ttlclient.NewMutation()
		m.SetTTL(famOne, "a", 10*time.Minute, []byte("a"))
		m.SetTTL(famOne, "b", 3*time.Hour, []byte("b"))
		m.SetTTL("wt", "c", time.Minute, []byte("c"))
		m.SetTTL("mv", "d", 5*time.Hour, []byte("d"))
		m.SetVersion(famSeq, "s", 1, []byte("s"))
		require.NoError(t, tbl.Apply(ctx, "r", m))
		wt, err := tbl.MaxWriteTime(ctx, "r", "wt")
		require.NoError(t, err)

		r, res, err := tbl.ReadRowAndExpire(ctx, "r", nil, time.Hour)
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, res)
		assert.Len(t, r[famOne], 2, "the row as read")
		for _, c := range [][2]string{{famOne, "a"}, {famOne, "b"}, {"wt", "c"}, {"mv", "d"}} {
			assert.Equal(t, time.Hour, lcLeft(t, tbl, "r", c[0], c[1]), "%s:%s", c[0], c[1])
		}
		got, err := tbl.MaxWriteTime(ctx, "r", "wt")
		require.NoError(t, err)
		assert.True(t, wt.Equal(got), "the companion moved with its cell")
		stored, err := h.Stored(ctx, "getex", "r")
		require.NoError(t, err)
		assert.Len(t, stored[famOne], 2, "moved, not copied")
		assert.Len(t, stored[famSeq], 1, "sequence cells left alone")

		// Only the columns the filter returns.
		_, _, err = tbl.ReadRowAndExpire(ctx, "r", bigtable.ColumnRangeFilter(famOne, "a", "a\x00"), 2*time.Hour)
		require.NoError(t, err)
		assert.Equal(t, 2*time.Hour, lcLeft(t, tbl, "r", famOne, "a"))
		assert.Equal(t, time.Hour, lcLeft(t, tbl, "r", famOne, "b"))

		// A write between the read and the mutation: nothing moves, the
		// write is the newest.
		hc.before("CheckAndMutateRow", func() { lcSet(t, tbl, "r", famOne, "b", "new", 90*time.Minute) })
		_, res, err = tbl.ReadRowAndExpire(ctx, "r", nil, 3*time.Hour)
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireChanged, res)
		assert.Equal(t, 2*time.Hour, lcLeft(t, tbl, "r", famOne, "a"), "not moved in part")
		it, _ := lcCell(t, tbl, "r", famOne, "b")
		assert.Equal(t, "new", string(it.Value))

		// Persist: to the largest timestamp; refused for the whole row
		// where a returned family cannot persist.
		r, res, err = tbl.ReadRowAndPersist(ctx, "r", bigtable.ColumnRangeFilter(famOne, "a", "a\x00"))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, res)
		assert.Len(t, r[famOne], 1)
		it, _ = lcCell(t, tbl, "r", famOne, "a")
		assert.Equal(t, strategy.MaxTimestamp, it.Timestamp)
		lcSet(t, tbl, "r", "refuse", "x", "x", time.Minute)
		before, err := h.Stored(ctx, "getex", "r")
		require.NoError(t, err)
		_, _, err = tbl.ReadRowAndPersist(ctx, "r", nil)
		require.ErrorIs(t, err, ttlclient.ErrCannotPersist)
		after, err := h.Stored(ctx, "getex", "r")
		require.NoError(t, err)
		assert.Equal(t, cells(before), cells(after), "nothing written")

		_, res, err = tbl.ReadRowAndExpire(ctx, "nosuch", nil, time.Hour)
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireNoCell, res)
	})
}

// ReadRowAndExpire with a filter that returns an
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
