package metrics_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Register the recorder on your Prometheus registry (it reports through the
// global OpenTelemetry MeterProvider too) and give it to the client.
func ExampleNew() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx) // an in-process emulator
	if err != nil {
		panic(err)
	}
	defer h.Close()

	rec := metrics.New() // or metrics.New(metrics.WithMeterProvider(mp))
	reg := prometheus.NewRegistry()
	reg.MustRegister(rec)
	client := ttlclient.Wrap(h.Raw, ttlclient.WithClock(h.Clock), ttlclient.WithRecorder(rec),
		ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance),
		ttlclient.WithShadowSampling(1)) // every read, for the example; the default is 0.01
	defer client.Close()

	schema := ttlclient.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "users", schema); err != nil {
		panic(err)
	}
	tbl, err := client.Open("users", schema)
	if err != nil {
		panic(err)
	}
	m := ttlclient.NewMutation()
	m.Set("session", "token", ttlclient.Auto, []byte("abc"), ttlclient.WithTTL(time.Minute))
	if err := tbl.Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}
	h.Clock.Advance(time.Hour) // expired for bttl; Bigtable's GC has not run
	row, err := tbl.ReadRow(ctx, "user#1")
	if err != nil {
		panic(err)
	}
	fmt.Println("cells read:", len(row["session"]))

	// The shadow read runs on its own goroutine after ReadRow returned.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if gathered(reg, metrics.ShadowReadsTotal) == 1 {
			break
		}
	}
	fmt.Println("expired, not collected:", gathered(reg, metrics.ExpiredNotCollectedTotal))
	// Output:
	// cells read: 0
	// expired, not collected: 1
}

// gathered sums the counter name over its series.
func gathered(reg *prometheus.Registry, name string) float64 {
	fams, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
