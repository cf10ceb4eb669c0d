package filters_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// Issue 35 item 7: a cell expiring more than ~292 years out had a negative
// remaining TTL (the microseconds overflowed a time.Duration), and its
// report could not be written as JSON (an expiry past year 9999).
func TestExplainFarFutureExpiry(t *testing.T) {
	now := bigtable.Time(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	far := bigtable.Timestamp(time.Date(12000, 2, 29, 0, 0, 0, 0, time.UTC).UnixMicro()) // bigtable.Time overflows past 2262
	for _, ts := range []bigtable.Timestamp{far, bigtable.Timestamp(math.MaxInt64 / 1000 * 1000)} {
		row := bigtable.Row{"s": {{Column: "s:c", Timestamp: ts, Value: []byte("v")}}}
		c := filters.Explain(strategy.Schema{"s": strategy.OneSecond()}, row, now)[0]
		assert.Equal(t, filters.Returned, c.Visibility)
		assert.Equal(t, time.Duration(math.MaxInt64), c.Remaining, "saturated, not negative")
		assert.Contains(t, c.Reason, "left)")
		assert.NotContains(t, c.Reason, "(-")
		b, err := json.Marshal(c)
		require.NoError(t, err)
		var back filters.CellReport
		require.NoError(t, json.Unmarshal(b, &back), string(b))
		assert.True(t, c.Expiry.Equal(back.Expiry), "%s: %s", b, back.Expiry)
		assert.Equal(t, c.Remaining, back.Remaining)
	}
}

// Issue 35 item 7: a read refreshes the newest cell of a column only
// (docs/design.md#time-to-idle); Explain said older versions were
// refreshed too.
func TestExplainIdleRefreshNewestOnly(t *testing.T) {
	now := bigtable.Time(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	p := strategy.OneSecond(strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce))
	row := bigtable.Row{"s": {
		{Column: "s:c", Timestamp: now + 60_000_000, Value: []byte("new")},
		{Column: "s:c", Timestamp: now + 30_000_000, Value: []byte("old")},
	}}
	cells := filters.Explain(strategy.Schema{"s": p}, row, now)
	require.Len(t, cells, 2)
	require.Equal(t, filters.Returned, cells[1].Visibility)
	assert.Contains(t, cells[0].Reason, "a read refreshes it (time-to-idle)")
	assert.NotContains(t, cells[1].Reason, "refreshes", "an older version is never refreshed")
}
