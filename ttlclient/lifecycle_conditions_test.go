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

// condSchema is an uncapped one-second and default-expiry family (where a
// cell can be persisted), one with write times, and capped ones.
func condSchema() strategy.Schema {
	return strategy.Schema{
		famOne:   strategy.OneSecond(),
		famDef:   strategy.DefaultExpiry(defaultD),
		"wt":     strategy.OneSecond(strategy.WithWriteTime()),
		"refuse": strategy.OneSecond(strategy.WithMaxTTL(2*time.Hour, strategy.RefuseLonger)),
		"clamp":  strategy.DefaultExpiry(defaultD, strategy.WithMaxTTL(3*time.Hour, strategy.ClampLonger)),
		"mv":     strategy.OneSecond(strategy.WithMaxVersions(1)),
		famSeq:   strategy.Sequence(3),
	}
}

// lcTable is the newest live cell of fam:col through tbl, and whether
// there is one.
func lcCell(t *testing.T, tbl *ttlclient.Table, row, fam, col string) (bigtable.ReadItem, bool) {
	t.Helper()
	r, err := tbl.ReadRow(context.Background(), row, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(fam, col, col+"\x00"), bigtable.LatestNFilter(1))))
	require.NoError(t, err)
	if len(r[fam]) == 0 {
		return bigtable.ReadItem{}, false
	}
	return r[fam][0], true
}

func lcLeft(t *testing.T, tbl *ttlclient.Table, row, fam, col string) time.Duration {
	t.Helper()
	it, ok := lcCell(t, tbl, row, fam, col)
	require.True(t, ok, "no live cell %s:%s", fam, col)
	d, err := tbl.RemainingTTL(it)
	if errors.Is(err, strategy.ErrTimestampOverflow) {
		return d // a cell without a TTL
	}
	require.NoError(t, err)
	return d
}

func lcSet(t *testing.T, tbl *ttlclient.Table, row, fam, col, value string, ttl time.Duration) {
	t.Helper()
	m := ttlclient.NewMutation()
	m.SetTTL(fam, col, ttl, []byte(value))
	require.NoError(t, tbl.Apply(context.Background(), row, m))
}

// The conditions decide as Redis's flags do, a persisted cell counting as
// expiring last, on both servers and both age strategies.
func TestExpireConditions(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "cond", condSchema())
		for _, fam := range []string{famOne, famDef} {
			lcSet(t, tbl, "r", fam, "c", "v", 10*time.Minute)
			expire := func(ttl time.Duration, opts ...ttlclient.ExpireOption) ttlclient.ExpireResult {
				var r ttlclient.ExpireResult
				applied, err := tbl.Expire(ctx, "r", fam, "c", ttl, append(opts, ttlclient.ExpireResultTo(&r))...)
				require.NoError(t, err)
				assert.Equal(t, r == ttlclient.ExpireSet, applied, "applied agrees with the result")
				return r
			}
			assert.Equal(t, ttlclient.ExpireNotMet, expire(5*time.Minute, ttlclient.OnlyIfLater), "%s GT shorter", fam)
			assert.Equal(t, 10*time.Minute, lcLeft(t, tbl, "r", fam, "c"))
			assert.Equal(t, ttlclient.ExpireNotMet, expire(10*time.Minute, ttlclient.OnlyIfLater), "%s GT equal", fam)
			assert.Equal(t, ttlclient.ExpireSet, expire(20*time.Minute, ttlclient.OnlyIfLater))
			assert.Equal(t, 20*time.Minute, lcLeft(t, tbl, "r", fam, "c"))
			assert.Equal(t, ttlclient.ExpireNotMet, expire(30*time.Minute, ttlclient.OnlyIfEarlier))
			assert.Equal(t, ttlclient.ExpireSet, expire(time.Minute, ttlclient.OnlyIfEarlier))
			assert.Equal(t, time.Minute, lcLeft(t, tbl, "r", fam, "c"))
			assert.Equal(t, ttlclient.ExpireNotMet, expire(time.Hour, ttlclient.OnlyIfNoTTL), "NX: the cell has a TTL")
			assert.Equal(t, ttlclient.ExpireSet, expire(time.Hour, ttlclient.OnlyIfTTL))

			r, err := tbl.Persist(ctx, "r", fam, "c")
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireSet, r)
			it, _ := lcCell(t, tbl, "r", fam, "c")
			assert.Equal(t, strategy.MaxTimestamp, it.Timestamp, "persisted: the largest timestamp")
			r, err = tbl.Persist(ctx, "r", fam, "c")
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireNotMet, r, "no TTL to remove (HPERSIST -1)")
			assert.Equal(t, ttlclient.ExpireNotMet, expire(time.Hour, ttlclient.OnlyIfLater), "GT never sets a TTL on a cell without one")
			assert.Equal(t, ttlclient.ExpireNotMet, expire(time.Hour, ttlclient.OnlyIfTTL))
			assert.Equal(t, ttlclient.ExpireNotMet, expire(time.Hour, ttlclient.OnlyIfTTLAndEarlier))
			assert.Equal(t, ttlclient.ExpireSet, expire(2*time.Hour, ttlclient.OnlyIfEarlier), "LT always does")
			assert.Equal(t, 2*time.Hour, lcLeft(t, tbl, "r", fam, "c"))
			_, err = tbl.Persist(ctx, "r", fam, "c")
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireSet, expire(time.Hour, ttlclient.OnlyIfNoTTL), "NX on a persisted cell")
			assert.Equal(t, time.Hour, lcLeft(t, tbl, "r", fam, "c"))
			assert.Equal(t, ttlclient.ExpireNoCell, expire(time.Hour, ttlclient.OnlyIfLater, ttlclient.ExpireCellAt(1000)), "no cell there")
		}
	})
}

