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

const now = bigtable.Timestamp(1_700_000_000_123_456) // sub-millisecond digits on purpose

// nowTime is now as a clock reading.
var nowTime = time.UnixMicro(int64(now))

func TestWriteTimestampFormulas(t *testing.T) {
	d := 48 * time.Hour
	dMicros := bigtable.Timestamp(d / time.Microsecond)
	cases := []struct {
		name string
		p    strategy.Policy
		ttl  time.Duration
		want bigtable.Timestamp
	}{
		{"one-second: the expiry instant", strategy.OneSecond(), time.Hour, 1_700_003_600_123_000},
		{"default expiry: ttl = D is now", strategy.DefaultExpiry(d), d, 1_700_000_000_123_000},
		{"default expiry: shorter ttl moves earlier", strategy.DefaultExpiry(d), time.Hour, 1_700_000_000_123_000 + 3_600_000_000 - dMicros},
		{"default expiry: longer ttl moves later", strategy.DefaultExpiry(d), 72 * time.Hour, 1_700_000_000_123_000 + 24*3_600_000_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.p.WriteTimestamp(nowTime, c.ttl)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
			assert.Zero(t, got%1000)
			// The cell is live just before its expiry and dead at it.
			expiry := c.p.Expiry(got)
			assert.True(t, c.p.IsLive(got, expiry-1))
			assert.False(t, c.p.IsLive(got, expiry))
		})
	}
}

func TestWriteTimestampRefusals(t *testing.T) {
	one, def := strategy.OneSecond(), strategy.DefaultExpiry(time.Hour)
	_, err := one.WriteTimestamp(nowTime, 0)
	assert.ErrorIs(t, err, strategy.ErrInvalidTTL)
	_, err = def.WriteTimestamp(nowTime, -time.Second)
	assert.ErrorIs(t, err, strategy.ErrInvalidTTL)
	_, err = one.WriteTimestamp(time.UnixMicro(int64(strategy.MaxTimestamp-1000)), time.Hour)
	assert.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	_, err = def.WriteTimestamp(time.UnixMicro(math.MaxInt64-10), math.MaxInt64)
	assert.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	_, err = def.WriteTimestamp(time.UnixMicro(1_000_000), time.Second)
	assert.ErrorIs(t, err, strategy.ErrBeforeEpoch)
	_, err = strategy.Sequence(3).WriteTimestamp(nowTime, time.Hour)
	assert.ErrorIs(t, err, strategy.ErrWrongCellOption)
}

func TestSequenceTimestamp(t *testing.T) {
	p := strategy.Sequence(3)
	ts, err := p.SequenceTimestamp(42)
	require.NoError(t, err)
	assert.Equal(t, bigtable.Timestamp(42_000), ts)
	for _, bad := range []int64{0, -1, math.MaxInt64, math.MaxInt64/1000 + 1, strategy.MaxSequence + 1, int64(strategy.RealTimeFloor) / 1000} {
		_, err := p.SequenceTimestamp(bad)
		assert.ErrorIs(t, err, strategy.ErrInvalidSequence, bad)
	}
	ts, err = p.SequenceTimestamp(strategy.MaxSequence)
	require.NoError(t, err)
	assert.Less(t, ts, strategy.RealTimeFloor, "the largest sequence number still sorts below real times")
	_, err = strategy.OneSecond().SequenceTimestamp(1)
	assert.ErrorIs(t, err, strategy.ErrWrongCellOption)
}

// A real time written into a sequence family (bigtable.Now(), a legacy
// write time) would outrank every sequence number and hide later revisions.
func TestCheckExplicitRefusesRealTimeInSequenceFamily(t *testing.T) {
	p := strategy.Sequence(3)
	now := bigtable.Timestamp(1_795_608_238_130_000)
	for _, ts := range []bigtable.Timestamp{now, strategy.RealTimeFloor, strategy.MaxTimestamp} {
		_, err := p.CheckExplicit(now, ts)
		assert.ErrorIs(t, err, strategy.ErrInvalidSequence, ts)
	}
	got, err := p.CheckExplicit(now, strategy.RealTimeFloor-1000)
	require.NoError(t, err)
	assert.Equal(t, strategy.RealTimeFloor-1000, got)
}

