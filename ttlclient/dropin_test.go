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
)

// Acceptance 1: the plain-client program of plainprogram_test.go runs
// through bttl with only the constructor changed, on bttest and on
// cbtemulator, and once its cells expire its reads stop returning them
// while the raw client, on the same stored data, still does.
func TestPlainProgramThroughBTTL(t *testing.T) {
	t.Run("bttest", func(t *testing.T) {
		h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Close() })
		runPlainProgram(t, h)
	})
	t.Run("cbtemulator", func(t *testing.T) {
		h, _ := bttestharness.NewOnEmulator(t, bttestharness.Config{NoGC: true})
		runPlainProgram(t, h)
	})
}

func runPlainProgram(t *testing.T, h *bttestharness.Harness) {
	ctx := context.Background()
	const d = time.Hour
	schema := strategy.Schema{"visits": strategy.DefaultExpiry(d), "stats": strategy.Unmanaged()}
	tbl, err := h.Table(ctx, "visits", schema)
	require.NoError(t, err)

	// The one changed line: tbl.API() instead of h.Raw.OpenTable("visits").
	var api bigtable.TableAPI = tbl.API()
	raw := h.Raw.OpenTable("visits")

	users := []string{"user-1", "user-2"}
	require.NoError(t, recordVisits(ctx, api, users, "home"))
	require.NoError(t, recordVisits(ctx, api, users[:1], "cart"))
	require.NoError(t, countVisit(ctx, api, "user-1"))
	got, err := claim(ctx, api, "lock-row", "a")
	require.NoError(t, err)
	assert.True(t, got, "first claim takes the lock")
	got, err = claim(ctx, api, "lock-row", "b")
	require.NoError(t, err)
	assert.False(t, got, "the lock is held")

	pages, err := pagesOf(ctx, api, "user-1")
	require.NoError(t, err)
	assert.Equal(t, []string{"visits:cart", "visits:home"}, pages)
	active, err := activeUsers(ctx, api)
	require.NoError(t, err)
	assert.Equal(t, users, active)

	// bttl assigned the timestamps: the family's default TTL, at its clock.
	r, err := h.Stored(ctx, "visits", "user-2")
	require.NoError(t, err)
	require.Len(t, r["visits"], 1)
	assert.Equal(t, bigtable.Timestamp(h.Clock.Now().UnixMicro()).TruncateToMilliseconds(), r["visits"][0].Timestamp)

	// D later every visit has expired: the program sees none through bttl,
	// the raw client still returns them (GC is off), and the lock is free.
	h.Clock.Advance(d)
	pages, err = pagesOf(ctx, api, "user-1")
	require.NoError(t, err)
	assert.Empty(t, pages)
	active, err = activeUsers(ctx, api)
	require.NoError(t, err)
	assert.Empty(t, active)
	rawPages, err := pagesOf(ctx, raw, "user-1")
	require.NoError(t, err)
	assert.Equal(t, []string{"visits:cart", "visits:home"}, rawPages, "the raw client still returns the expired cells")
	rawActive, err := activeUsers(ctx, raw)
	require.NoError(t, err)
	assert.Equal(t, users, rawActive)

	got, err = claim(ctx, api, "lock-row", "b")
	require.NoError(t, err)
	assert.True(t, got, "an expired lock does not hold")

	// The unmanaged counter is untouched by expiry.
	r, err = api.ReadRow(ctx, "user-1", bigtable.RowFilter(bigtable.FamilyFilter("^stats$")))
	require.NoError(t, err)
	require.Len(t, r["stats"], 1)
	assert.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 1}, r["stats"][0].Value)
}