// The column and row forms check the condition for each cell.
func TestExpireColumnAndRowConditions(t *testing.T) {
	e := newEnvNoGC(t, condSchema())
	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "a", 10*time.Minute, []byte("a"))
	m.SetTTL(famOne, "b", 3*time.Hour, []byte("b"))
	m.SetTTL(famDef, "c", 30*time.Minute, []byte("c"))
	e.apply(t, "r", m)
	moved, err := e.tbl.ExpireRow(e.ctx, "r", time.Hour, ttlclient.OnlyIfLater)
	require.NoError(t, err)
	assert.Equal(t, 2, moved, "a and c extended, b left at 3h")
	assert.Equal(t, time.Hour, lcLeft(t, e.tbl, "r", famOne, "a"))
	assert.Equal(t, 3*time.Hour, lcLeft(t, e.tbl, "r", famOne, "b"))
	assert.Equal(t, time.Hour, lcLeft(t, e.tbl, "r", famDef, "c"))
	moved, err = e.tbl.ExpireColumn(e.ctx, "r", famOne, "b", 2*time.Hour, ttlclient.OnlyIfLater)
	require.NoError(t, err)
	assert.Zero(t, moved)
	moved, err = e.tbl.ExpireColumn(e.ctx, "r", famOne, "b", 2*time.Hour, ttlclient.OnlyIfEarlier)
	require.NoError(t, err)
	assert.Equal(t, 1, moved)
	assert.Equal(t, 2*time.Hour, lcLeft(t, e.tbl, "r", famOne, "b"))
}

