package strategy_test

import (
	"errors"
	"math"
	"math/big"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

var sentinels = []error{
	strategy.ErrInvalidPolicy, strategy.ErrUnsupportedGCRule, strategy.ErrInvalidTTL,
	strategy.ErrTimestampOverflow, strategy.ErrBeforeEpoch, strategy.ErrInvalidSequence,
	strategy.ErrServerTimestamp, strategy.ErrAlreadyExpired, strategy.ErrWrongCellOption,
}

// exactlyOne fails unless err wraps exactly one sentinel, and it is want.
func exactlyOne(t *testing.T, err error, want ...error) {
	t.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %v wraps %d sentinels", err, n)
	}
	for _, w := range want {
		if errors.Is(err, w) {
			return
		}
	}
	t.Fatalf("error %v, want one of %v", err, want)
}

// agePolicy builds an age policy from fuzz input: one-second when d <= 0,
// else default expiry with D = d milliseconds (bounded to ~300 years).
func agePolicy(d int64, opts ...strategy.AgeOption) strategy.Policy {
	if d <= 0 {
		one := make([]strategy.OneSecondOption, len(opts))
		for i, o := range opts {
			one[i] = o
		}
		return strategy.OneSecond(one...)
	}
	d %= 9_000_000_000_000 // ms
	if d == 0 {
		d = 1
	}
	return strategy.DefaultExpiry(time.Duration(d)*time.Millisecond, opts...)
}

func floorMs(x *big.Int) *big.Int {
	q, m := new(big.Int), new(big.Int)
	q.DivMod(x, big.NewInt(1000), m) // Euclidean: m >= 0, so q rounds down
	return q.Mul(q, big.NewInt(1000))
}

// FuzzWriteTimestamp checks the age strategies' timestamp math against an
// exact big-integer oracle: no panic; a TTL under 1ms is refused with
// ErrInvalidTTL; a result past the largest timestamp with
// ErrTimestampOverflow; a result before the epoch with ErrBeforeEpoch (or
// overflow when int64 underflows); otherwise the timestamp is exactly
// ms(now+ttl[-D]) with the sum taken in nanoseconds (now has a
// sub-microsecond part, sub), a multiple of 1000, live at now and expired
// at now+ttl; and a longer TTL never gives an earlier timestamp.
func FuzzWriteTimestamp(f *testing.F) {
	f.Add(int64(1_700_000_000_123_456), int64(time.Hour), int64(0), int64(time.Millisecond), int64(0))
	f.Add(int64(1_700_000_000_123_456), int64(30*time.Minute), int64(3_600_000), int64(time.Hour), int64(999))
	f.Add(int64(math.MaxInt64-1000), int64(math.MaxInt64), int64(0), int64(1), int64(1))
	f.Add(int64(60_000_000), int64(time.Second), int64(3_600_000), int64(0), int64(500))
	f.Add(int64(0), int64(0), int64(-1), int64(-1), int64(-1))
	f.Add(int64(math.MinInt64), int64(math.MinInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, now, ttl, d, extra, sub int64) {
		p := agePolicy(d)
		if err := p.Validate(); err != nil {
			t.Fatalf("policy %s from %d: %v", p, d, err)
		}
		sub %= 1000
		if sub < 0 {
			sub = -sub
		}
		clock := time.UnixMicro(now).Add(time.Duration(sub))
		ts, err := p.WriteTimestamp(clock, time.Duration(ttl))

		nanos := new(big.Int).Mul(big.NewInt(now), big.NewInt(1000))
		nanos.Add(nanos, big.NewInt(sub))
		nanos.Add(nanos, big.NewInt(ttl))
		if p.Kind() == strategy.KindDefaultExpiry {
			nanos.Sub(nanos, big.NewInt(int64(p.DefaultTTL())))
		}
		want := floorMs(floorDiv(nanos, 1000))
		switch {
		case time.Duration(ttl) < time.Millisecond:
			exactlyOne(t, err, strategy.ErrInvalidTTL)
			return
		case want.Cmp(big.NewInt(int64(strategy.MaxTimestamp))) > 0:
			exactlyOne(t, err, strategy.ErrTimestampOverflow)
			return
		case want.Sign() < 0:
			exactlyOne(t, err, strategy.ErrBeforeEpoch, strategy.ErrTimestampOverflow)
			return
		}
		if err != nil {
			t.Fatalf("now %d+%dns ttl %s %s: unexpected %v (want %s)", now, sub, time.Duration(ttl), p, err, want)
		}
		if ts%1000 != 0 || ts < 0 || big.NewInt(int64(ts)).Cmp(want) != 0 {
			t.Fatalf("now %d+%dns ttl %s %s: timestamp %d, want %s", now, sub, time.Duration(ttl), p, ts, want)
		}
		if !p.IsLive(ts, bigtable.Timestamp(now)) {
			t.Fatalf("now %d ttl %s %s: cell %d not live when written", now, time.Duration(ttl), p, ts)
		}
		// Expired once the clock reaches now+ttl, to the microsecond.
		end := floorDiv(new(big.Int).Add(new(big.Int).Add(new(big.Int).Mul(big.NewInt(now), big.NewInt(1000)), big.NewInt(sub)), big.NewInt(ttl)), 1000)
		if end.IsInt64() && p.IsLive(ts, bigtable.Timestamp(end.Int64())) {
			t.Fatalf("now %d+%dns ttl %s %s: cell %d still live at now+ttl", now, sub, time.Duration(ttl), p, ts)
		}

		// Ordering: a longer TTL never yields an earlier timestamp.
		if extra < 0 {
			extra = -(extra + 1)
		}
		longer := time.Duration(ttl) + time.Duration(extra)
		if longer < time.Duration(ttl) {
			return // the TTL itself overflowed
		}
		ts2, err := p.WriteTimestamp(clock, longer)
		if err != nil {
			exactlyOne(t, err, strategy.ErrTimestampOverflow)
			return
		}
		if ts2 < ts {
			t.Fatalf("now %d %s: ttl %s -> %d but longer ttl %s -> %d", now, p, time.Duration(ttl), ts, longer, ts2)
		}
	})
}

