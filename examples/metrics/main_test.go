package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Acceptance 5: the example's scrape shows non-zero expired-not-collected
// figures for the families whose cells expired; and (issue 20, acceptance
// 4) the stock the audit measured next to the read path's observations,
// under names that cannot be confused.
func TestMetricsExampleScrapeShowsExpiredNotCollected(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	text := out.String()
	t.Log(text)
	value := func(pattern string) float64 {
		m := regexp.MustCompile(pattern + ` (\S+)\n`).FindStringSubmatch(text)
		require.NotNil(t, m, "no line matching %s", pattern)
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		return v
	}
	// 20 users: the session (30m) and two clicks cells (1h, 48h) expired;
	// the full scan walks them all, the five ReadRows walk five users again.
	assert.Equal(t, 25.0, value(`bttl_shadow_read_expired_cells_total\{family="session",strategy="one-second",table="events"\}`))
	assert.Equal(t, 50.0, value(`bttl_shadow_read_expired_cells_total\{family="clicks",strategy="default-expiry",table="events"\}`))
	// The stock: 20 session cells and 40 clicks cells (1h and 48h TTLs)
	// expired and stored, whatever the reads counted.
	assert.Equal(t, 20.0, value(`bttl_audit_expired_not_collected_cells\{family="session",strategy="one-second",table="events"\}`))
	assert.Equal(t, 40.0, value(`bttl_audit_expired_not_collected_cells\{family="clicks",strategy="default-expiry",table="events"\}`))
	assert.Equal(t, 20.0, value(`bttl_audit_live_cells\{family="clicks",strategy="default-expiry",table="events"\}`))
	assert.NotContains(t, text, "bttl_expired_not_collected_cells_total", "the deprecated name is gone")
	assert.Equal(t, 25.0, value(`bttl_expired_not_collected_gc_lag_seconds_count\{family="session",strategy="one-second",table="events"\}`))
	assert.Equal(t, 1.0, value(`bttl_refusals_total\{family="session",reason="server_timestamp",table="events"\}`))
	assert.Equal(t, 6.0, value(`bttl_shadow_reads_total\{table="events"\}`))
	assert.Contains(t, text, "20 live clicks cells")
}
