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
			got, err := c.p.WriteTimestamp(now, c.ttl)
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
	_, err := one.WriteTimestamp(now, 0)
	assert.ErrorIs(t, err, strategy.ErrInvalidTTL)
	_, err = def.WriteTimestamp(now, -time.Second)
	assert.ErrorIs(t, err, strategy.ErrInvalidTTL)
	_, err = one.WriteTimestamp(strategy.MaxTimestamp-1000, time.Hour)
	assert.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	_, err = def.WriteTimestamp(math.MaxInt64-10, math.MaxInt64)
	assert.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	_, err = def.WriteTimestamp(1_000_000, time.Second)
	assert.ErrorIs(t, err, strategy.ErrBeforeEpoch)
	_, err = strategy.Sequence(3).WriteTimestamp(now, time.Hour)
	assert.ErrorIs(t, err, strategy.ErrWrongCellOption)
}

func TestSequenceTimestamp(t *testing.T) {
	p := strategy.Sequence(3)
	ts, err := p.SequenceTimestamp(42)
	require.NoError(t, err)
	assert.Equal(t, bigtable.Timestamp(42_000), ts)
	for _, bad := range []int64{0, -1, math.MaxInt64, math.MaxInt64/1000 + 1} {
		_, err := p.SequenceTimestamp(bad)
		assert.ErrorIs(t, err, strategy.ErrInvalidSequence, bad)
	}
	ts, err = p.SequenceTimestamp(math.MaxInt64 / 1000)
	require.NoError(t, err)
	assert.LessOrEqual(t, ts, strategy.MaxTimestamp)
	_, err = strategy.OneSecond().SequenceTimestamp(1)
	assert.ErrorIs(t, err, strategy.ErrWrongCellOption)
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
		"ttl on sequence":  {"a": strategy.Sequence(1, strategy.WithDefaultTTL(time.Hour))},
		"unmanaged option": {"a": strategy.Policy{}.With(strategy.SingleValue())},
	} {
		assert.ErrorIs(t, s.Validate(), strategy.ErrInvalidPolicy, name)
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
