package ttlclient_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/filters"
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

// ReadRowAndExpire with a TTL below 1ms is refused before any RPC
// (strategy.ErrInvalidTTL in a *CellError), whatever the row holds, as
// Expire refuses it. Before, a row without an age family's cell (empty,
// or only sequence and unmanaged cells) answered ExpireNoCell, nil: the TTL
// was checked only against the families the read returned.
func TestReadRowAndExpireRefusesATTLBelow1msBeforeAnyRPC(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "negttl", condSchema())
		m := ttlclient.NewMutation()
		m.SetVersion(famSeq, "c", 1, []byte("s"))
		require.NoError(t, tbl.Apply(ctx, "seq-only", m))
		reads := hc.count("ReadRows")
		for _, row := range []string{"empty", "seq-only"} {
			for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
				r, res, err := tbl.ReadRowAndExpire(ctx, row, nil, ttl)
				require.ErrorIs(t, err, strategy.ErrInvalidTTL, "%s %s", row, ttl)
				var ce *ttlclient.CellError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, codes.InvalidArgument, status.Code(err))
				assert.Nil(t, r, "refused before the read")
				assert.Equal(t, ttlclient.ExpireNoCell, res)
			}
		}
		assert.Equal(t, reads, hc.count("ReadRows"), "no RPC")
	})
}

// An instant at or before the epoch, the zero time.Time above all (an
// instant a program forgot to set), is refused with ErrBeforeEpoch before
// any RPC by ExpireAt, ExpireColumnAt, ExpireRowAt and
// ReadRowAndExpireAt, with nothing deleted. Before, it was taken for a
// past instant: ExpireRowAt(time.Time{}) deleted every age-family cell of
// the row, ReadRowAndExpireAt every cell it returned.
func TestInstantNotAfterTheEpochIsRefused(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "epoch", condSchema())
		for _, fam := range []string{famOne, famDef, "wt"} {
			lcSet(t, tbl, "r", fam, "c", "v", time.Hour)
		}
		before, err := h.Raw.Open("epoch").ReadRow(ctx, "r")
		require.NoError(t, err)
		require.Len(t, before, 3)
		reads, writes := hc.count("ReadRows"), hc.count("CheckAndMutateRow")
		for _, at := range []time.Time{{}, time.Unix(0, 0), time.Unix(-3600, 0)} {
			check := func(what string, err error) {
				t.Helper()
				require.ErrorIs(t, err, strategy.ErrBeforeEpoch, "%s %s", what, at)
				var ce *ttlclient.CellError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, codes.InvalidArgument, status.Code(err))
			}
			res, err := tbl.ExpireAt(ctx, "r", famOne, "c", at)
			check("ExpireAt", err)
			assert.Equal(t, ttlclient.ExpireNoCell, res)
			var rs []ttlclient.ExpireCellResult
			n, err := tbl.ExpireColumnAt(ctx, "r", famOne, "c", at, ttlclient.ExpireResultsTo(&rs))
			check("ExpireColumnAt", err)
			assert.Zero(t, n)
			assert.Nil(t, rs)
			n, err = tbl.ExpireRowAt(ctx, "r", at, ttlclient.ExpireResultsTo(&rs))
			check("ExpireRowAt", err)
			assert.Zero(t, n)
			assert.Nil(t, rs)
			r, res, err := tbl.ReadRowAndExpireAt(ctx, "r", nil, at)
			check("ReadRowAndExpireAt", err)
			assert.Nil(t, r)
			assert.Equal(t, ttlclient.ExpireNoCell, res)
		}
		assert.Equal(t, reads, hc.count("ReadRows"), "no read")
		assert.Equal(t, writes, hc.count("CheckAndMutateRow"), "no write")
		after, err := h.Raw.Open("epoch").ReadRow(ctx, "r")
		require.NoError(t, err)
		assert.Equal(t, before, after, "nothing deleted")

		// A past instant after the epoch still deletes, as documented.
		res, err := tbl.ExpireAt(ctx, "r", famOne, "c", h.Clock.Now().Add(-time.Second))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireDeleted, res)
	})
}

// ReadRowAndExpire with a value-stripping filter refuses cells whose
// stored values do not fit in one predicate (filters.ErrCellTooLargeToPin)
// before any write: the size is checked again with the values read back,
// before a max-versions family's hidden versions are purged for a
// shortening move. (Checked only with the empty values returned, the
// purge ran and the refusal came after it.)
func TestReadRowAndExpireWithStrippedValuesRefusesBeforeAnyWrite(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "stripbig", condSchema())
		big := string(bytes.Repeat([]byte("x"), 8<<10))
		for _, col := range []string{"a", "b", "c"} {
			lcSet(t, tbl, "r", "mv", col, "hidden-"+big, 2*time.Hour)
			lcSet(t, tbl, "r", "mv", col, "newest-"+big, 3*time.Hour)
		}
		before, err := h.Raw.Open("stripbig").ReadRow(ctx, "r")
		require.NoError(t, err)
		require.Len(t, before["mv"], 6)

		_, _, err = tbl.ReadRowAndExpire(ctx, "r", bigtable.StripValueFilter(), time.Hour)
		require.ErrorIs(t, err, filters.ErrCellTooLargeToPin)
		var ce *ttlclient.CellError
		require.ErrorAs(t, err, &ce)
		after, err := h.Raw.Open("stripbig").ReadRow(ctx, "r")
		require.NoError(t, err)
		assert.Equal(t, before, after, "nothing written: the hidden versions not purged")
	})
}
