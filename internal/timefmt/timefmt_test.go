package timefmt

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInstantIsFixedWidthAndRoundTrips(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "2026-01-02T03:04:05.000000Z"},
		{time.Date(2026, 1, 2, 3, 4, 5, 120000, time.UTC), "2026-01-02T03:04:05.000120Z"},
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), "2026-01-02T02:04:05.000000Z"},
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "+10000-01-01T00:00:00.000000Z"},
		{time.Date(12000, 2, 29, 0, 0, 0, 0, time.UTC), "+12000-02-29T00:00:00.000000Z"},
		{time.UnixMicro(math.MaxInt64).UTC(), "+294247-01-10T04:00:54.775807Z"},
	} {
		got := Instant(c.t)
		assert.Equal(t, c.want, got)
		back, err := ParseInstant(got)
		require.NoError(t, err, got)
		assert.True(t, c.t.Equal(back), "%s: back %s", got, back)
	}
	_, err := ParseInstant("+10001-02-29T00:00:00Z")
	assert.Error(t, err, "not a leap year")
	_, err = ParseInstant("+x")
	assert.Error(t, err)
}

func TestDurationInDays(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                              "0s",
		60 * 24 * time.Hour:            "60d",
		36 * time.Hour:                 "1d12h",
		90 * time.Second:               "1m30s",
		1500 * time.Millisecond:        "1s500ms",
		-2 * time.Hour:                 "-2h",
		time.Duration(math.MaxInt64):   "106751d23h47m16s854ms775us807ns",
		time.Duration(math.MinInt64):   "-106751d23h47m16s854ms775us808ns",
		400*24*time.Hour + time.Minute: "400d1m",
	} {
		got := Duration(d)
		assert.Equal(t, want, got, "%d", int64(d))
		if d != math.MinInt64 { // str2duration parses the magnitude first: one past MaxInt64
			back, err := ParseDuration(got)
			require.NoError(t, err, got)
			assert.Equal(t, d, back, got)
		}
	}
}
