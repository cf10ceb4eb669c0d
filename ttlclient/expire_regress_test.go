package ttlclient_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
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
