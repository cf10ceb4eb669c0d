package strategy_test

import (
	"errors"
	"math"
	"math/big"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
)

// A day before the largest timestamp, a default-expiry (48h) cell written with
// a 72h TTL expires at its timestamp + 48h (past the largest int64
// microsecond) with 72h left, and an explicit timestamp implying 58h is over a
// 49h cap (issue 26 item 11, the numbers).
func TestExpiryExactAtTheEndOfTheRange(t *testing.T) {
	now := time.UnixMicro(int64(strategy.MaxTimestamp)).Add(-24 * time.Hour)
	p := strategy.DefaultExpiry(48 * time.Hour)
	ts, err := p.WriteTimestamp(now, 72*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, time.UnixMicro(int64(ts)).Add(48*time.Hour), p.ExpiryTime(ts))
	left, ok := p.Remaining(ts, bigtable.Timestamp(now.UnixMicro()))
	require.True(t, ok)
	assert.Equal(t, 72*time.Hour, time.Duration(left)*time.Microsecond)
	assert.True(t, p.NeedsIdleRefresh(ts, bigtable.Timestamp(now.UnixMicro())) == false)

	capped := strategy.DefaultExpiry(48*time.Hour, strategy.WithMaxTTL(49*time.Hour, strategy.RefuseLonger))
	at := bigtable.Timestamp(now.Add(10 * time.Hour).UnixMicro()) // 10h + 48h = 58h
	_, err = capped.CheckExplicit(bigtable.Timestamp(now.UnixMicro()), at)
	assert.ErrorIs(t, err, strategy.ErrTTLTooLong)
	_, err = capped.CheckExplicit(bigtable.Timestamp(now.UnixMicro()), bigtable.Timestamp(now.Add(time.Hour).UnixMicro()))
	assert.NoError(t, err, "49h is within the cap")
}

// MilliEnd closes the millisecond of every timestamp, the last one with
// "no end" rather than a wrapped, negative end.
func TestMilliEnd(t *testing.T) {
	assert.Equal(t, bigtable.Timestamp(2000), strategy.MilliEnd(1000))
	assert.Equal(t, bigtable.Timestamp(2000), strategy.MilliEnd(1999))
	assert.Equal(t, strategy.MaxTimestamp, strategy.MilliEnd(strategy.MaxTimestamp-1))
	assert.Equal(t, bigtable.Timestamp(0), strategy.MilliEnd(strategy.MaxTimestamp))
	assert.Equal(t, bigtable.Timestamp(0), strategy.MilliEnd(math.MaxInt64))
}

// FuzzRemainingExact checks ExpiryTime, Remaining, NeedsIdleRefresh's use
// of it and the max-TTL check of explicit timestamps against a big-integer
// oracle: nothing saturates, and Remaining is !ok exactly when the answer
// does not fit in int64 microseconds.
func FuzzRemainingExact(f *testing.F) {
	f.Add(int64(strategy.MaxTimestamp), int64(strategy.MaxTimestamp)-int64(24*time.Hour/time.Microsecond), int64(48*3600*1000), int64(49*time.Hour))
	f.Add(int64(math.MaxInt64), int64(0), int64(1), int64(time.Hour))
	f.Add(int64(0), int64(math.MinInt64), int64(0), int64(0))
	f.Add(int64(1_700_000_000_000_000), int64(1_700_000_000_000_000), int64(3_600_000), int64(time.Minute))
	f.Fuzz(func(t *testing.T, ts, now, d, maxTTL int64) {
		p := agePolicy(d)
		D := int64(0)
		if p.Kind() == strategy.KindDefaultExpiry {
			D = int64(p.DefaultTTL() / time.Microsecond)
		}
		exp := new(big.Int).Add(big.NewInt(ts), big.NewInt(D))
		got := p.ExpiryTime(bigtable.Timestamp(ts))
		gotMicros := new(big.Int).Add(new(big.Int).Mul(big.NewInt(got.Unix()), big.NewInt(1_000_000)), big.NewInt(int64(got.Nanosecond()/1000)))
		if gotMicros.Cmp(exp) != 0 || got.Nanosecond()%1000 != 0 {
			t.Fatalf("%s ExpiryTime(%d) = %s, want %s µs", p, ts, got, exp)
		}
		want := new(big.Int).Sub(exp, big.NewInt(now))
		left, ok := p.Remaining(bigtable.Timestamp(ts), bigtable.Timestamp(now))
		if ok != want.IsInt64() || (ok && int64(left) != want.Int64()) {
			t.Fatalf("%s Remaining(%d, %d) = %d, %v; want %s", p, ts, now, left, ok, want)
		}
		if ts < 0 || now < 0 || maxTTL < int64(time.Millisecond) {
			return
		}
		capped := agePolicy(d, strategy.WithMaxTTL(time.Duration(maxTTL), strategy.RefuseLonger))
		if capped.Validate() != nil {
			return
		}
		ms := int64(strategy.Millis(bigtable.Timestamp(ts)))
		_, err := capped.CheckExplicit(bigtable.Timestamp(now), bigtable.Timestamp(ts))
		if !capped.IsLive(bigtable.Timestamp(ms), bigtable.Timestamp(now)) {
			return // ErrAlreadyExpired: TestExplicitCheckAcceptsWhatIsLive
		}
		implied := new(big.Int).Sub(new(big.Int).Add(big.NewInt(ms), big.NewInt(D)), big.NewInt(now))
		over := implied.Cmp(big.NewInt(maxTTL/int64(time.Microsecond))) > 0
		if over != errors.Is(err, strategy.ErrTTLTooLong) || (!over && err != nil) {
			t.Fatalf("%s cap %s now %d ts %d implies %s µs: %v", p, time.Duration(maxTTL), now, ts, implied, err)
		}
	})
}
