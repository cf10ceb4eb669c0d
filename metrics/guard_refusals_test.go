package metrics_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// The Recorder is a wireguard.Recorder, without package metrics importing
// the guard.
var _ wireguard.Recorder = (*metrics.Recorder)(nil)

// The wire guard recorded no metrics, so a plain client refused by it raised
// no alert. With WithRecorder its refusals count into bttl_refusals_total with
// ttlclient's labels: the table, a family of its schema (or ""), the rule in
// snake_case; never keys or columns (issue 27 ("guard refusals rising")).
func TestGuardRefusalsCountIntoRefusalsTotal(t *testing.T) {
	rec := metrics.New()
	tbl, cleanup := guardedTable(t, rec)
	defer cleanup()
	ctx := context.Background()

	// A server timestamp on a one-second family, twice; a family outside
	// the schema (its name must not become a label).
	m := bigtable.NewMutation()
	m.Set("session", "token", bigtable.ServerTime, []byte("v"))
	for i := 0; i < 2; i++ {
		err := tbl.Apply(ctx, "user#secret-key", m)
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	}
	m = bigtable.NewMutation()
	m.Set("nosuchfamily", "c", bigtable.Now(), []byte("v"))
	require.Equal(t, codes.FailedPrecondition, status.Code(tbl.Apply(ctx, "r", m)))

	assert.Equal(t, 2.0, promValue(t, rec, metrics.RefusalsTotal, "table", "t", "family", "session", "reason", "server_timestamp"))
	assert.Equal(t, 1.0, promValue(t, rec, metrics.RefusalsTotal, "table", "t", "family", "", "reason", "unknown_family"))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(rec))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				assert.NotContains(t, l.GetValue(), "secret", "no row key in a label")
				assert.NotContains(t, l.GetValue(), "nosuchfamily", "no family outside the schema in a label")
			}
		}
	}
}

// The real-Prometheus neighbour of TestEveryAlertGoesActiveOnRealPrometheus
// for the guard: a plain client writing through the wire guard, refused at
// each scrape, makes BttlRefusalsRising active with the guard's labels.
func TestGuardRefusalsFireOnRealPrometheus(t *testing.T) {
	bin := tool(t, "prometheus")
	rec := metrics.New()
	tbl, cleanup := guardedTable(t, rec)
	defer cleanup()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(rec))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mux := http.NewServeMux()
	serve := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		// A legacy writer, refused by the guard at each scrape.
		m := bigtable.NewMutation()
		m.Set("session", "token", bigtable.ServerTime, []byte("v"))
		if err := tbl.Apply(r.Context(), "user#1", m); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("the guard let a server timestamp through: %v", err)
		}
		serve.ServeHTTP(w, r)
	})
	mux.HandleFunc("/audit", func(http.ResponseWriter, *http.Request) {})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p := startPrometheus(t, bin, ln.Addr().String())

	type alert struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
	}
	var found *alert
	deadline := time.Now().Add(60 * time.Second)
	for found == nil && time.Now().Before(deadline) {
		var data struct {
			Alerts []alert `json:"alerts"`
		}
		p.Get(t, "/api/v1/alerts", url.Values{}, &data)
		for i, a := range data.Alerts {
			if a.Labels["alertname"] == "BttlRefusalsRising" {
				found = &data.Alerts[i]
			}
		}
		if found == nil {
			time.Sleep(250 * time.Millisecond) // polling Prometheus, not waiting for a clock
		}
	}
	require.NotNil(t, found, "BttlRefusalsRising never active")
	assert.Equal(t, "t", found.Labels["table"])
	assert.Equal(t, "session", found.Labels["family"])
	assert.Equal(t, "server_timestamp", found.Labels["reason"])
	assert.Contains(t, []string{"pending", "firing"}, found.State)
}

// guardedTable is table "t" (session: one-second) on bttest, opened by a
// plain client through a wire guard recording on rec.
func guardedTable(t *testing.T, rec wireguard.Recorder) (*bigtable.Table, func()) {
	t.Helper()
	h := bttestharness.New(t)
	ctx := context.Background()
	schema := strategy.Schema{"session": strategy.OneSecond()}
	require.NoError(t, h.CreateTable(ctx, "t", schema))
	g, err := wireguard.New(map[string]strategy.Schema{"t": schema}, wireguard.WithRecorder(rec))
	require.NoError(t, err)
	c, err := h.DialDataClient(ctx, g.DialOptions()...)
	require.NoError(t, err)
	return c.Open("t"), func() { _ = c.Close() }
}
