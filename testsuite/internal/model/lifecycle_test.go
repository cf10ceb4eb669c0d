package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
)

func TestExpireMovesAndKeepsTheWriteTime(t *testing.T) {
	m := New(strategy.Schema{
		"one": strategy.OneSecond(strategy.WithWriteTime()),
		"seq": strategy.Sequence(1),
	})
	t0 := time.UnixMicro(1_000_000_000_000)
	require.NoError(t, m.Apply("r", t0, []Op{{Kind: SetTTL, Family: "one", Column: "c", TTL: time.Second, Value: "v"}}))
	old := t0.UnixMicro() + 1_000_000
	assert.Equal(t, []Cell{
		{"r", "one", "c", old, "v"},
		{"r", "one", CompanionPrefix + "c", old, WriteTimeValue(t0.UnixMicro())},
	}, m.StoredRaw("r"))

	t1 := t0.Add(500 * time.Millisecond)
	applied, err := m.Expire("r", "one", "c", t1, time.Hour, 0, false)
	require.NoError(t, err)
	assert.True(t, applied)
	moved := t1.UnixMicro() + time.Hour.Microseconds()
	wt, ok := m.WriteTime("r", "one", "c", moved)
	assert.True(t, ok)
	assert.Equal(t, t0.UnixMicro(), wt)
	assert.Equal(t, []Cell{{"r", "one", "c", moved, "v"}}, m.Stored("r"))

	// Expired: not moved. Sequence: refused.
	applied, err = m.Expire("r", "one", "c", t1.Add(2*time.Hour), time.Hour, 0, false)
	require.NoError(t, err)
	assert.False(t, applied)
	_, err = m.Expire("r", "seq", "c", t1, time.Hour, 0, false)
	require.ErrorIs(t, err, ErrRefused)
	_, err = m.Expire("r", "one", "c", t1, 0, 0, false)
	require.ErrorIs(t, err, ErrRefused)
}

func TestExpireDoesNotOverwriteTheTarget(t *testing.T) {
	m := New(strategy.Schema{"one": strategy.OneSecond()})
	t0 := time.UnixMicro(1_000_000_000_000)
	require.NoError(t, m.Apply("r", t0, []Op{
		{Kind: SetTTL, Family: "one", Column: "c", TTL: time.Second, Value: "old"},
		{Kind: SetTTL, Family: "one", Column: "c", TTL: time.Hour, Value: "new"},
	}))
	applied, err := m.Expire("r", "one", "c", t0, time.Hour, t0.UnixMicro()+1_000_000, true)
	require.NoError(t, err)
	assert.False(t, applied, "the target holds the newer value")
	assert.Len(t, m.Stored("r"), 2)

	n, err := m.ExpireColumn("r", "one", "c", t0, 2*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, []Cell{
		{"r", "one", "c", t0.UnixMicro() + 2*time.Hour.Microseconds(), "new"},
		{"r", "one", "c", t0.UnixMicro() + time.Hour.Microseconds() + 1_000_000, "old"},
	}, m.Stored("r"))
}
