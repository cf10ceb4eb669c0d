package lifecycle

import (
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
)

// Holds and Window agree: a cell at cur satisfies the condition exactly
// when cur lies in the window the predicate requires, for every condition
// and the edges (the first and last millisecond, equal expiries).
func TestHoldsIsTheWindow(t *testing.T) {
	max := strategy.MaxTimestamp
	ts := []bigtable.Timestamp{0, 1000, 5000, 9000, max - 2000, max - 1000, max}
	conds := []Condition{Always, IfNoTTL, IfTTL, IfLater, IfEarlier, IfTTLAndEarlier}
	for _, c := range conds {
		for _, target := range ts {
			start, end, ok := Window(c, target)
			for _, cur := range ts {
				in := ok && cur >= start && (end == 0 || cur < end)
				assert.Equal(t, Holds(c, cur, target), in, "%s cur %d target %d: window [%d,%d) ok=%v", c, cur, target, start, end, ok)
			}
		}
	}
}

// Redis: a key without a TTL counts as infinite, so GT never sets one
// and LT always does.
func TestACellWithoutATTLExpiresLast(t *testing.T) {
	forever := strategy.MaxTimestamp
	assert.False(t, HasTTL(forever))
	assert.True(t, HasTTL(forever-1000))
	for _, target := range []bigtable.Timestamp{0, 1000, forever - 1000} {
		assert.False(t, Holds(IfLater, forever, target))
		assert.True(t, Holds(IfEarlier, forever, target))
		assert.False(t, Holds(IfTTLAndEarlier, forever, target), "XX: it has no TTL")
	}
	assert.False(t, Holds(IfLater, 5000, 5999), "the same millisecond is not later")
	assert.True(t, Holds(IfNoTTL, forever, 1000))
	assert.False(t, Holds(IfNoTTL, forever-1000, 1000))
}

func TestAtTimestamp(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	one, def := strategy.OneSecond(), strategy.DefaultExpiry(time.Hour)

	ts, past, err := AtTimestamp(one, now, now.Add(90*time.Second+1500*time.Microsecond))
	require.NoError(t, err)
	assert.False(t, past)
	assert.Equal(t, bigtable.Time(now.Add(90*time.Second+time.Millisecond)), ts, "rounded down to the millisecond")
	assert.True(t, now.Add(90*time.Second+time.Millisecond).Equal(one.ExpiryTime(ts)))

	ts, _, err = AtTimestamp(def, now, now.Add(3*time.Hour))
	require.NoError(t, err)
	assert.True(t, now.Add(3*time.Hour).Equal(def.ExpiryTime(ts)), "at - D")

	for _, at := range []time.Time{now, now.Add(-time.Hour), now.Add(500 * time.Microsecond)} {
		_, past, err = AtTimestamp(one, now, at)
		require.NoError(t, err)
		assert.True(t, past, "%s: expired at once", at)
	}

	// The last expiry a cell can have, and one microsecond past it.
	last := one.ExpiryTime(strategy.MaxTimestamp)
	ts, _, err = AtTimestamp(one, now, last)
	require.NoError(t, err)
	assert.Equal(t, strategy.MaxTimestamp, ts)
	_, _, err = AtTimestamp(one, now, last.Add(time.Microsecond))
	require.ErrorIs(t, err, strategy.ErrTimestampOverflow)
	lastDef := def.ExpiryTime(strategy.MaxTimestamp)
	ts, _, err = AtTimestamp(def, now, lastDef)
	require.NoError(t, err)
	assert.Equal(t, strategy.MaxTimestamp, ts, "a default-expiry cell at the largest timestamp expires D later")
	_, _, err = AtTimestamp(def, now, lastDef.Add(time.Millisecond))
	require.ErrorIs(t, err, strategy.ErrTimestampOverflow)

	// The cap: refused, or clamped as a write with that TTL.
	refuse := strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger))
	_, _, err = AtTimestamp(refuse, now, now.Add(2*time.Hour))
	require.ErrorIs(t, err, strategy.ErrTTLTooLong)
	clamp := strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.ClampLonger))
	ts, _, err = AtTimestamp(clamp, now, now.Add(2*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, bigtable.Time(now.Add(time.Hour)), ts)
	ts, _, err = AtTimestamp(clamp, now, now.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, bigtable.Time(now.Add(time.Hour)), ts, "at the cap: not clamped")
}

