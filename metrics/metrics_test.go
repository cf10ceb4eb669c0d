package metrics_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/ttlclient"
)

// plant writes cells through the library at the clock's time t0, then moves
// the clock 3h ahead. The server's GC runs on real time, so the cells that
// expired for the library are all still stored. It returns the GC lag, in
// seconds, of every expired cell by family.
func plant(t *testing.T, e *env) map[string][]float64 {
	t.Helper()
	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "a", time.Hour, []byte("v"))        // expired 2h ago
	m.SetTTL(famOne, "b", 149*time.Minute, []byte("v"))  // expired 31m ago
	m.SetTTL(famOne, "c", 10*time.Hour, []byte("v"))     // live
	m.SetTTL(famDef, "x", 10*time.Minute, []byte("v"))   // expired 2h50m ago
	m.Set(famDef, "y", bigtable.ServerTime, []byte("v")) // default 1h: expired 2h ago
	m.SetTTL(famDef, "z", 5*time.Hour, []byte("v"))      // live
	m.Set(famPlain, "p", 1000, []byte("v"))              // never expires
	for seq := int64(1); seq <= 3; seq++ {               // one version hidden, not expired by age
		m.SetVersion(famSeq, "s", seq, []byte("v"))
	}
	require.NoError(t, e.tbl.Apply(e.ctx, "r1", m))
	m2 := ttlclient.NewMutation()
	m2.SetTTL(famOne, "a", time.Hour, []byte("v")) // expired 2h ago
	require.NoError(t, e.tbl.Apply(e.ctx, "r2", m2))
	e.h.Clock.Advance(3 * time.Hour)

	// The cells are physically stored: the server has not collected them.
	for _, row := range []string{"r1", "r2"} {
		r, err := e.h.Stored(e.ctx, table, row)
		require.NoError(t, err)
		require.NotEmpty(t, r[famOne], row)
	}
	return map[string][]float64{
		famOne: {7200, 1860, 7200},
		famDef: {10200, 7200},
	}
}

var strategyOf = map[string]string{famOne: "one-second", famDef: "default-expiry"}

// Acceptance 1: with sampling 1.0 the Prometheus collector and an OTel SDK
// ManualReader both report exactly the planted expired-not-collected cells,
// per table and family, in the right GC-lag buckets.
func TestExpiredNotCollectedExactCounts(t *testing.T) {
	e := newEnv(t, nil, ttlclient.WithShadowSampling(1))
	lags := plant(t, e)

	var got []string
	require.NoError(t, e.tbl.ReadRows(e.ctx, bigtable.RowList{"r1", "r2"}, func(r bigtable.Row) bool {
		got = append(got, r.Key())
		return true
	}))
	require.Equal(t, []string{"r1"}, got, "r2 holds only expired cells: the caller never sees it")
	e.waitShadows(t, 1)

	// Prometheus, through prometheus/testutil.
	var want strings.Builder
	fams := []string{famDef, famOne}
	for _, name := range []string{metrics.ShadowReadExpiredCellsTotal} {
		header(t, &want, e.rec, name, "counter")
		for _, fam := range fams {
			fmt.Fprintf(&want, "%s{family=%q,strategy=%q,table=%q} %d\n", name, fam, strategyOf[fam], table, len(lags[fam]))
		}
	}
	header(t, &want, e.rec, metrics.GCLagSeconds, "histogram")
	for _, fam := range fams {
		labels := fmt.Sprintf("family=%q,strategy=%q,table=%q", fam, strategyOf[fam], table)
		sum := 0.0
		for _, l := range lags[fam] {
			sum += l
		}
		for _, b := range metrics.GCLagBuckets {
			fmt.Fprintf(&want, "%s_bucket{%s,le=%q} %d\n", metrics.GCLagSeconds, labels, fmtFloat(b), cumulative(lags[fam], b))
		}
		fmt.Fprintf(&want, "%s_bucket{%s,le=\"+Inf\"} %d\n", metrics.GCLagSeconds, labels, len(lags[fam]))
		fmt.Fprintf(&want, "%s_sum{%s} %s\n", metrics.GCLagSeconds, labels, fmtFloat(sum))
		fmt.Fprintf(&want, "%s_count{%s} %d\n", metrics.GCLagSeconds, labels, len(lags[fam]))
	}
	require.NoError(t, testutil.CollectAndCompare(e.rec, strings.NewReader(want.String()), metrics.ShadowReadExpiredCellsTotal, metrics.GCLagSeconds))

	hidden := series(t, e.rec, metrics.ReadHiddenCells, "table", table).GetHistogram()
	assert.Equal(t, uint64(1), hidden.GetSampleCount(), "one sampled read")
	assert.Equal(t, 5.0, hidden.GetSampleSum(), "it walked past 5 expired cells")

	// OpenTelemetry, through the SDK's ManualReader.
	data := e.otelData(t)
	sum, ok := data[metrics.OTelShadowReadExpiredCells].(metricdata.Sum[int64])
	require.True(t, ok, "expired counter missing from the OTel data")
	assert.True(t, sum.IsMonotonic)
	assert.NotEmpty(t, points(sum))
	assert.NotContains(t, data, "bttl_expired_not_collected_cells", "the deprecated name is gone")
	hist, ok := data[metrics.OTelGCLag].(metricdata.Histogram[float64])
	require.True(t, ok, "GC lag histogram missing from the OTel data")
	for _, fam := range fams {
		attrs := attribute.NewSet(attribute.String("table", table), attribute.String("family", fam), attribute.String("strategy", strategyOf[fam]))
		var found bool
		for _, dp := range sum.DataPoints {
			if dp.Attributes.Equals(&attrs) {
				found = true
				assert.Equal(t, int64(len(lags[fam])), dp.Value, fam)
			}
		}
		assert.True(t, found, "no OTel counter point for %s", fam)
		found = false
		for _, dp := range hist.DataPoints {
			if !dp.Attributes.Equals(&attrs) {
				continue
			}
			found = true
			assert.Equal(t, metrics.GCLagBuckets, dp.Bounds, fam)
			assert.Equal(t, uint64(len(lags[fam])), dp.Count, fam)
			assert.Equal(t, perBucket(lags[fam], metrics.GCLagBuckets), dp.BucketCounts, fam)
		}
		assert.True(t, found, "no OTel histogram point for %s", fam)
	}
	assert.Len(t, sum.DataPoints, 2, "only the age families report expired cells")
}

