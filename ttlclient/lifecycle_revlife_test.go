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

// ReadRowAndExpire with a filter that strips values (a read-and-touch
// that does not fetch them) moves the cells it returns, keeping their
// stored values and write times: the move pins and writes back the value
// stored, not the empty one returned. Before, the pin held the empty value,
// never matched, and every call was ExpireChanged with nothing moved.
func TestReadRowAndExpireWithStrippedValues(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "strip", condSchema())
		fams := []string{famOne, famDef, "wt"}
		for _, fam := range fams {
			lcSet(t, tbl, "r", fam, "c", "value-"+fam, 10*time.Minute)
		}
		wt, ok := lcCell(t, tbl, "r", "wt", "c")
		require.True(t, ok)
		written, err := tbl.WriteTime(ctx, wt)
		require.NoError(t, err)

		r, res, err := tbl.ReadRowAndExpire(ctx, "r", bigtable.StripValueFilter(), time.Hour)
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, res)
		for _, fam := range fams {
			require.Len(t, r[fam], 1, fam)
			assert.Empty(t, r[fam][0].Value, "the row as read: values stripped")
			it, ok := lcCell(t, tbl, "r", fam, "c")
			require.True(t, ok, fam)
			assert.Equal(t, "value-"+fam, string(it.Value), "the stored value moved, not the stripped one")
			assert.Equal(t, time.Hour, lcLeft(t, tbl, "r", fam, "c"), fam)
		}
		wt, ok = lcCell(t, tbl, "r", "wt", "c")
		require.True(t, ok)
		moved, err := tbl.WriteTime(ctx, wt)
		require.NoError(t, err)
		assert.Equal(t, written, moved, "the write time moved with the cell")

		// Persist and an instant too.
		_, res, err = tbl.ReadRowAndExpireAt(ctx, "r", bigtable.StripValueFilter(), h.Clock.Now().Add(2*time.Hour))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, res)
		assert.Equal(t, 2*time.Hour, lcLeft(t, tbl, "r", famOne, "c"))
		_, res, err = tbl.ReadRowAndPersist(ctx, "r", bigtable.ChainFilters(bigtable.FamilyFilter("^one$"), bigtable.StripValueFilter()))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, res)
		it, ok := lcCell(t, tbl, "r", famOne, "c")
		require.True(t, ok)
		assert.Equal(t, "value-one", string(it.Value))
		assert.Equal(t, strategy.MaxTimestamp, it.Timestamp, "persisted")
	})
}