func TestForever(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range []strategy.Policy{strategy.OneSecond(), strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2))} {
		ts, err := Forever(p, now)
		require.NoError(t, err)
		assert.Equal(t, strategy.MaxTimestamp, ts)
		assert.False(t, HasTTL(ts))
	}
	clamp := strategy.DefaultExpiry(time.Hour, strategy.WithMaxTTL(48*time.Hour, strategy.ClampLonger))
	ts, err := Forever(clamp, now)
	require.NoError(t, err)
	assert.True(t, now.Add(48*time.Hour).Equal(clamp.ExpiryTime(ts)), "the cap is forever on a clamping family")
	for _, p := range []strategy.Policy{
		strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger)),
		strategy.Sequence(3), strategy.Unmanaged(),
	} {
		_, err := Forever(p, now)
		assert.True(t, errors.Is(err, ErrCannotPersist), "%s: %v", p, err)
	}
}

func TestMaxWriteTimeCountsTheLiveView(t *testing.T) {
	p := strategy.OneSecond(strategy.WithWriteTime(), strategy.WithMaxVersions(1))
	comp := func(col string, ts, wt bigtable.Timestamp) bigtable.ReadItem {
		return bigtable.ReadItem{Column: "f:" + strategy.WriteTimeColumn(col), Timestamp: ts, Value: strategy.WriteTimeValue(wt)}
	}
	items := []bigtable.ReadItem{
		{Column: "f:a", Timestamp: 9000}, {Column: "f:a", Timestamp: 8000}, // 8000 is beyond the newest 1
		{Column: "f:b", Timestamp: 7000},
		{Column: "f:c", Timestamp: 6000}, // no companion
		comp("a", 9000, 100000), comp("a", 8000, 900000), comp("b", 7000, 300000),
	}
	wt, ok := MaxWriteTime(p, "f", items, nil)
	require.True(t, ok)
	assert.Equal(t, bigtable.Timestamp(300000), wt, "the hidden version's 900 does not count")
	wt, ok = MaxWriteTime(p, "f", items, []string{"a"})
	require.True(t, ok)
	assert.Equal(t, bigtable.Timestamp(100000), wt)
	_, ok = MaxWriteTime(p, "f", items, []string{"c"})
	assert.False(t, ok)
}

func TestPlanRowMove(t *testing.T) {
	schema := strategy.Schema{
		"a":   strategy.OneSecond(),
		"cap": strategy.OneSecond(strategy.WithMaxTTL(time.Minute, strategy.RefuseLonger)),
		"seq": strategy.Sequence(2),
	}
	policy := func(f string) (strategy.Policy, bool) { p, ok := schema[f]; return p, ok }
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	row := bigtable.Row{
		"a": {
			{Column: "a:x", Timestamp: 9000, Value: []byte("new")}, {Column: "a:x", Timestamp: 5000, Value: []byte("old")},
			{Column: "a:y", Timestamp: bigtable.Time(now.Add(time.Hour)), Value: []byte("there")},
		},
		"seq": {{Column: "seq:s", Timestamp: 1000}},
	}
	hour := func(p strategy.Policy) (bigtable.Timestamp, error) { return p.WriteTimestamp(now, time.Hour) }
	moves, _, err := PlanRowMove(row, policy, hour)
	require.NoError(t, err)
	require.Len(t, moves, 1, "the newest of x only; y is already there; sequence left alone")
	assert.Equal(t, Move{Family: "a", Column: "x", TS: 9000, Target: bigtable.Time(now.Add(time.Hour)), Value: []byte("new"), Keep: true}, moves[0])

	row["cap"] = []bigtable.ReadItem{{Column: "cap:c", Timestamp: 1000}}
	_, fam, err := PlanRowMove(row, policy, hour)
	assert.Equal(t, "cap", fam)
	require.ErrorIs(t, err, strategy.ErrTTLTooLong)
}