// A concurrent Expire, write, delete or time-to-idle-like move between
// Expire's read and its conditional mutation never lets a condition pass
// that no longer holds, never revives a dead cell and never hides the
// newest write: the pinned cell's timestamp, and the condition's window on
// it, are in the predicate the server evaluates.
func TestConditionalExpireNeverActsOnAStaleRead(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "stale", condSchema())
		for _, fam := range []string{famOne, famDef, "wt"} {
			// GT: a concurrent Expire extends the cell further first.
			lcSet(t, tbl, "gt", fam, "c", "v", 10*time.Minute)
			hc.before("CheckAndMutateRow", func() {
				_, err := tbl.Expire(ctx, "gt", fam, "c", 2*time.Hour)
				require.NoError(t, err)
			})
			var r ttlclient.ExpireResult
			applied, err := tbl.Expire(ctx, "gt", fam, "c", time.Hour, ttlclient.OnlyIfLater, ttlclient.ExpireResultTo(&r))
			require.NoError(t, err)
			assert.False(t, applied)
			assert.Equal(t, ttlclient.ExpireChanged, r, "%s: the cell read is gone", fam)
			assert.Equal(t, 2*time.Hour, lcLeft(t, tbl, "gt", fam, "c"), "%s: GT never shortens", fam)

			// LT: a concurrent Expire shortens it further first.
			lcSet(t, tbl, "lt", fam, "c", "v", 3*time.Hour)
			hc.before("CheckAndMutateRow", func() {
				_, err := tbl.Expire(ctx, "lt", fam, "c", time.Minute)
				require.NoError(t, err)
			})
			applied, err = tbl.Expire(ctx, "lt", fam, "c", time.Hour, ttlclient.OnlyIfEarlier)
			require.NoError(t, err)
			assert.False(t, applied)
			assert.Equal(t, time.Minute, lcLeft(t, tbl, "lt", fam, "c"), "%s: LT never lengthens", fam)

			// A newer value written meanwhile, with a TTL between the
			// cell's and the target: the cell is not lifted over it.
			lcSet(t, tbl, "w", fam, "c", "old", 10*time.Minute)
			hc.before("CheckAndMutateRow", func() { lcSet(t, tbl, "w", fam, "c", "new", 30*time.Minute) })
			applied, err = tbl.Expire(ctx, "w", fam, "c", time.Hour, ttlclient.OnlyIfLater)
			require.NoError(t, err)
			assert.False(t, applied)
			it, ok := lcCell(t, tbl, "w", fam, "c")
			require.True(t, ok)
			assert.Equal(t, "new", string(it.Value), "%s: the newest write stays the newest", fam)

			// Deleted meanwhile: not revived (Persist too).
			lcSet(t, tbl, "d", fam, "c", "v", 10*time.Minute)
			hc.before("CheckAndMutateRow", func() {
				m := ttlclient.NewMutation()
				m.DeleteCellsInColumn(fam, "c")
				require.NoError(t, tbl.Apply(ctx, "d", m))
			})
			pr, err := tbl.Persist(ctx, "d", fam, "c")
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireChanged, pr)
			stored, err := h.Stored(ctx, "stale", "d")
			require.NoError(t, err)
			assert.Empty(t, stored[fam], "%s: nothing revived", fam)

			// NX: the cell is persisted by someone else meanwhile, then a
			// concurrent Expire gives it a TTL again: still the same
			// value, but not the cell read.
			lcSet(t, tbl, "nx", fam, "c", "v", 10*time.Minute)
			_, err = tbl.Persist(ctx, "nx", fam, "c")
			require.NoError(t, err)
			hc.before("CheckAndMutateRow", func() {
				_, err := tbl.Expire(ctx, "nx", fam, "c", 5*time.Minute)
				require.NoError(t, err)
			})
			applied, err = tbl.Expire(ctx, "nx", fam, "c", time.Hour, ttlclient.OnlyIfNoTTL)
			require.NoError(t, err)
			assert.False(t, applied, "%s: NX no longer holds", fam)
			assert.Equal(t, 5*time.Minute, lcLeft(t, tbl, "nx", fam, "c"))
		}
	})
}

