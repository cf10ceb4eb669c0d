package streamconf

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCheckBounds(t *testing.T) {
	for d, ok := range map[time.Duration]bool{
		0: false, 23 * time.Hour: false, 24*time.Hour - time.Microsecond: false,
		24 * time.Hour: true, 3 * 24 * time.Hour: true, 7 * 24 * time.Hour: true,
		// truncated to microseconds first, as Bigtable does
		7*24*time.Hour + time.Nanosecond:  true,
		7*24*time.Hour + time.Microsecond: false, -time.Hour: false,
	} {
		assert.Equal(t, ok, Check(d) == nil, "%s", d)
	}
	assert.EqualError(t, Check(8*24*time.Hour), "change stream retention 8d is out of range: Bigtable keeps a change stream between 1d and 7d")
}
