package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
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
	tbl, err := client.Open(context.Background(), "users", schema)
	if err != nil {
		panic(err)
	}
	m := ttlclient.NewMutation()
	m.SetTTL("session", "token", time.Minute, []byte("abc"))
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
	fmt.Println("expired cells walked past:", gathered(reg, metrics.ShadowReadExpiredCellsTotal))
	// Output:
	// cells read: 0
	// expired cells walked past: 1
}

// The package documentation's snippet: a client made with ttlclient.Wrap
// needs the admin client (or ttlclient.WithoutVerify) to open tables, since
// Open checks their GC rules.
func Example_wrap() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	raw, admin, project, instance := h.Raw, h.Admin, bttestharness.Project, bttestharness.Instance
	registry := prometheus.NewRegistry()

	rec := metrics.New()       // OpenTelemetry: the global MeterProvider
	registry.MustRegister(rec) // Prometheus: any registry of yours
	client := ttlclient.Wrap(raw, ttlclient.WithAdminClient(admin, project, instance), ttlclient.WithRecorder(rec))
	defer client.Close()

	schema := ttlclient.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "users", schema); err != nil {
		panic(err)
	}
	_, err = client.Open(context.Background(), "users", schema)
	fmt.Println("open:", err)
	// Output:
	// open: <nil>
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

// Registering the Recorder calls Describe: the registry checks its
// descriptors against those already registered. One Recorder serves every
// client and table of a process; a second one on the same registry
// collides with the first.
func ExampleRecorder_Describe() {
	rec := metrics.New()
	reg := prometheus.NewRegistry()
	fmt.Println(reg.Register(rec))

	var dup prometheus.AlreadyRegisteredError
	fmt.Println(errors.As(reg.Register(metrics.New()), &dup))
	// Output:
	// <nil>
	// true
}

// A registry gathers the Recorder through Collect, when Prometheus scrapes
// it (promhttp.HandlerFor(reg, ...)) or, as here, directly. Series appear
// once a table has recorded something.
func ExampleRecorder_Collect() {
	rec := metrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(rec)

	writeThroughBttl(rec) // one write of two cells, one refused write

	fams, err := reg.Gather() // sorted by name, then by labels
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		switch f.GetName() {
		case metrics.WritesTotal, metrics.CellsWrittenTotal, metrics.RefusalsTotal:
			for _, m := range f.GetMetric() {
				fmt.Println(f.GetName(), labels(m), m.GetCounter().GetValue())
			}
		}
	}
	// Output:
	// bttl_cells_written_total family=meta strategy=unmanaged table=users 1
	// bttl_cells_written_total family=session strategy=one-second table=users 1
	// bttl_refusals_total family=session reason=server_timestamp table=users 1
	// bttl_writes_total table=users 1
}

// ttlclient calls Table once per opened table and records through the
// TableRecorder it returns. Code that writes around the client (a bulk
// loader, say) can record its own work the same way.
func ExampleRecorder_Table() {
	rec := metrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(rec)

	tr := rec.Table("users", ttlclient.Schema{"session": strategy.OneSecond(), "meta": strategy.Unmanaged()})
	tr.Write(2 * time.Microsecond) // the time spent before the RPC
	tr.CellWritten("session", strategy.KindOneSecond, time.Hour)
	tr.CellWritten("meta", strategy.KindUnmanaged, 0)
	// A family outside the schema is recorded as "": labels stay bounded.
	tr.Refused("typo", ttlclient.RefusalReason(ttlclient.ErrUnknownFamily))

	fmt.Println("writes:", gathered(reg, metrics.WritesTotal))
	fmt.Println("cells: ", gathered(reg, metrics.CellsWrittenTotal))
	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() == metrics.RefusalsTotal {
			fmt.Println("refused:", labels(f.GetMetric()[0]))
		}
	}
	// Output:
	// writes: 1
	// cells:  2
	// refused: family= reason=unknown_family table=users
}

// With an OpenTelemetry SDK MeterProvider the same figures reach any
// OpenTelemetry exporter; here a ManualReader reads them back. The
// instruments carry OpenTelemetry's names (OTelWrites, ...), which its
// Prometheus exporter turns into the Prometheus names.
func ExampleWithMeterProvider() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader() // in production: a periodic reader and an exporter
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)

	rec := metrics.New(metrics.WithMeterProvider(mp))
	writeThroughBttl(rec) // one write of two cells, one refused write

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				total := int64(0)
				for _, dp := range sum.DataPoints {
					total += dp.Value
				}
				fmt.Println(m.Name, total) // in the order the instruments were created
			}
		}
	}
	// Output:
	// bttl.writes 1
	// bttl.cells_written 2
	// bttl.refusals 1
}

// writeThroughBttl writes to a table of an in-process emulator through a
// ttlclient client recording to rec: one write of two cells, and one write
// refused before any RPC.
func writeThroughBttl(rec ttlclient.Recorder) {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	client := ttlclient.Wrap(h.Raw, ttlclient.WithClock(h.Clock), ttlclient.WithRecorder(rec),
		ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance))
	defer client.Close()
	schema := ttlclient.Schema{"session": strategy.OneSecond(), "meta": strategy.Unmanaged()}
	if err := h.CreateTable(ctx, "users", schema); err != nil {
		panic(err)
	}
	tbl, err := client.Open(context.Background(), "users", schema)
	if err != nil {
		panic(err)
	}
	m := ttlclient.NewMutation()
	m.SetTTL("session", "token", time.Minute, []byte("abc"))
	m.Set("meta", "owner", 0, []byte("ada"))
	if err := tbl.Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}
	bad := ttlclient.NewMutation()
	bad.Set("session", "token", bigtable.ServerTime, []byte("abc"))
	if err := tbl.Apply(ctx, "user#1", bad); err == nil {
		panic("a server timestamp on a one-second family was accepted")
	}
}

// labels formats a series' labels as name=value, sorted by name.
func labels(m *dto.Metric) string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(out, " ")
}

// The Recorder counts the wire guard's refusals too: give it to
// wireguard.WithRecorder, and they go to bttl_refusals_total with
// ttlclient's labels.
func ExampleRecorder_GuardRefused() {
	rec := metrics.New()
	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": {"session": strategy.OneSecond()}},
		wireguard.WithRecorder(rec))
	if err != nil {
		panic(err)
	}
	_ = guard // install with guard.ClientOptions() on a plain client

	// What the guard calls on a refusal:
	rec.GuardRefused("sessions", "session", "server_timestamp")
	reg := prometheus.NewRegistry()
	reg.MustRegister(rec)
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == metrics.RefusalsTotal {
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output: bttl_refusals_total 1
}
