package metrics_test

import (
	"bytes"
	"net"
	"net/http"
	"net/url"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	"github.com/bttl/bttl/changestream/gclag"
	"github.com/bttl/bttl/metrics"
)

// Every alert of the generated rules goes active (pending, or firing when
// it has no "for") on a real Prometheus, from a planted state: read-path
// series that grow at each scrape as a troubled application's would, and
// an audit file (audit.WriteMetrics of reports holding the findings).
func TestEveryAlertGoesActiveOnRealPrometheus(t *testing.T) {
	bin := tool(t, "prometheus")
	rules := alertRules(t)

	reg := prometheus.NewPedanticRegistry()
	counter := func(name string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "planted"}, labels)
		reg.MustRegister(c)
		return c
	}
	lag := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metrics.GCLagSeconds, Help: "planted", Buckets: metrics.GCLagBuckets}, []string{"table", "family", "strategy"})
	reg.MustRegister(lag)
	// The change stream's GC lag, as changestream/gclag exports it.
	streamLag := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: gclag.MetricName, Help: "planted", Buckets: gclag.DefaultBuckets}, []string{"table", "family"})
	reg.MustRegister(streamLag)
	refusals := counter(metrics.RefusalsTotal, "table", "family", "reason")
	shadows := counter(metrics.ShadowReadsTotal, "table")
	failed := counter(metrics.ShadowReadsFailedTotal, "table")
	dropped := counter(metrics.ShadowReadsDroppedTotal, "table")
	skipped := counter(metrics.VerifySkippedTotal, "table")
	idle := counter(metrics.IdleRefreshesTotal, "table", "family", "result")
	idleFail := counter(metrics.IdleRefreshFailuresTotal, "table", "family", "reason")
	// Each scrape of /metrics moves the planted counters on, so every rate
	// over the rules' windows is what a troubled application shows.
	grow := func() {
		for i := 0; i < 10; i++ {
			lag.WithLabelValues("planted", "old", "default-expiry").Observe(10 * 86400) // ten days past expiry
			streamLag.WithLabelValues("planted", "old").Observe(10 * 86400)
		}
		refusals.WithLabelValues("planted", "session", "server_timestamp").Add(3)
		shadows.WithLabelValues("planted").Add(100)
		failed.WithLabelValues("planted").Add(20)
		dropped.WithLabelValues("planted").Add(50)
		skipped.WithLabelValues("planted").Add(0)
		skipped.WithLabelValues("planted").Inc()
		idle.WithLabelValues("planted", "s", "refreshed").Add(50)
		idle.WithLabelValues("planted", "s", "dropped").Add(50)
		idleFail.WithLabelValues("planted", "s", "transactions_not_allowed").Add(5)
	}

	// The audit file: a table audited three days ago, whose default-expiry
	// family holds cells expired ten days before that audit, and whose
	// sequence family holds real timestamps.
	at := time.Now().Add(-3 * 24 * time.Hour)
	rep := &audit.Report{Table: "planted", Now: bigtable.Time(at), Rows: 1, Families: []audit.Family{
		{Family: "old", Strategy: "default-expiry(D=1h0m0s)", Cells: 5, Expired: 5, OldestExpiry: bigtable.Time(at.Add(-10 * 24 * time.Hour))},
		{Family: "doc", Strategy: "sequence(N=3)", Cells: 4, NotSequence: 2, RealTimes: 2},
		{Family: "session", Strategy: "one-second", Cells: 3, AtOrBeforeNow: 3, GCRule: "max_versions=1"},
		{Family: "lost", Strategy: "one-second", GCRule: audit.NoGCRule},
		{Family: "clicks", Strategy: "default-expiry(D=24h0m0s)", Cells: 7, NotOnRule: 7, GCRule: "max_age=1440h0m0s"},
	}}
	var auditFile bytes.Buffer
	require.NoError(t, audit.WriteMetrics(&auditFile, []*audit.Report{rep}))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mux := http.NewServeMux()
	serve := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		grow()
		serve.ServeHTTP(w, r)
	})
	mux.HandleFunc("/audit", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(auditFile.Bytes())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p := startPrometheus(t, bin, ln.Addr().String())

	type alert struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
	}
	var active map[string]string
	deadline := time.Now().Add(60 * time.Second) // generous: the whole suite shares 2 cores in CI
	for {
		var data struct {
			Alerts []alert `json:"alerts"`
		}
		p.Get(t, "/api/v1/alerts", url.Values{}, &data)
		active = map[string]string{}
		for _, a := range data.Alerts {
			active[a.Labels["alertname"]] = a.State
		}
		if len(active) == len(rules) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond) // polling Prometheus, not waiting for a clock
	}
	var missing []string
	for name := range rules {
		if _, ok := active[name]; !ok {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "alerts never active; active: %v", active)
	for name, state := range active {
		assert.Contains(t, []string{"pending", "firing"}, state, name)
		assert.Contains(t, rules, name, "an active alert the rules do not define")
	}
}
