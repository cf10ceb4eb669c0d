package ttlclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

func (e *env) setTTL(t *testing.T, row, fam, col, value string, ttl time.Duration) {
	t.Helper()
	m := ttlclient.NewMutation()
	m.SetTTL(fam, col, ttl, []byte(value))
	e.apply(t, row, m)
}

func (e *env) remaining(t *testing.T, row, fam, col string) time.Duration {
	t.Helper()
	d, err := e.tbl.RemainingTTL(e.readCell(t, row, fam, col))
	require.NoError(t, err)
	return d
}

func TestExpireExtendsAndShortensTheNewestCell(t *testing.T) {
	for _, fam := range []string{famOne, famDef} {
		t.Run(fam, func(t *testing.T) {
			e := newEnv(t, mixedSchema())
			e.setTTL(t, "r", fam, "c", "v", 10*time.Minute)
			for _, ttl := range []time.Duration{3 * time.Hour, time.Minute, 5 * time.Millisecond} {
				applied, err := e.tbl.Expire(e.ctx, "r", fam, "c", ttl)
				require.NoError(t, err)
				assert.True(t, applied)
				assert.Equal(t, ttl, e.remaining(t, "r", fam, "c"))
				assert.Len(t, e.stored(t, "r"), 1, "the old cell is gone")
			}
			e.h.Clock.Advance(5 * time.Millisecond)
			assert.Empty(t, e.read(t, "r"), "expired on the new TTL")
		})
	}
}

func TestExpireOfAMissingOrExpiredCellDoesNotApply(t *testing.T) {
	e := newEnv(t, mixedSchema())
	applied, err := e.tbl.Expire(e.ctx, "r", famDef, "c", time.Hour)
	require.NoError(t, err)
	assert.False(t, applied, "no cell")

	e.setTTL(t, "r", famOne, "c", "v", time.Second)
	before := e.stored(t, "r")
	e.h.Clock.Advance(time.Second)
	applied, err = e.tbl.Expire(e.ctx, "r", famOne, "c", time.Hour)
	require.NoError(t, err)
	assert.False(t, applied, "expired: not revived")
	assert.Equal(t, before, e.stored(t, "r"))
	assert.Empty(t, e.read(t, "r"))
}

func TestExpireCellAtMovesTheNamedVersion(t *testing.T) {
	e := newEnv(t, mixedSchema())
	e.setTTL(t, "r", famDef, "c", "old", 10*time.Minute)
	oldTS := e.storedTimestamp(t, "r", famDef, "c")
	e.setTTL(t, "r", famDef, "c", "new", 20*time.Minute)
	applied, err := e.tbl.Expire(e.ctx, "r", famDef, "c", 30*time.Minute, ttlclient.ExpireCellAt(oldTS))
	require.NoError(t, err)
	require.True(t, applied)
	now := e.now()
	assert.Equal(t, []string{
		"def:c@" + itoa(int64(now)+(20*time.Minute-defaultD).Microseconds()) + "=new",
		"def:c@" + itoa(int64(now)+(30*time.Minute-defaultD).Microseconds()) + "=old",
	}, e.stored(t, "r"))
}

func TestExpireColumnKeepsTheVersionsOrderAndSpacing(t *testing.T) {
	e := newEnv(t, mixedSchema())
	for i, ttl := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute} {
		e.setTTL(t, "r", famOne, "c", "v"+itoa(int64(i)), ttl)
	}
	now := e.now()
	min := time.Minute.Microseconds()
	moved, err := e.tbl.ExpireColumn(e.ctx, "r", famOne, "c", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 3, moved)
	h := time.Hour.Microseconds()
	assert.Equal(t, []string{
		"one:c@" + itoa(int64(now)+h-2*min) + "=v0",
		"one:c@" + itoa(int64(now)+h-min) + "=v1",
		"one:c@" + itoa(int64(now)+h) + "=v2",
	}, e.stored(t, "r"))

	// Shortening to 90s moves the newest to now+90s: the older ones land
	// at now+30s and now-30s, which is expired, so that one is deleted.
	moved, err = e.tbl.ExpireColumn(e.ctx, "r", famOne, "c", 90*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 3, moved)
	assert.Equal(t, []string{
		"one:c@" + itoa(int64(now)+30_000_000) + "=v1",
		"one:c@" + itoa(int64(now)+90_000_000) + "=v2",
	}, e.stored(t, "r"))
}