// header writes the HELP and TYPE lines of name as the collector has them.
func header(t *testing.T, b *strings.Builder, c prometheus.Collector, name, typ string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() == name {
			fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, f.GetHelp(), name, typ)
			return
		}
	}
	t.Fatalf("collector does not export %s", name)
}

func fmtFloat(f float64) string { return fmt.Sprint(f) }

func cumulative(vals []float64, le float64) int {
	n := 0
	for _, v := range vals {
		if v <= le {
			n++
		}
	}
	return n
}

// perBucket is the OTel bucket counts: (bounds[i-1], bounds[i]], then +Inf.
func perBucket(vals, bounds []float64) []uint64 {
	out := make([]uint64, len(bounds)+1)
	for _, v := range vals {
		i := sort.SearchFloat64s(bounds, v)
		out[i]++
	}
	return out
}

// The shadow read of a ReadRow reads that row; one of a ReadRows the caller
// stopped early, or limited, walks only the rows the caller walked.
func TestShadowReadWalksTheCallersRows(t *testing.T) {
	e := newEnv(t, nil, ttlclient.WithShadowSampling(1))
	plant(t, e)
	expired := func() float64 {
		return promValue(t, e.rec, metrics.ShadowReadExpiredCellsTotal, "family", famOne) +
			promValue(t, e.rec, metrics.ShadowReadExpiredCellsTotal, "family", famDef)
	}

	_, err := e.tbl.ReadRow(e.ctx, "r2")
	require.NoError(t, err)
	e.waitShadows(t, 1)
	assert.Equal(t, 1.0, expired(), "r2 holds one expired cell")

	// Stopped after r1: r2 was not walked.
	require.NoError(t, e.tbl.ReadRows(e.ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { return false }))
	e.waitShadows(t, 2)
	assert.Equal(t, 1.0+4, expired(), "r1 holds four expired cells")

	// Limited to one row: r1 only.
	require.NoError(t, e.tbl.ReadRows(e.ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { return true }, bigtable.LimitRows(1)))
	e.waitShadows(t, 3)
	assert.Equal(t, 1.0+4+4, expired())

	// Reversed and limited to one row: the server walks past r2, which
	// holds only expired cells, to return r1.
	var got []string
	require.NoError(t, e.tbl.ReadRows(e.ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		got = append(got, r.Key())
		return true
	}, bigtable.LimitRows(1), bigtable.ReverseScan()))
	assert.Equal(t, []string{"r1"}, got)
	e.waitShadows(t, 4)
	assert.Equal(t, 1.0+4+4+5, expired())

	// A row with only expired cells returns nothing to the caller, but its
	// expired cells were walked past.
	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "a", time.Minute, []byte("v"))
	require.NoError(t, e.tbl.Apply(e.ctx, "r3", m))
	e.h.Clock.Advance(2 * time.Minute)
	row, err := e.tbl.ReadRow(e.ctx, "r3")
	require.NoError(t, err)
	assert.Nil(t, row)
	e.waitShadows(t, 5)
	assert.Equal(t, 1.0+4+4+5+1, expired())
}

