package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
)

// The model's lifecycle operations follow docs/design.md#lifecycle-conditions.
func TestModelConditionsPersistAndExpireAt(t *testing.T) {
	m := New(strategy.Schema{
		"one":    strategy.OneSecond(strategy.WithWriteTime()),
		"refuse": strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger)),
		"seq":    strategy.Sequence(1),
	})
	t0 := time.UnixMicro(1_000_000_000_000)
	require.NoError(t, m.Apply("r", t0, []Op{{Kind: SetTTL, Family: "one", Column: "c", TTL: time.Minute, Value: "v"}}))

	res, err := m.ExpireCond("r", "one", "c", t0, 30*time.Second, 0, false, CondGT)
	require.NoError(t, err)
	assert.Equal(t, ResNotMet, res)
	res, err = m.Persist("r", "one", "c", t0)
	require.NoError(t, err)
	assert.Equal(t, ResSet, res)
	assert.Equal(t, int64(lastMilli), m.Stored("r")[0].TS)
	res, _ = m.Persist("r", "one", "c", t0)
	assert.Equal(t, ResNotMet, res, "no TTL to remove")
	res, _ = m.ExpireCond("r", "one", "c", t0, time.Hour, 0, false, CondGT)
	assert.Equal(t, ResNotMet, res, "GT never sets a TTL on a cell without one")
	res, _ = m.ExpireCond("r", "one", "c", t0, time.Hour, 0, false, CondNX)
	assert.Equal(t, ResSet, res)
	assert.Len(t, m.Stored("r"), 1, "the last millisecond's cell moved, not copied")

	res, err = m.ExpireAt("r", "one", "c", t0, t0.Add(-time.Second), 0, false, CondAlways)
	require.NoError(t, err)
	assert.Equal(t, ResDeleted, res)
	assert.Empty(t, m.Stored("r"))
	res, _ = m.ExpireAt("r", "one", "c", t0, t0.Add(time.Hour), 0, false, CondAlways)
	assert.Equal(t, ResNoCell, res)

	_, err = m.Persist("r", "refuse", "c", t0)
	assert.Equal(t, ClassCannotPersist, err.(*Refusal).Class)
	_, err = m.Persist("r", "seq", "c", t0)
	assert.Equal(t, ClassCannotPersist, err.(*Refusal).Class)
	_, err = m.ExpireAt("r", "refuse", "c", t0, t0.Add(2*time.Hour), 0, false, CondAlways)
	assert.Equal(t, ClassTTLTooLong, err.(*Refusal).Class)
}

func TestModelSetKeepTTLAndMaxWriteTime(t *testing.T) {
	m := New(strategy.Schema{"one": strategy.OneSecond(strategy.WithWriteTime(), strategy.SingleValue())})
	t0 := time.UnixMicro(1_000_000_000_000)
	require.NoError(t, m.Apply("r", t0, []Op{{Kind: SetTTL, Family: "one", Column: "c", TTL: time.Minute, Value: "v"}}))
	ts := m.Stored("r")[0].TS
	t1 := t0.Add(time.Second)
	res, err := m.SetKeepTTL("r", "one", "c", t1, "w")
	require.NoError(t, err)
	assert.Equal(t, ResSet, res)
	assert.Equal(t, []Cell{{"r", "one", "c", ts, "w"}}, m.Stored("r"))
	wt, ok, err := m.MaxWriteTime("r", "one", nil, t1)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, t1.UnixMicro(), wt)
	res, _ = m.SetKeepTTL("none", "one", "c", t1, "w")
	assert.Equal(t, ResNoCell, res)
	_, ok, _ = m.MaxWriteTime("r", "one", nil, t0.Add(time.Hour))
	assert.False(t, ok, "expired: no write time")
}

