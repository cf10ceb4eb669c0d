package model_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/model"
)

// A time-to-idle refresh is an extend of the newest returned cell of a
// column to the idle TTL, applied only while that cell is stored as read
// and still the newest.
func TestIdleDueAndRefresh(t *testing.T) {
	m := model.New(strategy.Schema{
		"i": strategy.DefaultExpiry(time.Hour, strategy.WithIdleTTL(10*time.Minute, strategy.DefaultIdleDebounce)),
		"p": strategy.DefaultExpiry(time.Hour),
	})
	now := time.UnixMicro(1_700_000_000_000_000)
	set := func(fam, col, v string, ttl time.Duration, at time.Time) {
		require.NoError(t, m.Apply("r", at, []model.Op{{Kind: model.SetTTL, Family: fam, Column: col, TTL: ttl, Value: v}}))
	}
	set("i", "a", "old", time.Minute, now)
	set("i", "a", "new", 2*time.Minute, now)
	set("i", "b", "long", time.Hour, now) // more than the idle TTL left: never due
	set("p", "a", "plain", time.Minute, now)
	read := m.Read("r", now.UnixMicro(), nil)
	due := m.IdleDue(read, now.UnixMicro())
	require.Len(t, due, 1)
	assert.Equal(t, "new", due[0].Value, "only the column's newest cell")

	// Stripped values do not match the stored cell: no refresh.
	stripped := due[0]
	stripped.Value = ""
	assert.False(t, m.Refresh(stripped, now))

	assert.True(t, m.Refresh(due[0], now))
	got := m.Read("r", now.UnixMicro(), model.LatestN(1))
	want := now.UnixMicro() + int64(10*time.Minute/time.Microsecond) - int64(time.Hour/time.Microsecond)
	require.Len(t, got, 3)
	assert.Equal(t, model.Cell{Row: "r", Family: "i", Column: "a", TS: want, Value: "new"}, got[0])
	assert.False(t, m.Refresh(due[0], now), "the cell has moved: a second refresh of it does not apply")

	// A write newer than the read cell makes its refresh not apply.
	read = m.Read("r", now.UnixMicro(), model.ColumnRange("i", "a", "b"))
	later := now.Add(9 * time.Minute)
	due = m.IdleDue(read, later.UnixMicro())
	require.Len(t, due, 1)
	set("i", "a", "newer", 5*time.Minute, later)
	assert.False(t, m.Refresh(due[0], later))

	// An expired cell is never revived.
	expired := now.Add(time.Hour)
	assert.Empty(t, m.IdleDue(m.Stored("r"), expired.UnixMicro()))
	assert.False(t, m.Refresh(model.Cell{Row: "r", Family: "i", Column: "a", TS: read[0].TS, Value: "new"}, expired))
}
