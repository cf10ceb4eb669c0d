package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// quantile is PromQL's histogram_quantile over cumulative buckets
// (upper bound, count): linear interpolation inside the bucket that holds
// the rank, the first bucket starting at 0.
func quantile(q float64, bounds []float64, counts []uint64) float64 {
	total := counts[len(counts)-1]
	rank := q * float64(total)
	for i, c := range counts {
		if float64(c) >= rank {
			lo, prev := 0.0, uint64(0)
			if i > 0 {
				lo, prev = bounds[i-1], counts[i-1]
			}
			return lo + (bounds[i]-lo)*(rank-float64(prev))/float64(c-prev)
		}
	}
	return bounds[len(bounds)-1]
}

// The written-TTL histogram resolves short TTLs: the median of TTLs of 1
// to 5 seconds reads as a few seconds (it read 23s with minute-wide
// buckets), and so on up to 30 days, buckets at most 3x apart.
func TestTTLBucketsResolveSecondsToMonths(t *testing.T) {
	for i := 1; i < len(metrics.TTLBuckets); i++ {
		if metrics.TTLBuckets[i] > 30*86400 {
			break
		}
		assert.LessOrEqual(t, metrics.TTLBuckets[i]/metrics.TTLBuckets[i-1], 3.0, "step to %v", metrics.TTLBuckets[i])
	}
	for _, c := range []struct {
		ttls     []time.Duration
		min, max float64
	}{
		{[]time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second}, 1, 5},
		{[]time.Duration{20 * time.Minute, 30 * time.Minute, 40 * time.Minute}, 600, 3600},
		{[]time.Duration{20 * 24 * time.Hour, 25 * 24 * time.Hour, 30 * 24 * time.Hour}, 14 * 86400, 30 * 86400},
	} {
		rec := metrics.New()
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(rec))
		tr := rec.Table("t", ttlclient.Schema{"s": strategy.OneSecond()})
		for i := 0; i < 100; i++ {
			tr.CellWritten("s", strategy.KindOneSecond, c.ttls[i%len(c.ttls)])
		}
		fams, err := reg.Gather()
		require.NoError(t, err)
		var bounds []float64
		var counts []uint64
		for _, f := range fams {
			if f.GetName() != metrics.WriteTTLSeconds {
				continue
			}
			for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
				counts = append(counts, b.GetCumulativeCount())
			}
		}
		require.NotEmpty(t, bounds)
		med := quantile(0.5, bounds, counts)
		assert.True(t, med >= c.min && med <= c.max, "median of %v reads as %vs", c.ttls, med)
	}
}