func TestCheckExplicit(t *testing.T) {
	one := strategy.OneSecond()
	got, err := one.CheckExplicit(now, now+5_500)
	require.NoError(t, err)
	assert.Equal(t, now+5_500-(now+5_500)%1000, got)
	_, err = one.CheckExplicit(now, now)
	assert.ErrorIs(t, err, strategy.ErrAlreadyExpired, "a real timestamp expires at once")
	_, err = one.CheckExplicit(now, bigtable.ServerTime)
	assert.ErrorIs(t, err, strategy.ErrServerTimestamp)
	got, err = strategy.OneSecond(strategy.WithDefaultTTL(time.Minute)).CheckExplicit(now, bigtable.ServerTime)
	require.NoError(t, err)
	assert.Equal(t, bigtable.Timestamp(1_700_000_060_123_000), got)

	def := strategy.DefaultExpiry(time.Hour)
	got, err = def.CheckExplicit(now, now)
	require.NoError(t, err, "a real timestamp is the default TTL")
	assert.Equal(t, bigtable.Timestamp(1_700_000_000_123_000), got)
	_, err = def.CheckExplicit(now, now-3_600_000_000)
	assert.ErrorIs(t, err, strategy.ErrAlreadyExpired)
	_, err = def.CheckExplicit(now, -2)
	assert.ErrorIs(t, err, strategy.ErrBeforeEpoch)

	seq := strategy.Sequence(2)
	got, err = seq.CheckExplicit(now, 3000)
	require.NoError(t, err)
	assert.Equal(t, bigtable.Timestamp(3000), got)
	for _, bad := range []bigtable.Timestamp{0, 999, 3001} {
		_, err = seq.CheckExplicit(now, bad)
		assert.ErrorIs(t, err, strategy.ErrInvalidSequence, bad)
	}
}

func TestLiveFromIsFirstLiveMillisecond(t *testing.T) {
	one, def := strategy.OneSecond(), strategy.DefaultExpiry(time.Hour)
	assert.Equal(t, bigtable.Timestamp(1_700_000_000_124_000), one.LiveFrom(now))
	assert.Equal(t, bigtable.Timestamp(1_700_000_000_001_000), one.LiveFrom(1_700_000_000_000_000), "ts == t is expired")
	assert.Equal(t, bigtable.Timestamp(1_700_000_000_124_000-3_600_000_000), def.LiveFrom(now))
	assert.Equal(t, bigtable.Timestamp(0), def.LiveFrom(1000), "no bound before the epoch")
}

func TestGCPolicy(t *testing.T) {
	assert.Equal(t, "age() > 1s", maxAgeString(strategy.OneSecond().GCPolicy()))
	assert.Equal(t, bigtable.MaxAgePolicy(48*time.Hour).String(), strategy.DefaultExpiry(48*time.Hour).GCPolicy().String())
	assert.Equal(t, bigtable.MaxVersionsPolicy(5).String(), strategy.Sequence(5).GCPolicy().String())
	assert.Equal(t, bigtable.UnionPolicy(bigtable.MaxAgePolicy(time.Hour), bigtable.MaxVersionsPolicy(2)).String(),
		strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2)).GCPolicy().String())
	assert.Equal(t, bigtable.NoGcPolicy().String(), strategy.Unmanaged().GCPolicy().String())
}

func maxAgeString(p bigtable.GCPolicy) string {
	if ma, ok := p.(bigtable.MaxAgeGCPolicy); ok && time.Duration(ma) == time.Second {
		return "age() > 1s"
	}
	return p.String()
}

func TestMillisRoundsDown(t *testing.T) {
	assert.Equal(t, bigtable.Timestamp(1000), strategy.Millis(1999))
	assert.Equal(t, bigtable.Timestamp(-1000), strategy.Millis(-1))
	assert.Equal(t, bigtable.Timestamp(0), strategy.Millis(0))
}

func TestSchemaValidate(t *testing.T) {
	require.NoError(t, strategy.Schema{"a.b-c_1": strategy.OneSecond(), "x": strategy.Unmanaged()}.Validate())
	for name, s := range map[string]strategy.Schema{
		"empty name":       {"": strategy.OneSecond()},
		"space in name":    {"a b": strategy.OneSecond()},
		"zero D":           {"a": strategy.DefaultExpiry(0)},
		"sub-ms D":         {"a": strategy.DefaultExpiry(time.Microsecond)},
		"negative max ver": {"a": strategy.OneSecond(strategy.WithMaxVersions(-1))},
		"tiny default":     {"a": strategy.OneSecond(strategy.WithDefaultTTL(time.Microsecond))},
		"zero max ver":     {"a": strategy.OneSecond(strategy.WithMaxVersions(0))},
	} {
		err := s.Validate()
		assert.ErrorIs(t, err, strategy.ErrInvalidPolicy, name)
		var pe *strategy.PolicyError
		if assert.ErrorAs(t, err, &pe, name) {
			for fam := range s { // the one family
				assert.Equal(t, fam, pe.Family, name)
			}
		}
	}
}