// The sampler takes its randomness from the injected source: a read is
// sampled when the source returns less than the fraction.
func TestShadowSamplingFollowsTheRandomSource(t *testing.T) {
	draws := []float64{0.5, 0.1, 0.29, 0.3, 0.99, 0.0}
	i := 0
	next := func() float64 { v := draws[i%len(draws)]; i++; return v }
	e := newEnv(t, nil, ttlclient.WithShadowSampling(0.3), ttlclient.WithShadowRand(next))
	for range draws {
		_, err := e.tbl.ReadRow(e.ctx, "r1")
		require.NoError(t, err)
	}
	e.waitShadows(t, 3) // 0.1, 0.29 and 0.0
	assert.Equal(t, float64(len(draws)), promValue(t, e.rec, metrics.ReadsTotal, "table", table))

	off := newEnv(t, nil, ttlclient.WithShadowSampling(0), ttlclient.WithShadowRand(func() float64 {
		t.Fatal("sampling 0 must not draw")
		return 0
	}))
	_, err := off.tbl.ReadRow(off.ctx, "r1")
	require.NoError(t, err)
	assert.Zero(t, series(t, off.rec, metrics.ReadHiddenCells, "table", table).GetHistogram().GetSampleCount())
}

// Writes: cells by family and strategy, TTLs in seconds, added latency.
func TestWritesCellsAndTTLs(t *testing.T) {
	e := newEnv(t, nil, ttlclient.WithShadowSampling(0))
	plant(t, e)
	cells := func(fam string) float64 { return promValue(t, e.rec, metrics.CellsWrittenTotal, "family", fam) }
	assert.Equal(t, 4.0, cells(famOne))
	assert.Equal(t, 3.0, cells(famDef))
	assert.Equal(t, 3.0, cells(famSeq))
	assert.Equal(t, 1.0, cells(famPlain))
	assert.Equal(t, 2.0, promValue(t, e.rec, metrics.WritesTotal, "table", table))

	ttl := series(t, e.rec, metrics.WriteTTLSeconds, "family", famDef, "strategy", "default-expiry").GetHistogram()
	assert.Equal(t, uint64(3), ttl.GetSampleCount())
	assert.Equal(t, float64(10*60+3600+5*3600), ttl.GetSampleSum(), "10m, the 1h default and 5h")
	assert.Nil(t, series(t, e.rec, metrics.WriteTTLSeconds, "family", famSeq), "sequence cells have no TTL")

	lat := series(t, e.rec, metrics.WriteAddedLatencySeconds, "table", table).GetHistogram()
	assert.Equal(t, uint64(2), lat.GetSampleCount())
	assert.Greater(t, lat.GetSampleSum(), 0.0)

	data := e.otelData(t)
	c, ok := data[metrics.OTelCellsWritten].(metricdata.Sum[int64])
	require.True(t, ok, "%s missing from the OTel data", metrics.OTelCellsWritten)
	total := int64(0)
	for _, dp := range c.DataPoints {
		total += dp.Value
	}
	assert.Equal(t, int64(11), total)
}

// points lists a sum's data points as "attributes=value".
func points(s metricdata.Sum[int64]) []string {
	var out []string
	for _, dp := range s.DataPoints {
		out = append(out, fmt.Sprintf("%s=%d", dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value))
	}
	return out
}
