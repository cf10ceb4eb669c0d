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
// against 0 (and without a recorder), in the same run:
//
//	go test -run '^$' -bench ReadRowShadowSampling -count 6 ./metrics > bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /sampling bench.txt
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

	for _, c := range []struct {
		name string
		opts []ttlclient.Option
	}{
		{"sampling=none", nil}, // no recorder at all
		{"sampling=0", []ttlclient.Option{ttlclient.WithRecorder(metrics.New()), ttlclient.WithShadowSampling(0)}},
		{"sampling=0.01", []ttlclient.Option{ttlclient.WithRecorder(metrics.New()), ttlclient.WithShadowSampling(0.01)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := ttlclient.Wrap(h.Raw, append([]ttlclient.Option{ttlclient.WithClock(h.Clock)}, c.opts...)...)
			tbl, err := client.Open(table, schema())
			require.NoError(b, err)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := tbl.ReadRow(ctx, "r1")
				if err != nil || len(r[famOne]) != 1 {
					b.Fatalf("read %v: %v", r, err)
				}
			}
			b.StopTimer()
			require.NoError(b, client.Close())
		})
	}
}
