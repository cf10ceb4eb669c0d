package strategy_test

import (
	"math"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
)

func micros(d time.Duration) bigtable.Timestamp { return bigtable.Timestamp(d / time.Microsecond) }

func TestIdleValidate(t *testing.T) {
	ok := []strategy.Policy{
		strategy.OneSecond(strategy.WithIdleTTL(time.Millisecond, strategy.DefaultIdleDebounce)),
		strategy.OneSecond(strategy.WithIdleTTL(time.Hour, 0)),
		strategy.DefaultExpiry(time.Hour, strategy.WithIdleTTL(48*time.Hour, 0.999)),
	}
	for _, p := range ok {
		assert.NoError(t, p.Validate(), p.String())
	}
	bad := []strategy.Policy{
		strategy.OneSecond(strategy.WithIdleTTL(time.Microsecond, strategy.DefaultIdleDebounce)),
		strategy.OneSecond(strategy.WithIdleTTL(-time.Hour, strategy.DefaultIdleDebounce)),
		strategy.OneSecond(strategy.WithIdleTTL(0, 0.2)), // no idle TTL
		strategy.OneSecond(strategy.WithIdleTTL(time.Hour, 1)),
		strategy.OneSecond(strategy.WithIdleTTL(time.Hour, -0.1)),
		strategy.OneSecond(strategy.WithIdleTTL(time.Hour, math.NaN())),
		strategy.OneSecond(strategy.WithIdleTTL(2*time.Hour, strategy.DefaultIdleDebounce), strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger)),
		strategy.OneSecond(strategy.WithIdleTTL(2*time.Hour, strategy.DefaultIdleDebounce), strategy.WithMaxTTL(time.Hour, strategy.ClampLonger)),
	}
	for _, p := range bad {
		assert.ErrorIs(t, p.Validate(), strategy.ErrInvalidPolicy, p.String())
	}
}

func TestIdleDebounceIsWhatWasGiven(t *testing.T) {
	assert.Equal(t, strategy.DefaultIdleDebounce, strategy.OneSecond(strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce)).IdleDebounce())
	assert.Equal(t, 0.0, strategy.OneSecond(strategy.WithIdleTTL(time.Hour, 0)).IdleDebounce())
	assert.Equal(t, 0.0, strategy.OneSecond().IdleDebounce(), "no idle TTL, no debounce")
}

// The debounce is a fraction of the idle TTL whatever its length: the
// objectstore bug (a fixed 24h debounce) disabled every refresh of a TTI of
// 24h or less. Here every idle TTL from 1ms to a year refreshes a cell
// just below its threshold and not one just above it.
func TestIdleDebounceScalesWithIdleTTL(t *testing.T) {
	for _, idle := range []time.Duration{time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour, 365 * 24 * time.Hour} {
		for _, f := range []float64{0, 0.1, 0.5} {
			for _, p := range []strategy.Policy{
				strategy.OneSecond(strategy.WithIdleTTL(idle, f)),
				strategy.DefaultExpiry(time.Hour, strategy.WithIdleTTL(idle, f)),
			} {
				require.NoError(t, p.Validate())
				threshold := micros(time.Duration(float64(idle) * (1 - f)))
				// A cell expiring `remaining` after now, in p's convention.
				at := func(remaining bigtable.Timestamp) bigtable.Timestamp {
					return now + remaining - micros(p.Expiry(0).Time().Sub(time.UnixMicro(0)))
				}
				assert.False(t, p.NeedsIdleRefresh(at(threshold+1000), now), "%s: %s left", p, threshold+1000)
				if threshold > 1000 {
					assert.True(t, p.NeedsIdleRefresh(at(threshold-1000), now), "%s: %s left", p, threshold-1000)
					assert.True(t, p.NeedsIdleRefresh(at(1000), now), "%s: 1ms left", p)
				}
				assert.False(t, p.NeedsIdleRefresh(at(0), now), "%s: expired at now", p)
			}
		}
	}
}

func TestIdleRefreshTimestamp(t *testing.T) {
	one := strategy.OneSecond(strategy.WithIdleTTL(30*time.Minute, strategy.DefaultIdleDebounce))
	ts, err := one.IdleRefreshTimestamp(nowTime)
	require.NoError(t, err)
	assert.Equal(t, strategy.Millis(now+micros(30*time.Minute)), one.Expiry(ts))

	// Longer than D on default expiry: a timestamp in the future.
	def := strategy.DefaultExpiry(time.Hour, strategy.WithIdleTTL(3*time.Hour, strategy.DefaultIdleDebounce))
	ts, err = def.IdleRefreshTimestamp(nowTime)
	require.NoError(t, err)
	assert.Equal(t, strategy.Millis(now+micros(3*time.Hour)), def.Expiry(ts))
	assert.Greater(t, ts, now)

	_, err = strategy.OneSecond().IdleRefreshTimestamp(nowTime)
	assert.ErrorIs(t, err, strategy.ErrWrongCellOption)
	// Far in the future the refresh is refused like a write.
	_, err = one.IdleRefreshTimestamp(strategy.MaxTimestamp.Time())
	assert.ErrorIs(t, err, strategy.ErrTimestampOverflow)
}

// A refreshed cell read continually is due again only once debounce*idle
// has passed: the bound on refresh writes.
func TestIdleRefreshBoundByDebounce(t *testing.T) {
	idle := time.Hour
	p := strategy.OneSecond(strategy.WithIdleTTL(idle, 0.1))
	ts, err := p.IdleRefreshTimestamp(nowTime)
	require.NoError(t, err)
	assert.False(t, p.NeedsIdleRefresh(ts, now+micros(6*time.Minute)-1000))
	assert.True(t, p.NeedsIdleRefresh(ts, now+micros(6*time.Minute)+1000))
}