func TestExpireRowMovesEveryAgeFamilyAndLeavesTheOthers(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "a", time.Minute, []byte("1"))
	m.SetTTL(famOne, "b", time.Minute, []byte("2"))
	m.SetTTL(famDef, "c", time.Minute, []byte("3"))
	m.SetVersion(famSeq, "s", 9, []byte("4"))
	m.Set(famPlain, "p", 7000, []byte("5"))
	e.apply(t, "r", m)
	moved, err := e.tbl.ExpireRow(e.ctx, "r", 2*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 3, moved)
	for _, fc := range [][2]string{{famOne, "a"}, {famOne, "b"}, {famDef, "c"}} {
		assert.Equal(t, 2*time.Hour, e.remaining(t, "r", fc[0], fc[1]), fc)
	}
	assert.Equal(t, bigtable.Timestamp(9000), e.storedTimestamp(t, "r", famSeq, "s"))
	assert.Equal(t, bigtable.Timestamp(7000), e.storedTimestamp(t, "r", famPlain, "p"))

	seqOnly := newEnv(t, strategy.Schema{famSeq: strategy.Sequence(1)})
	_, err = seqOnly.tbl.ExpireRow(seqOnly.ctx, "r", time.Hour)
	require.ErrorIs(t, err, ttlclient.ErrNotApplicable)
}

// The guardrails of a write, before any RPC: a cancelled context would make
// any RPC fail with context.Canceled, so a typed error proves none was made.
func TestExpireRefusesBeforeAnyRPC(t *testing.T) {
	schema := mixedSchema()
	schema["capped"] = strategy.DefaultExpiry(time.Hour, strategy.WithMaxTTL(24*time.Hour, strategy.RefuseLonger))
	e := newEnv(t, schema)
	e.setTTL(t, "r", "capped", "c", "v", time.Hour)
	before := e.stored(t, "r")
	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	cases := []struct {
		name, family string
		ttl          time.Duration
		want         error
	}{
		{"below 1ms", famDef, time.Millisecond - 1, strategy.ErrInvalidTTL},
		{"zero", famOne, 0, strategy.ErrInvalidTTL},
		{"over the cap", "capped", 24*time.Hour + time.Millisecond, strategy.ErrTTLTooLong},
		{"sequence", famSeq, time.Hour, ttlclient.ErrNotApplicable},
		{"unmanaged", famPlain, time.Hour, ttlclient.ErrNotApplicable},
		{"unknown family", "nope", time.Hour, ttlclient.ErrUnknownFamily},
	}
	for _, c := range cases {
		_, err := e.tbl.Expire(cancelled, "r", c.family, "c", c.ttl)
		require.ErrorIs(t, err, c.want, c.name)
		var ce *ttlclient.CellError
		require.True(t, errors.As(err, &ce), c.name)
		assert.Equal(t, c.family, ce.Family, c.name)
		_, err = e.tbl.ExpireColumn(cancelled, "r", c.family, "c", c.ttl)
		require.ErrorIs(t, err, c.want, c.name)
	}
	_, err := e.tbl.ExpireRow(cancelled, "r", 25*time.Hour)
	require.ErrorIs(t, err, strategy.ErrTTLTooLong)
	_, err = e.tbl.Expire(cancelled, "", famDef, "c", time.Hour)
	require.ErrorIs(t, err, ttlclient.ErrEmptyRowKey)
	assert.Equal(t, before, e.stored(t, "r"), "nothing written")
}

// Acceptance 5 for Expire: a TTL whose timestamp overflows int64
// microseconds is refused, nothing written.
func TestExpireRefusesAnOverflowingTimestamp(t *testing.T) {
	e := newEnv(t, mixedSchema())
	e.setTTL(t, "r", famOne, "c", "v", time.Hour)
	before := e.stored(t, "r")
	e.h.Clock.Set(time.UnixMicro(int64(strategy.MaxTimestamp) - time.Hour.Microseconds()))
	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err := e.tbl.Expire(cancelled, "r", famOne, "c", 2*time.Hour)
	require.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	assert.Equal(t, before, e.stored(t, "r"))
}