// ExpireAt: an instant gives the exact expiry; a past one deletes the
// cell from storage (HEXPIRE's 2), leaving an older version visible; the
// cap refuses or clamps; an instant past the last timestamp overflows.
func TestExpireAt(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "at", condSchema())
		now := h.Clock.Now()
		for _, fam := range []string{famOne, famDef} {
			lcSet(t, tbl, "r", fam, "c", "v", 10*time.Minute)
			at := now.Add(90 * time.Minute)
			r, err := tbl.ExpireAt(ctx, "r", fam, "c", at)
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireSet, r)
			it, _ := lcCell(t, tbl, "r", fam, "c")
			exp, err := tbl.Expiry(it)
			require.NoError(t, err)
			assert.True(t, at.Truncate(time.Millisecond).Equal(exp), "%s: expiry %s, want %s", fam, exp, at)

			r, err = tbl.ExpireAt(ctx, "r", fam, "c", now.Add(time.Hour), ttlclient.OnlyIfLater)
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireNotMet, r)

			// Two versions: the newest is deleted, the older one shows.
			lcSet(t, tbl, "v", fam, "c", "older", 20*time.Minute)
			lcSet(t, tbl, "v", fam, "c", "newer", 40*time.Minute)
			r, err = tbl.ExpireAt(ctx, "v", fam, "c", now.Add(-time.Second))
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireDeleted, r)
			it, ok := lcCell(t, tbl, "v", fam, "c")
			require.True(t, ok)
			assert.Equal(t, "older", string(it.Value))
			stored, err := h.Stored(ctx, "at", "v")
			require.NoError(t, err)
			assert.Len(t, stored[fam], 1, "%s: deleted from storage, not hidden", fam)

			_, err = tbl.ExpireAt(ctx, "r", fam, "c", time.UnixMicro(int64(strategy.MaxTimestamp)).Add(2*defaultD))
			require.ErrorIs(t, err, strategy.ErrTimestampOverflow)
			var ce *ttlclient.CellError
			require.ErrorAs(t, err, &ce)
		}
		lcSet(t, tbl, "r", "refuse", "c", "v", time.Minute)
		_, err := tbl.ExpireAt(ctx, "r", "refuse", "c", now.Add(3*time.Hour))
		require.ErrorIs(t, err, strategy.ErrTTLTooLong)
		lcSet(t, tbl, "r", "clamp", "c", "v", time.Minute)
		r, err := tbl.ExpireAt(ctx, "r", "clamp", "c", now.Add(5*time.Hour))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireSet, r)
		assert.Equal(t, 3*time.Hour, lcLeft(t, tbl, "r", "clamp", "c"), "clamped to the cap")
		_, err = tbl.ExpireAt(ctx, "r", famSeq, "c", now.Add(time.Hour))
		require.ErrorIs(t, err, ttlclient.ErrNotApplicable)
	})
}

// Persist: "forever" is the largest timestamp, the cap on a clamping
// family; refused on a refusing cap and a sequence family.
func TestPersistWhereForeverHasAMeaning(t *testing.T) {
	e := newEnvNoGC(t, condSchema())
	for _, fam := range []string{"refuse", famSeq} {
		m := ttlclient.NewMutation()
		if fam == famSeq {
			m.SetVersion(fam, "c", 1, []byte("v"))
		} else {
			m.SetTTL(fam, "c", time.Minute, []byte("v"))
		}
		e.apply(t, "r", m)
		before := e.stored(t, "r")
		_, err := e.tbl.Persist(e.ctx, "r", fam, "c")
		require.ErrorIs(t, err, ttlclient.ErrCannotPersist, fam)
		var ce *ttlclient.CellError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, fam, ce.Family)
		assert.Equal(t, before, e.stored(t, "r"), "nothing written")
	}
	_, err := e.tbl.Persist(e.ctx, "r", famSeq, "c")
	require.ErrorIs(t, err, ttlclient.ErrNotApplicable, "a sequence family is also not applicable")

	e.setTTL(t, "r", "clamp", "c", "v", time.Minute)
	r, err := e.tbl.Persist(e.ctx, "r", "clamp", "c")
	require.NoError(t, err)
	assert.Equal(t, ttlclient.ExpireSet, r)
	assert.Equal(t, 3*time.Hour, lcLeft(t, e.tbl, "r", "clamp", "c"), "the cap is forever here")

	// A max-versions family: persisting the newest over nothing newer.
	e.setTTL(t, "mv", "mv", "c", "v", time.Minute)
	r, err = e.tbl.Persist(e.ctx, "mv", "mv", "c")
	require.NoError(t, err)
	assert.Equal(t, ttlclient.ExpireSet, r)
	r, err = e.tbl.Persist(e.ctx, "none", famOne, "c")
	require.NoError(t, err)
	assert.Equal(t, ttlclient.ExpireNoCell, r)
}