// On a default-expiry family whose D is longer than the time since the
// epoch (timestamp 0 is live): ExpireAt to a future instant less than D
// after the epoch is refused (before-epoch), a past one deletes the cell,
// and ExpireColumn deletes an older version shifted to before the epoch
// whose new expiry is past, as ttlclient does.
func TestModelLongDefaultTTLBeforeTheEpoch(t *testing.T) {
	const d = 100 * 365 * 24 * time.Hour
	m := New(strategy.Schema{"d": strategy.DefaultExpiry(d)})
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	require.NoError(t, m.Apply("r", t0, []Op{{Kind: SetAuto, Family: "d", Column: "c", Value: "v"}}))
	_, err := m.ExpireAt("r", "d", "c", t0, t0.Add(time.Hour), 0, false, CondAlways)
	require.Error(t, err)
	assert.Equal(t, ClassBeforeEpoch, err.(*Refusal).Class)
	res, err := m.ExpireAt("r", "d", "c", t0, t0.Add(-time.Hour), 0, false, CondAlways)
	require.NoError(t, err)
	assert.Equal(t, ResDeleted, res)
	assert.Empty(t, m.Stored("r"))

	require.NoError(t, m.Apply("r", t0, []Op{
		{Kind: SetExplicit, Family: "d", Column: "c", TS: 1000, Value: "old"},
		{Kind: SetAuto, Family: "d", Column: "c", Value: "new"},
	}))
	moved, err := m.ExpireColumn("r", "d", "c", t0, 50*365*24*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 2, moved)
	require.Len(t, m.Stored("r"), 1)
	assert.Equal(t, "new", m.Stored("r")[0].Value)
}

// The issue 37 forms: the column and row forms at an instant answer per
// cell; SetColumns judges FNX/FXX on live cells; SetColumnsKeepTTL keeps
// each column's timestamp; Persist on a clamping family never shortens.
func TestModelIssue37Forms(t *testing.T) {
	m := New(strategy.Schema{
		"one":   strategy.OneSecond(),
		"clamp": strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.ClampLonger)),
	})
	t0 := time.UnixMicro(1_000_000_000_000)
	set := func(fam, col string, ttl time.Duration) {
		require.NoError(t, m.Apply("r", t0, []Op{{Kind: SetTTL, Family: fam, Column: col, TTL: ttl, Value: col}}))
	}
	set("one", "c", time.Minute)
	set("one", "c", 2*time.Minute)
	res, err := m.ExpireColumnAt("r", "one", "c", t0, t0.Add(10*time.Minute), CondGT)
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, 2, Moved(res))
	assert.Equal(t, t0.Add(10*time.Minute).UnixMicro(), m.Stored("r")[0].TS, "the newest at the instant")
	res, _ = m.ExpireColumnAt("r", "one", "none", t0, t0.Add(time.Minute), CondAlways)
	assert.Equal(t, []CellRes{{Family: "one", Column: "none", Res: ResNoCell}}, res)

	ok, err := m.SetColumns("r", "one", map[string]string{"c": "x", "d": "y"}, time.Hour, SetIfAllExist, t0)
	require.NoError(t, err)
	assert.False(t, ok, "d does not exist")
	ok, _ = m.SetColumns("r", "one", map[string]string{"d": "y"}, time.Hour, SetIfNoneExist, t0)
	assert.True(t, ok)
	r, _ := m.SetColumnsKeepTTL("r", "one", map[string]string{"c": "c2", "d": "d2"}, t0)
	assert.Equal(t, ResSet, r)
	r, _ = m.SetColumnsKeepTTL("r", "one", map[string]string{"c": "c3", "e": "e3"}, t0)
	assert.Equal(t, ResNoCell, r)

	res, err = m.ExpireRow("r", t0, 0, &[]time.Time{t0.Add(-time.Second)}[0], CondAlways)
	require.NoError(t, err)
	assert.Equal(t, 3, Moved(res), "every live cell deleted")
	for _, c := range res {
		assert.Equal(t, ResDeleted, c.Res)
	}

	// A cell living longer than the clamping cap (written before it: put
	// in the row directly, as no write through the model gives it).
	long := ms(t0.Add(10 * time.Hour).UnixMicro())
	m.rows["r"] = row{"clamp": {"x": []cell{{ts: long, value: "v"}}}}
	p, err := m.Persist("r", "clamp", "x", t0)
	require.NoError(t, err)
	assert.Equal(t, ResNotMet, p, "never shortened to the cap")
	assert.Equal(t, long, m.Stored("r")[0].TS)
}
