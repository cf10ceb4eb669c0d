package ttlclient_test

import (
	"bytes"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// A max-versions age family hides a column's cells beyond the newest N.
// Shortening the newest cell below them must not bring a hidden one back.
func TestExpireOnAMaxVersionsFamilyDoesNotReviveAHiddenVersion(t *testing.T) {
	e := newEnv(t, strategy.Schema{"mv": strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2))})
	e.setTTL(t, "r", "mv", "c", "v1", 10*time.Minute)
	e.setTTL(t, "r", "mv", "c", "v2", 20*time.Minute)
	e.setTTL(t, "r", "mv", "c", "v3", 30*time.Minute)
	before := e.read(t, "r")
	require.Len(t, before, 2)
	applied, err := e.tbl.Expire(e.ctx, "r", "mv", "c", time.Minute)
	require.NoError(t, err)
	require.True(t, applied)
	for _, c := range e.read(t, "r") {
		assert.NotContains(t, c, "=v1", "v1 was beyond the 2 versions kept: dead, not to be read again")
	}
}

// ExpireColumn shortening both live versions of a 2-version column moves
// them under the hidden third: the two live ones stay the ones read.
func TestExpireColumnOnAMaxVersionsFamilyKeepsTheLiveVersions(t *testing.T) {
	e := newEnv(t, strategy.Schema{"mv": strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2))})
	e.setTTL(t, "r", "mv", "c", "v1", 10*time.Minute)
	e.setTTL(t, "r", "mv", "c", "v2", 20*time.Minute)
	e.setTTL(t, "r", "mv", "c", "v3", 30*time.Minute)
	moved, err := e.tbl.ExpireColumn(e.ctx, "r", "mv", "c", 15*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 2, moved)
	got := e.read(t, "r")
	require.Len(t, got, 2)
	assert.Contains(t, got[0]+got[1], "=v2")
	assert.Contains(t, got[0]+got[1], "=v3")
}

// ExpireColumn shortening an older version into the past deletes it, even
// when an expired cell GC has not collected yet sits at its target.
func TestExpireColumnDeletesAVersionShiftedOntoAnExpiredCell(t *testing.T) {
	e := newEnv(t, mixedSchema())
	e.setTTL(t, "r", famOne, "c", "a", 10*time.Minute) // ts T0+10m
	e.h.Clock.Advance(10 * time.Minute)                // a expired, still stored
	e.setTTL(t, "r", famOne, "c", "b", 30*time.Minute)
	e.setTTL(t, "r", famOne, "c", "c", 40*time.Minute)
	// delta -30m: c -> now+10m, b -> now, exactly a's timestamp (expired).
	moved, err := e.tbl.ExpireColumn(e.ctx, "r", famOne, "c", 10*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 2, moved)
	assert.Equal(t, []string{"one:c@" + itoa(int64(e.now())+(10*time.Minute).Microseconds()) + "=c"}, e.read(t, "r"))
}

// A value too large to pin is refused before any write: ExpireRow and
// ExpireColumn know every cell they will move once they have read them, so
// a large one found late must not leave the earlier ones moved.
func TestExpireRowWithACellTooLargeToPinMovesNothing(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "a", time.Minute, []byte("small"))
	m.SetTTL(famOne, "b", time.Minute, bytes.Repeat([]byte("x"), 20<<10))
	e.apply(t, "r", m)
	before := e.stored(t, "r")
	moved, err := e.tbl.ExpireRow(e.ctx, "r", time.Hour)
	require.ErrorIs(t, err, filters.ErrCellTooLargeToPin)
	assert.Zero(t, moved)
	assert.Equal(t, short(before), short(e.stored(t, "r")), "nothing written in part")

	e.setTTL(t, "s", famDef, "c", string(bytes.Repeat([]byte("y"), 20<<10)), time.Minute)
	e.setTTL(t, "s", famDef, "c", "newest", 2*time.Minute)
	before = e.stored(t, "s")
	moved, err = e.tbl.ExpireColumn(e.ctx, "s", famDef, "c", time.Hour)
	require.ErrorIs(t, err, filters.ErrCellTooLargeToPin)
	assert.Zero(t, moved)
	assert.Equal(t, short(before), short(e.stored(t, "s")), "nothing written in part")
}

// short cuts each cell to 60 bytes, so a failure prints no 20 KB
// value.
func short(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		if len(c) > 60 {
			c = c[:60] + "..."
		}
		out[i] = c
	}
	return out
}

// ExpireCellAt names one millisecond. A negative timestamp names none that
// a cell can have: its millisecond's end, 0, would read as an open end and
// select the newest cell instead.
func TestExpireCellAtANegativeTimestampIsRefused(t *testing.T) {
	e := newEnv(t, mixedSchema())
	e.setTTL(t, "r", famDef, "c", "v", 10*time.Minute)
	before := e.stored(t, "r")
	for _, ts := range []bigtable.Timestamp{-1, -999, -1000, bigtable.ServerTime} {
		applied, err := e.tbl.Expire(e.ctx, "r", famDef, "c", time.Hour, ttlclient.ExpireCellAt(ts))
		require.ErrorIs(t, err, strategy.ErrBeforeEpoch, "ts %d", ts)
		assert.False(t, applied)
	}
	assert.Equal(t, before, e.stored(t, "r"), "the newest cell did not move")
}

// The hidden versions are deleted only while the column still holds its N
// newest at or above the bound its read found: a live cell another Expire
// moved under that bound meanwhile is not taken for a hidden one.
func TestPurgeOfHiddenVersionsKeepsACellMovedUnderTheBound(t *testing.T) {
	e := newEnv(t, strategy.Schema{"mv": strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2))})
	e.setTTL(t, "r", "mv", "c", "b", 20*time.Minute)
	bTS := e.storedTimestamp(t, "r", "mv", "c")
	e.setTTL(t, "r", "mv", "c", "a", 30*time.Minute)
	aTS := bTS + bigtable.Timestamp((10 * time.Minute).Microseconds())
	// A read saw a third, hidden, version under b: the bound is b. Before
	// the purge runs, a is moved under b (both stay live and visible).
	applied, err := e.tbl.MoveCell(e.ctx, "r", "mv", "c", aTS, []byte("a"), bTS-bigtable.Timestamp((5*time.Minute).Microseconds()))
	require.NoError(t, err)
	require.True(t, applied)
	require.Len(t, e.read(t, "r"), 2)
	require.NoError(t, e.tbl.PurgeBelow(e.ctx, "r", "mv", "c", bTS))
	assert.Len(t, e.read(t, "r"), 2, "a, live, is not deleted as a hidden version")

	// With two cells at or above the bound, what lies under it is hidden
	// and deleted.
	e.setTTL(t, "r", "mv", "c", "n", 40*time.Minute)
	require.NoError(t, e.tbl.PurgeBelow(e.ctx, "r", "mv", "c", bTS))
	assert.Len(t, e.stored(t, "r"), 2)
}