// Found by FuzzLiveFrom: near the largest timestamp the bound wrapped to a
// negative value, and a filter starting there returns expired cells.
func TestLiveFromSaturatesAtMaxTimestamp(t *testing.T) {
	for _, now := range []bigtable.Timestamp{strategy.MaxTimestamp - 1, strategy.MaxTimestamp, math.MaxInt64} {
		assert.Equal(t, strategy.MaxTimestamp, strategy.OneSecond().LiveFrom(now), "now %d", now)
	}
	assert.False(t, strategy.OneSecond().IsLive(strategy.MaxTimestamp-1000, math.MaxInt64))
}

// The clock and the TTL were each truncated to the microsecond before being
// added, losing the carry of their sub-microsecond parts: clock T+999.6µs and
// ttl 1ms+500ns stored T+1000, which reads as expired 0.4µs after the write.
// The sum is now taken in nanoseconds (issue 14, finding 10(a)).
func TestWriteTimestampCarriesSubMicroseconds(t *testing.T) {
	base := time.UnixMicro(1_700_000_000_000_000)
	clock := base.Add(999*time.Microsecond + 600*time.Nanosecond)
	ttl := time.Millisecond + 500*time.Nanosecond
	ts, err := strategy.OneSecond().WriteTimestamp(clock, ttl)
	require.NoError(t, err)
	assert.Equal(t, bigtable.Timestamp(1_700_000_000_002_000), ts, "ms(now+ttl) with now+ttl = T+2000.1µs")
	assert.True(t, strategy.OneSecond().IsLive(ts, bigtable.Timestamp(clock.Add(ttl).UnixMicro()-1)), "live until now+ttl")

	def := strategy.DefaultExpiry(time.Hour)
	ts, err = def.WriteTimestamp(clock, time.Hour+time.Millisecond+500*time.Nanosecond)
	require.NoError(t, err)
	assert.Equal(t, bigtable.Timestamp(1_700_000_000_002_000), ts, "ms(now+ttl-D)")
	ts, err = strategy.OneSecond(strategy.WithDefaultTTL(time.Millisecond + 500*time.Nanosecond)).DefaultTimestamp(clock)
	require.NoError(t, err)
	assert.Equal(t, bigtable.Timestamp(1_700_000_000_002_000), ts, "the default TTL too")

	// Before the epoch the clock's sub-microsecond part still rounds down.
	ts, err = strategy.OneSecond().WriteTimestamp(time.Unix(0, -400), time.Millisecond+500*time.Nanosecond)
	require.NoError(t, err)
	assert.Equal(t, bigtable.Timestamp(1000), ts, "-0.4µs + 1000.5µs = 1000.1µs")
}

// Sequence(MaxInt32+1) was refused with "must keep at least 1 version"; the
// message now names the real limit (issue 14, finding 9).
func TestVersionsOverInt32NameTheLimit(t *testing.T) {
	for _, p := range []strategy.Policy{
		strategy.Sequence(math.MaxInt32 + 1),
		strategy.Sequence(math.MaxInt64),
		strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(math.MaxInt32+1)),
	} {
		err := p.Validate()
		require.ErrorIs(t, err, strategy.ErrInvalidPolicy, p.String())
		assert.Contains(t, err.Error(), "2147483647", p.String())
		assert.Contains(t, err.Error(), "max_num_versions is an int32", p.String())
		assert.NotContains(t, err.Error(), "at least 1", p.String())
	}
	require.NoError(t, strategy.Sequence(math.MaxInt32).Validate())
	assert.Contains(t, strategy.Sequence(0).Validate().Error(), "at least 1 version")
}

// With the read time at or past the largest timestamp, LiveFrom saturates at
// MaxTimestamp, and a cell stored there read as live and was accepted as an
// explicit expiry instant (issue 14, finding 10(b)).
func TestPastMaxTimestampNothingIsLive(t *testing.T) {
	one := strategy.OneSecond()
	for _, t0 := range []bigtable.Timestamp{strategy.MaxTimestamp, strategy.MaxTimestamp + 1, strategy.MaxTimestamp + 500, math.MaxInt64} {
		assert.True(t, one.AllExpired(t0), "%d", t0)
		assert.False(t, one.IsLive(strategy.MaxTimestamp, t0), "%d", t0)
		_, err := one.CheckExplicit(t0, strategy.MaxTimestamp)
		assert.ErrorIs(t, err, strategy.ErrAlreadyExpired, "%d", t0)
	}
	assert.False(t, one.AllExpired(strategy.MaxTimestamp-1))
	assert.True(t, one.IsLive(strategy.MaxTimestamp, strategy.MaxTimestamp-1))
	// A default-expiry cell stays live for D after its timestamp, and no
	// int64 read time is D past MaxTimestamp.
	def := strategy.DefaultExpiry(time.Millisecond)
	assert.False(t, def.AllExpired(math.MaxInt64))
	assert.True(t, def.IsLive(strategy.MaxTimestamp, math.MaxInt64))
	assert.False(t, strategy.Sequence(1).AllExpired(math.MaxInt64))
}
