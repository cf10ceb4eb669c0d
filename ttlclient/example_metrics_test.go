package ttlclient_test

import (
	"cloud.google.com/go/bigtable"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// exShadows is a minimal Recorder: it counts shadow reads and the expired
// cells they find. Package metrics is the real one.
type exShadows struct{ reads, expired, dropped atomic.Int64 }

func (r *exShadows) Table(string, ttlclient.Schema) ttlclient.TableRecorder { return r }
func (r *exShadows) Read(time.Duration)                                     {}
func (r *exShadows) Write(time.Duration)                                    {}
func (r *exShadows) CellWritten(string, strategy.Kind, time.Duration)       {}
func (r *exShadows) Refused(string, string)                                 {}
func (r *exShadows) ExpiredCell(string, strategy.Kind, time.Duration)       { r.expired.Add(1) }
func (r *exShadows) ShadowRead(int, error)                                  { r.reads.Add(1) }
func (r *exShadows) ShadowDropped()                                         { r.dropped.Add(1) }
func (r *exShadows) VerifySkipped()                                         {}

// wait polls until n shadow reads have ended: they run after the reads
// return, on their own goroutines.
func (r *exShadows) wait(n int64) {
	for deadline := time.Now().Add(10 * time.Second); r.reads.Load() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// exExpired starts an emulator whose table "events" holds row "user#1" with
// an expired session cell the server has not collected, and opens it with
// opts.
func exExpired(ctx context.Context, opts ...ttlclient.ClientOption) (*bttestharness.Harness, *ttlclient.Client, *ttlclient.Table) {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	if err := h.CreateTable(ctx, "events", exSchema); err != nil {
		panic(err)
	}
	all := append([]ttlclient.ClientOption{ttlclient.WithClock(h.Clock), ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance)}, opts...)
	client := ttlclient.Wrap(h.Raw, all...)
	tbl, err := client.Open(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	m := ttlclient.NewMutation()
	m.SetTTL("session", "token", time.Minute, []byte("abc"))
	if err := tbl.Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}
	h.Clock.Advance(time.Hour)
	return h, client, tbl
}

func ExampleWithRecorder() {
	ctx := context.Background()
	rec := metrics.New() // OpenTelemetry (global MeterProvider) and Prometheus
	reg := prometheus.NewRegistry()
	reg.MustRegister(rec)
	h, client, tbl := exExpired(ctx, ttlclient.WithRecorder(rec))
	defer h.Close()
	defer client.Close()

	bad := ttlclient.NewMutation()
	bad.Set("session", "token", bigtable.ServerTime, []byte("x")) // no TTL on a one-second family
	fmt.Println("refused:", errors.Is(tbl.Apply(ctx, "user#1", bad), strategy.ErrServerTimestamp))

	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() == metrics.RefusalsTotal {
			for _, m := range f.GetMetric() {
				fmt.Println(f.GetName(), m.GetLabel()[1].GetValue(), m.GetCounter().GetValue())
			}
		}
	}
	// Output:
	// refused: true
	// bttl_refusals_total server_timestamp 1
}

func ExampleWithShadowSampling() {
	ctx := context.Background()
	rec := &exShadows{}
	// Every read here; the default is 1%, and 0 turns shadow reads off.
	h, client, tbl := exExpired(ctx, ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(1))
	defer h.Close()
	defer client.Close()

	row, _ := tbl.ReadRow(ctx, "user#1")
	rec.wait(1)
	fmt.Println("cells read:", len(row["session"]))
	fmt.Println("expired cells still stored:", rec.expired.Load())
	// Output:
	// cells read: 0
	// expired cells still stored: 1
}

func ExampleWithShadowConcurrency() {
	ctx := context.Background()
	rec := &exShadows{}
	h, client, tbl := exExpired(ctx, ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(1),
		ttlclient.WithShadowConcurrency(1)) // one shadow read at a time per client
	defer h.Close()
	defer client.Close()

	for i := 0; i < 3; i++ {
		_, _ = tbl.ReadRow(ctx, "user#1")
	}
	for rec.reads.Load()+rec.dropped.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	// Reads that found the one slot busy got no shadow read.
	fmt.Println("shadow reads + dropped:", rec.reads.Load()+rec.dropped.Load())
	// Output:
	// shadow reads + dropped: 3
}

func ExampleWithShadowRand() {
	ctx := context.Background()
	rec := &exShadows{}
	draws := []float64{0.5, 0.005, 0.9} // only 0.005 < 0.01 samples its read
	var i atomic.Int64
	h, client, tbl := exExpired(ctx, ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(0.01),
		ttlclient.WithShadowRand(func() float64 { return draws[i.Add(1)-1] }))
	defer h.Close()

	for range draws {
		_, _ = tbl.ReadRow(ctx, "user#1")
	}
	rec.wait(1)
	_ = client.Close() // stops shadow reads; none is left running
	fmt.Println("shadow reads:", rec.reads.Load())
	// Output:
	// shadow reads: 1
}

func ExampleRefusalReason() {
	err := fmt.Errorf("save: %w", &ttlclient.CellError{Table: "events", Family: "session", Err: strategy.ErrAlreadyExpired})
	fmt.Println(ttlclient.RefusalReason(err))
	fmt.Println(ttlclient.RefusalReason(errors.New("not a refusal")))
	// Output:
	// already_expired
	// other
}
