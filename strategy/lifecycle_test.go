package strategy_test

import (
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
)

func TestMaxTTLRefusesOrClamps(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	day := 24 * time.Hour
	for _, c := range []struct{ p, clamped strategy.Policy }{
		{strategy.OneSecond(strategy.WithMaxTTL(day, strategy.RefuseLonger)), strategy.OneSecond(strategy.WithMaxTTL(day, strategy.ClampLonger))},
		{strategy.DefaultExpiry(time.Hour, strategy.WithMaxTTL(day, strategy.RefuseLonger)), strategy.DefaultExpiry(time.Hour, strategy.WithMaxTTL(day, strategy.ClampLonger))},
	} {
		p, clamped := c.p, c.clamped
		within, err := p.WriteTimestamp(now, day)
		require.NoError(t, err, p)
		_, err = p.WriteTimestamp(now, day+time.Millisecond)
		require.ErrorIs(t, err, strategy.ErrTTLTooLong, p)
		assert.Contains(t, err.Error(), "max TTL 24h0m0s")

		ts, err := clamped.WriteTimestamp(now, 30*day)
		require.NoError(t, err, p)
		assert.Equal(t, within, ts, "%s: clamped to the cap", p)

		// An explicit timestamp implying a longer TTL is refused, or clamped.
		nowUS := bigtable.Timestamp(now.UnixMicro())
		over := within + 1000
		_, err = p.CheckExplicit(nowUS, over)
		require.ErrorIs(t, err, strategy.ErrTTLTooLong, p)
		ts, err = clamped.CheckExplicit(nowUS, over)
		require.NoError(t, err)
		assert.Equal(t, within, ts)
		ts, err = p.CheckExplicit(nowUS, within)
		require.NoError(t, err)
		assert.Equal(t, within, ts)
	}
}

func TestMaxTTLValidate(t *testing.T) {
	for _, p := range []strategy.Policy{
		strategy.OneSecond(strategy.WithMaxTTL(-time.Second, strategy.RefuseLonger)),
		strategy.OneSecond(strategy.WithMaxTTL(time.Microsecond, strategy.RefuseLonger)),
		strategy.OneSecond(strategy.WithMaxTTL(0, strategy.ClampLonger)),
		strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.OverMaxTTL(2))),
		strategy.OneSecond(strategy.WithDefaultTTL(2*time.Hour), strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger)),
		strategy.DefaultExpiry(2*time.Hour, strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger)),
		strategy.DefaultExpiry(2*time.Hour, strategy.WithMaxTTL(time.Hour, strategy.ClampLonger)),
	} {
		require.ErrorIs(t, p.Validate(), strategy.ErrInvalidPolicy, p)
	}
	for _, p := range []strategy.Policy{
		strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger)),
		// A default TTL over the cap is clamped like any other.
		strategy.OneSecond(strategy.WithDefaultTTL(2*time.Hour), strategy.WithMaxTTL(time.Hour, strategy.ClampLonger)),
		strategy.DefaultExpiry(time.Hour, strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger), strategy.WithWriteTime()),
	} {
		require.NoError(t, p.Validate(), p)
	}
	assert.Equal(t, "one-second+maxttl(1h0m0s)+clamp+writetime",
		strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.ClampLonger), strategy.WithWriteTime()).String())
}

// Past the year 2262 time.Time.UnixNano, and so bigtable.Time, wraps; the
// write timestamps never go through it.
func TestWriteTimestampPast2262IsExact(t *testing.T) {
	for _, now := range []time.Time{
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2262, 4, 11, 23, 0, 0, 0, time.UTC), // an hour before UnixNano wraps
		time.Date(2500, 6, 1, 12, 0, 0, 0, time.UTC),
		time.Date(200_000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		for _, ttl := range []time.Duration{2 * time.Hour, 290 * 365 * 24 * time.Hour} {
			want := now.Add(ttl)
			ts, err := strategy.OneSecond().WriteTimestamp(now, ttl)
			require.NoError(t, err)
			assert.Equal(t, want.UnixMicro(), int64(ts), "now %s ttl %s", now, ttl)
			assert.True(t, want.Equal(time.UnixMicro(int64(ts))))
			ts, err = strategy.DefaultExpiry(time.Hour).WriteTimestamp(now, ttl)
			require.NoError(t, err)
			assert.Equal(t, want.Add(-time.Hour).UnixMicro(), int64(ts))
			assert.Equal(t, want.UnixMicro(), int64(strategy.DefaultExpiry(time.Hour).Expiry(ts)))
		}
	}
	// What the nanosecond path would have written: not the instant asked for.
	late := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.NotEqual(t, late.UnixMicro(), int64(bigtable.Time(late)), "bigtable.Time wraps after 2262")
}

func TestWriteTimestampOverflowIsRefused(t *testing.T) {
	// Year 294,247: the last hour of int64 microseconds.
	now := time.UnixMicro(int64(strategy.MaxTimestamp) - time.Hour.Microseconds())
	_, err := strategy.OneSecond().WriteTimestamp(now, 2*time.Hour)
	require.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	ts, err := strategy.OneSecond().WriteTimestamp(now, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, strategy.MaxTimestamp, ts)
	_, err = strategy.DefaultExpiry(time.Hour).WriteTimestamp(now, 3*time.Hour)
	require.ErrorIs(t, err, strategy.ErrTimestampOverflow)
}
