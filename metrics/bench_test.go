package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/ttlclient"
)

// Acceptance 4: the time a caller sees per read, with shadow sampling 0.01
// against 0 (and without a recorder), in the same run. The machine is
// shared, so the three configurations run in alternating blocks of reads
// inside one benchmark: load spikes hit all three alike. A block is long
// (blockReads reads) next to one shadow read, so each configuration pays
// for its own shadow reads. Reported per read: ns/read-<config>, and
// overhead-% of sampling 0.01 over 0.
//
//	go test -run '^$' -bench ReadRowShadowSampling -count 6 ./metrics > bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest bench.txt
//
// Figures in metrics/BENCH_RESULTS.txt.
func BenchmarkReadRowShadowSampling(b *testing.B) {
	ctx := context.Background()
	h := bttestharness.New(b)
	require.NoError(b, h.CreateTable(ctx, table, schema()))
	// A row holding live and expired-but-not-collected cells.
	setup := ttlclient.Wrap(h.Raw, ttlclient.WithClock(h.Clock))
	tbl, err := setup.Open(table, schema())
	require.NoError(b, err)
	m := ttlclient.NewMutation()
	for _, ttl := range []time.Duration{time.Minute, 2 * time.Minute, 10 * time.Hour} {
		m.Set(famOne, ttl.String(), ttlclient.Auto, []byte("v"), ttlclient.WithTTL(ttl))
		m.Set(famDef, ttl.String(), ttlclient.Auto, []byte("v"), ttlclient.WithTTL(ttl))
	}
	require.NoError(b, tbl.Apply(ctx, "r1", m))
	h.Clock.Advance(time.Hour)

	type config struct {
		name    string
		tbl     *ttlclient.Table
		elapsed time.Duration
		reads   int
	}
	var configs []*config
	for _, c := range []struct {
		name string
		opts []ttlclient.Option
	}{
		{"none", nil}, // no recorder at all
		{"0", []ttlclient.Option{ttlclient.WithRecorder(metrics.New()), ttlclient.WithShadowSampling(0)}},
		{"0.01", []ttlclient.Option{ttlclient.WithRecorder(metrics.New()), ttlclient.WithShadowSampling(0.01)}},
	} {
		client := ttlclient.Wrap(h.Raw, append([]ttlclient.Option{ttlclient.WithClock(h.Clock)}, c.opts...)...)
		b.Cleanup(func() { _ = client.Close() })
		t, err := client.Open(table, schema())
		require.NoError(b, err)
		configs = append(configs, &config{name: c.name, tbl: t})
	}
	const blockReads = 200
	b.ReportAllocs()
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; round++ {
		n := min(blockReads, b.N-done)
		for i := range configs {
			c := configs[(i+round)%len(configs)] // rotate which goes first
			start := time.Now()
			for j := 0; j < n; j++ {
				r, err := c.tbl.ReadRow(ctx, "r1")
				if err != nil || len(r[famOne]) != 1 {
					b.Fatalf("read %v: %v", r, err)
				}
			}
			c.elapsed += time.Since(start)
			c.reads += n
		}
		done += n
	}
	b.StopTimer()
	perRead := map[string]float64{}
	for _, c := range configs {
		perRead[c.name] = float64(c.elapsed.Nanoseconds()) / float64(c.reads)
		b.ReportMetric(perRead[c.name], "ns/read-"+c.name)
	}
	b.ReportMetric(100*(perRead["0.01"]-perRead["0"])/perRead["0"], "overhead-%")
}
