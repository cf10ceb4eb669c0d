package ttlclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// readCell is the only live cell of fam:col read through the table.
func (e *env) readCell(t *testing.T, row, fam, col string) bigtable.ReadItem {
	t.Helper()
	r, err := e.tbl.ReadRow(e.ctx, row, bigtable.RowFilter(bigtable.ColumnRangeFilter(fam, col, col+"\x00")))
	require.NoError(t, err)
	require.Len(t, r[fam], 1, "live cells of %s:%s", fam, col)
	return r[fam][0]
}

// Acceptance 1: the expiry read back is the TTL written, for every age
// strategy, TTLs longer than D included, and expiries past the year 2262.
func TestExpiryReadBackEqualsTheWrittenTTL(t *testing.T) {
	e := newEnv(t, mixedSchema())
	now := e.h.Clock.Now()
	require.Zero(t, now.Nanosecond()%int(time.Millisecond), "the harness clock is on a whole millisecond")
	ttls := []time.Duration{
		time.Millisecond, time.Second, 90 * time.Second, defaultD - time.Millisecond, defaultD,
		defaultD + time.Millisecond, 5 * time.Hour, 24 * time.Hour * 365 * 20,
		time.Duration(290 * 365 * 24 * float64(time.Hour)).Truncate(time.Millisecond), // expires after 2262
	}
	for _, fam := range []string{famOne, famDef} {
		for _, ttl := range ttls {
			m := ttlclient.NewMutation()
			m.SetTTL(fam, "c", ttl, []byte("v"))
			row := fam + "/" + ttl.String()
			e.apply(t, row, m)
			it := e.readCell(t, row, fam, "c")
			exp, err := e.tbl.Expiry(it)
			require.NoError(t, err)
			assert.True(t, now.Add(ttl).Equal(exp), "%s ttl %s: expiry %s, want %s", fam, ttl, exp, now.Add(ttl))
			left, err := e.tbl.RemainingTTL(it)
			require.NoError(t, err)
			assert.Equal(t, ttl, left, "%s remaining TTL", fam)
		}
	}
	far := e.readCell(t, famOne+"/"+ttls[len(ttls)-1].String(), famOne, "c")
	exp, err := e.tbl.Expiry(far)
	require.NoError(t, err)
	assert.Greater(t, exp.Year(), 2262, "an expiry past 2262 is exact, not wrapped")
}

func TestExpiryOfASequenceOrUnmanagedCellIsNotApplicable(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := ttlclient.NewMutation()
	m.SetVersion(famSeq, "c", 7, []byte("v"))
	m.Set(famPlain, "c", 5000, []byte("v"))
	e.apply(t, "r", m)
	for _, fam := range []string{famSeq, famPlain} {
		it := e.readCell(t, "r", fam, "c")
		_, err := e.tbl.Expiry(it)
		require.ErrorIs(t, err, ttlclient.ErrNotApplicable)
		var ce *ttlclient.CellError
		require.True(t, errors.As(err, &ce))
		assert.Equal(t, fam, ce.Family)
		assert.Equal(t, "c", ce.Column)
		assert.Equal(t, it.Timestamp, ce.Timestamp)
		_, err = e.tbl.RemainingTTL(it)
		require.ErrorIs(t, err, ttlclient.ErrNotApplicable)
	}
	_, err := e.tbl.Expiry(bigtable.ReadItem{Row: "r", Column: "nofamily:c", Timestamp: 1000})
	require.ErrorIs(t, err, ttlclient.ErrUnknownFamily)
	_, err = e.tbl.Expiry(bigtable.ReadItem{Row: "r", Column: "nocolon", Timestamp: 1000})
	require.ErrorIs(t, err, ttlclient.ErrUnknownFamily)
}

func TestExpiryAllocatesNothing(t *testing.T) {
	e := newEnv(t, mixedSchema())
	items := []bigtable.ReadItem{
		{Row: "r", Column: famOne + ":c", Timestamp: e.now() + 5_000_000},
		{Row: "r", Column: famDef + ":c", Timestamp: e.now()},
	}
	var sink time.Duration
	allocs := testing.AllocsPerRun(1000, func() {
		for _, it := range items {
			d, err := e.tbl.RemainingTTL(it)
			if err != nil {
				panic(err)
			}
			sink += d
		}
	})
	assert.Zero(t, allocs)
	assert.NotZero(t, sink)
}

func TestExpiryOfAFarFutureTimestampIsExact(t *testing.T) {
	e := newEnv(t, mixedSchema())
	// Year 294,246, far past where UnixNano (and bigtable.Time) wraps.
	ts := strategy.MaxTimestamp - 3_600_000_000
	exp, err := e.tbl.Expiry(bigtable.ReadItem{Row: "r", Column: famOne + ":c", Timestamp: ts})
	require.NoError(t, err)
	assert.Equal(t, int64(ts), exp.UnixMicro())
	assert.Greater(t, exp.Year(), 294_000)
	exp, err = e.tbl.Expiry(bigtable.ReadItem{Row: "r", Column: famDef + ":c", Timestamp: ts})
	require.NoError(t, err)
	assert.Equal(t, int64(ts)+defaultD.Microseconds(), exp.UnixMicro())
}

// Acceptance 5: a TTL over the cap, or whose timestamp overflows, is
// refused before any RPC (a cancelled context would fail any RPC) with a
// typed error, and nothing is written; one landing past 2262 is written
// exactly.
func TestCapAndLimitsOnWrites(t *testing.T) {
	schema := mixedSchema()
	schema["capped"] = strategy.OneSecond(strategy.WithMaxTTL(24*time.Hour, strategy.RefuseLonger))
	schema["clamped"] = strategy.DefaultExpiry(time.Hour, strategy.WithMaxTTL(24*time.Hour, strategy.ClampLonger))
	e := newEnv(t, schema)
	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()

	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "ok", time.Hour, []byte("v"))
	m.SetTTL("capped", "c", 25*time.Hour, []byte("v"))
	err := e.tbl.Apply(cancelled, "r", m)
	require.ErrorIs(t, err, strategy.ErrTTLTooLong)
	var ce *ttlclient.CellError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "capped", ce.Family)
	assert.Equal(t, 25*time.Hour, ce.TTL)
	assert.Empty(t, e.stored(t, "r"), "nothing written, not even the cell within its TTL")

	m = ttlclient.NewMutation()
	m.SetTTL("clamped", "c", 300*24*time.Hour, []byte("v"))
	e.apply(t, "r", m)
	assert.Equal(t, 24*time.Hour, e.remaining(t, "r", "clamped", "c"), "clamped to the cap")

	// Far future: an expiry in the year 2316 is written exactly.
	far := time.Duration(290 * 365 * 24 * float64(time.Hour)).Truncate(time.Millisecond)
	e.setTTL(t, "far", famOne, "c", "v", far)
	want := e.h.Clock.Now().Add(far)
	require.Greater(t, want.Year(), 2262)
	assert.Equal(t, bigtable.Timestamp(want.UnixMicro()), e.storedTimestamp(t, "far", famOne, "c"))

	// A clock in the year 294,247: the timestamp would overflow int64.
	e.h.Clock.Set(time.UnixMicro(int64(strategy.MaxTimestamp) - time.Hour.Microseconds()))
	for _, fam := range []string{famOne, famDef} {
		m = ttlclient.NewMutation()
		m.SetTTL(fam, "c", 3*time.Hour, []byte("v"))
		err = e.tbl.Apply(cancelled, "over", m)
		require.ErrorIs(t, err, strategy.ErrTimestampOverflow, fam)
	}
	assert.Empty(t, e.stored(t, "over"))
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