// floorDiv is x/d rounded toward minus infinity.
func floorDiv(x *big.Int, d int64) *big.Int {
	q, m := new(big.Int), new(big.Int)
	q.DivMod(x, big.NewInt(d), m) // Euclidean with d > 0: rounds down
	return q
}

// FuzzSequenceTimestamp: seq*1000 for 1 <= seq <= MaxSequence,
// ErrInvalidSequence otherwise; a higher sequence never sorts lower.
func FuzzSequenceTimestamp(f *testing.F) {
	for _, s := range []int64{1, 2, 0, -1, math.MaxInt64, math.MinInt64, int64(strategy.MaxTimestamp) / 1000, strategy.MaxSequence, strategy.MaxSequence + 1} {
		f.Add(s)
	}
	p := strategy.Sequence(3)
	f.Fuzz(func(t *testing.T, seq int64) {
		ts, err := p.SequenceTimestamp(seq)
		if seq < 1 || seq > strategy.MaxSequence {
			exactlyOne(t, err, strategy.ErrInvalidSequence)
			return
		}
		if err != nil || ts != bigtable.Timestamp(seq)*1000 || ts%1000 != 0 {
			t.Fatalf("seq %d: %d, %v", seq, ts, err)
		}
		if next, err := p.SequenceTimestamp(seq + 1); err == nil && next <= ts {
			t.Fatalf("seq %d -> %d, seq+1 -> %d", seq, ts, next)
		}
	})
}

// FuzzLiveFrom: the read filter's lower bound is a multiple of 1000, the
// first live timestamp (the one before it is expired), and never moves
// back as time goes on.
func FuzzLiveFrom(f *testing.F) {
	f.Add(int64(1_700_000_000_123_456), int64(0), int64(1))
	f.Add(int64(1_700_000_000_000_000), int64(3_600_000), int64(1000))
	f.Add(int64(0), int64(1), int64(0))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(int64(math.MinInt64), int64(5), int64(7))
	f.Fuzz(func(t *testing.T, now, d, later int64) {
		p := agePolicy(d)
		lo := p.LiveFrom(bigtable.Timestamp(now))
		if lo%1000 != 0 || lo < 0 {
			t.Fatalf("%s LiveFrom(%d) = %d", p, now, lo)
		}
		if lo < strategy.MaxTimestamp && !p.IsLive(lo, bigtable.Timestamp(now)) {
			t.Fatalf("%s: %d (LiveFrom(%d)) not live", p, lo, now)
		}
		if lo >= 1000 && p.IsLive(lo-1000, bigtable.Timestamp(now)) {
			t.Fatalf("%s: %d, before LiveFrom(%d) = %d, is live", p, lo-1000, now, lo)
		}
		if later < 0 {
			later = -(later + 1)
		}
		if now2 := now + later; now2 >= now {
			if lo2 := p.LiveFrom(bigtable.Timestamp(now2)); lo2 < lo {
				t.Fatalf("%s: LiveFrom(%d) = %d but LiveFrom(%d) = %d", p, now, lo, now2, lo2)
			}
		}
	})
}
