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
