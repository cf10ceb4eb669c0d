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

// rawSet writes value to fam:col of row at ts with the raw client, as a
// plain program (or this table before its cap) would: a cell whose TTL
// the table's rules would not give it.
func rawSet(t *testing.T, h *bttestharness.Harness, table, row, fam, col string, ts bigtable.Timestamp, value string) {
	t.Helper()
	m := bigtable.NewMutation()
	m.Set(fam, col, ts, []byte(value))
	require.NoError(t, h.Raw.Open(table).Apply(context.Background(), row, m))
}

// Persist, and ReadRowAndPersist, on a clamping
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