// SetKeepTTL keeps the live cell's expiry, writes nothing without one,
// and never overwrites a concurrent write.
func TestSetKeepTTL(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "keep", condSchema())
		for _, fam := range []string{famOne, famDef, "wt"} {
			lcSet(t, tbl, "r", fam, "c", "old", 10*time.Minute)
			h.Clock.Advance(time.Minute)
			r, err := tbl.SetKeepTTL(ctx, "r", fam, "c", []byte("new"))
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireSet, r)
			it, _ := lcCell(t, tbl, "r", fam, "c")
			assert.Equal(t, "new", string(it.Value))
			assert.Equal(t, 9*time.Minute, lcLeft(t, tbl, "r", fam, "c"), "%s: the TTL kept", fam)
			stored, err := h.Stored(ctx, "keep", "r")
			require.NoError(t, err)
			if fam == "wt" {
				assert.Len(t, stored[fam], 2, "the cell and its companion")
				wt, err := tbl.WriteTime(ctx, it)
				require.NoError(t, err)
				assert.True(t, h.Clock.Now().Truncate(time.Millisecond).Equal(wt), "the companion records this write")
			} else {
				assert.Len(t, stored[fam], 1, "%s: replaced, not added", fam)
			}

			r, err = tbl.SetKeepTTL(ctx, "none", fam, "c", []byte("x"))
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireNoCell, r)
			stored, err = h.Stored(ctx, "keep", "none")
			require.NoError(t, err)
			assert.Empty(t, stored, "no live cell: nothing written")

			hc.before("CheckAndMutateRow", func() { lcSet(t, tbl, "r", fam, "c", "concurrent", time.Hour) })
			r, err = tbl.SetKeepTTL(ctx, "r", fam, "c", []byte("lost?"))
			require.NoError(t, err)
			assert.Equal(t, ttlclient.ExpireChanged, r)
			it, _ = lcCell(t, tbl, "r", fam, "c")
			assert.Equal(t, "concurrent", string(it.Value), "%s: the concurrent write is kept", fam)
		}
		_, err := tbl.SetKeepTTL(ctx, "r", famSeq, "c", []byte("x"))
		require.ErrorIs(t, err, ttlclient.ErrNotApplicable)
	})
}

// MaxWriteTime is the newest write time among a row's live cells of a
// write-time family, or the columns named.
func TestMaxWriteTime(t *testing.T) {
	e := newEnvNoGC(t, condSchema())
	first := e.h.Clock.Now().Truncate(time.Millisecond)
	e.setTTL(t, "r", "wt", "a", "v", time.Hour)
	e.h.Clock.Advance(time.Minute)
	second := e.h.Clock.Now().Truncate(time.Millisecond)
	e.setTTL(t, "r", "wt", "b", "v", time.Hour)
	e.h.Clock.Advance(time.Minute)
	e.setTTL(t, "r", "wt", "gone", "v", time.Millisecond) // newest write, expired below
	e.h.Clock.Advance(time.Second)

	wt, err := e.tbl.MaxWriteTime(e.ctx, "r", "wt")
	require.NoError(t, err)
	assert.True(t, second.Equal(wt), "got %s, want %s (an expired cell does not count)", wt, second)
	wt, err = e.tbl.MaxWriteTime(e.ctx, "r", "wt", "a")
	require.NoError(t, err)
	assert.True(t, first.Equal(wt))
	_, err = e.tbl.MaxWriteTime(e.ctx, "r", "wt", "nosuch")
	require.ErrorIs(t, err, ttlclient.ErrNoWriteTime)
	_, err = e.tbl.MaxWriteTime(e.ctx, "r", famOne)
	require.ErrorIs(t, err, ttlclient.ErrNotApplicable)
	var ce *ttlclient.CellError
	require.ErrorAs(t, err, &ce)
}

