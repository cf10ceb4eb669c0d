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