// A time-to-idle refresh between a conditional Expire's read and its
// mutation: the refresh moved the cell, so the Expire does not apply
// (GT 5m would otherwise shorten the refreshed 10m), on both servers.
func TestConditionalExpireAfterAnIdleRefresh(t *testing.T) {
	hc := newHookConn()
	seamServersWith(t, hc.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "idlecond", strategy.Schema{"idle": strategy.OneSecond(strategy.WithIdleTTL(10*time.Minute, 0.1))})
		lcSet(t, tbl, "r", "idle", "c", "v", time.Minute) // due: 1m left of 10m
		hc.before("CheckAndMutateRow", func() {
			_, err := tbl.ReadRow(ctx, "r") // queues the refresh
			require.NoError(t, err)
			require.NoError(t, h.Client.FlushIdleRefreshes(ctx))
		})
		var r ttlclient.ExpireResult
		_, err := tbl.Expire(ctx, "r", "idle", "c", 5*time.Minute, ttlclient.OnlyIfLater, ttlclient.ExpireResultTo(&r))
		require.NoError(t, err)
		assert.Equal(t, ttlclient.ExpireChanged, r)
		it, ok := lcCell(t, tbl, "r", "idle", "c")
		require.True(t, ok)
		left, err := tbl.RemainingTTL(it)
		require.NoError(t, err)
		assert.Equal(t, 10*time.Minute, left, "the refresh stands")
	})
}

// Edge cases: an expired cell is no cell (not revived, whatever the
// condition or form); a TTL that would overflow is refused before any
// RPC, with a condition too.
func TestLifecycleEdgeCases(t *testing.T) {
	e := newEnvNoGC(t, condSchema())
	e.setTTL(t, "r", famOne, "c", "v", time.Second)
	e.setTTL(t, "r", "wt", "c", "v", time.Second)
	e.h.Clock.Advance(time.Second)
	before := e.stored(t, "r")
	var r ttlclient.ExpireResult
	_, err := e.tbl.Expire(e.ctx, "r", famOne, "c", time.Hour, ttlclient.OnlyIfEarlier, ttlclient.ExpireResultTo(&r))
	require.NoError(t, err)
	assert.Equal(t, ttlclient.ExpireNoCell, r)
	r, err = e.tbl.ExpireAt(e.ctx, "r", famOne, "c", e.h.Clock.Now().Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, ttlclient.ExpireNoCell, r)
	r, err = e.tbl.Persist(e.ctx, "r", famOne, "c")
	require.NoError(t, err)
	assert.Equal(t, ttlclient.ExpireNoCell, r)
	r, err = e.tbl.SetKeepTTL(e.ctx, "r", famOne, "c", []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, ttlclient.ExpireNoCell, r)
	_, r, err = e.tbl.ReadRowAndExpire(e.ctx, "r", nil, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, ttlclient.ExpireNoCell, r)
	_, err = e.tbl.MaxWriteTime(e.ctx, "r", "wt")
	require.ErrorIs(t, err, ttlclient.ErrNoWriteTime)
	assert.Equal(t, before, e.stored(t, "r"), "nothing revived or written")

	// A clock near the end of time, a persisted cell still live: a TTL
	// that overflows is refused before any RPC, with a condition too and
	// for get-and-expire.
	e.setTTL(t, "late", famOne, "c", "v", time.Hour)
	_, err = e.tbl.Persist(e.ctx, "late", famOne, "c")
	require.NoError(t, err)
	e.h.Clock.Set(time.UnixMicro(int64(strategy.MaxTimestamp)).Add(-time.Hour))
	before = e.stored(t, "late")
	_, err = e.tbl.Expire(e.ctx, "late", famOne, "c", 2*time.Hour, ttlclient.OnlyIfLater)
	require.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	_, _, err = e.tbl.ReadRowAndExpire(e.ctx, "late", nil, 2*time.Hour)
	require.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	r, err = e.tbl.ExpireAt(e.ctx, "late", famOne, "c", e.h.Clock.Now().Add(30*time.Minute), ttlclient.OnlyIfEarlier)
	require.NoError(t, err)
	assert.Equal(t, ttlclient.ExpireSet, r, "an instant before the end is fine")
	assert.NotEqual(t, before, e.stored(t, "late"))
}
