package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	"github.com/bttl/bttl/changestream/gclag"
	"github.com/bttl/bttl/internal/promtest"
	"github.com/bttl/bttl/ttlclient"
)

// Grafana's variables, as the dashboard's queries get them: all tables,
// and the rate interval Grafana picks for a 1s scrape (at least four
// scrapes).
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "10s",
	"$__interval", "1s",
	"$__range", "1m",
	"$table", ".*",
)

// Acceptance 1 and 3: a real Prometheus scrapes a workload where cells
// expire uncollected (read path) and a textfile written by
// audit.WriteMetricsFile (the stock); every query of the dashboard and of
// the alert rules then runs through its HTTP API.
func TestDashboardAndAlertsOnRealPrometheus(t *testing.T) {
	bin := tool(t, "prometheus")
	start := time.Now()

	w := startWorkload(t)
	p := startPrometheus(t, bin, w.addr)

	// Every dashboard query, variables substituted, with the panel it
	// belongs to and the labels its legend shows.
	type query struct {
		panel, expr string
		labels      []string
	}
	d := loadDashboard(t)
	legendLabel := regexp.MustCompile(`\{\{\s*([a-z_]+)\s*\}\}`)
	raw, err := os.ReadFile("dashboards/bttl.json")
	require.NoError(t, err)
	var full struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &full))
	var dash []query
	for _, pn := range full.Panels {
		for _, tg := range pn.Targets {
			q := query{panel: pn.Title, expr: grafanaVars.Replace(tg.Expr)}
			for _, m := range legendLabel.FindAllStringSubmatch(tg.LegendFormat, -1) {
				q.labels = append(q.labels, m[1])
			}
			dash = append(dash, q)
		}
	}
	var targets int
	for _, pn := range d.Panels {
		targets += len(pn.Targets)
	}
	require.Len(t, dash, targets)
	require.NotEmpty(t, dash)

	// Wait, with a deadline, until every dashboard query returns data: the
	// scrapes have happened and the counters have moved between them.
	var empty []string
	deadline := time.Now().Add(90 * time.Second) // generous: CI runs every package at once on 2 cores
	for {
		empty = empty[:0]
		for _, q := range dash {
			if res := p.Query(t, q.expr); len(res) == 0 {
				empty = append(empty, q.panel+": "+q.expr)
			}
		}
		if len(empty) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond) // polling Prometheus, not waiting for a clock
	}
	t.Logf("dashboard queries answered %s after the workload started", time.Since(start).Round(time.Millisecond))

	// Each query returns series; the legend's labels are on each, with this
	// test's tables.
	for _, q := range dash {
		res := p.Query(t, q.expr)
		if !assert.NotEmpty(t, res, "no data for panel %q: %s", q.panel, q.expr) {
			continue
		}
		for _, s := range res {
			for _, l := range q.labels {
				assert.NotEmpty(t, s.Metric[l], "panel %q: a series lacks label %s: %v", q.panel, l, s.Metric)
				if l == "table" {
					assert.Contains(t, []string{table, "stock", "unruled", "unverified", idleTable}, s.Metric[l], "panel %q", q.panel)
				}
			}
		}
	}

	// The named figures, exactly where the workload planted them.
	perFamily := func(expr string) map[string]float64 {
		out := map[string]float64{}
		for _, s := range p.Query(t, expr) {
			out[s.Metric["table"]+"/"+s.Metric["family"]] = s.Float(t)
		}
		return out
	}
	walked := perFamily(grafanaVars.Replace(`sum by (table, family) (rate(bttl_shadow_read_expired_cells_total{table=~"$table"}[$__rate_interval]))`))
	assert.Greater(t, walked[table+"/"+famOne], 0.0, "expired cells walked past: %v", walked)
	assert.Greater(t, walked[table+"/"+famDef], 0.0, "expired cells walked past: %v", walked)
	lag := perFamily(grafanaVars.Replace(`histogram_quantile(0.5, sum by (le, table, family) (rate(bttl_expired_not_collected_gc_lag_seconds_bucket{table=~"$table"}[$__rate_interval])))`))
	// Planted: expired 30 minutes after writing, read two hours after, so
	// the lag is 1h30m: in the (1h, 6h] bucket.
	assert.True(t, lag[table+"/"+famOne] > 3600 && lag[table+"/"+famOne] <= 6*3600, "GC lag p50: %v", lag)
	stock := perFamily(`bttl_audit_expired_not_collected_cells{job="bttl-audit",table="stock"}`)
	assert.Equal(t, map[string]float64{"stock/" + famOne: 0, "stock/" + famDef: plantedStock}, stock,
		"Prometheus serves the audit's stock, exactly the planted cells")
	notified := perFamily(`max by (table, family) (bttl_expired_not_collected_cells)`)
	assert.Equal(t, map[string]float64{table + "/" + famOne: 1, table + "/" + famDef: 0}, notified,
		"Prometheus serves the expiry notifier's stock: the one announced cell")
	idle := map[string]float64{}
	for _, s := range p.Query(t, grafanaVars.Replace(`sum by (table, family, result) (rate(bttl_idle_refreshes_total{table=~"$table"}[$__rate_interval]))`)) {
		idle[s.Metric["table"]+"/"+s.Metric["family"]+"/"+s.Metric["result"]] = s.Float(t)
	}
	assert.Greater(t, idle[idleTable+"/"+famIdle+"/refreshed"], 0.0, "time-to-idle refreshes: %v", idle)
	assert.Greater(t, idle[idleTable+"/"+famIdle+"/skipped"], 0.0, "time-to-idle skips: %v", idle)
	refusals := p.Query(t, `sum by (table, family, reason) (increase(bttl_refusals_total[1m]))`)
	require.NotEmpty(t, refusals)
	assert.Equal(t, map[string]string{"table": table, "family": famOne, "reason": "server_timestamp"}, refusals[0].Metric)

	// Every metric a query names is one Prometheus scraped from the
	// collector or the audit file.
	scraped := map[string]bool{}
	for _, s := range p.Query(t, `group by (__name__) ({__name__=~"bttl_.+"})`) {
		scraped[s.Metric["__name__"]] = true
	}
	name := regexp.MustCompile(`\bbttl_[a-z0-9_]+`)
	alerts := alertRules(t)
	var all []string
	for _, q := range dash {
		all = append(all, q.expr)
	}
	for _, e := range alerts {
		all = append(all, e)
	}
	for _, e := range all {
		for _, n := range name.FindAllString(e, -1) {
			assert.True(t, scraped[n], "%s is not exported (query %s); scraped: %v", n, e, keys(scraped))
		}
	}

	// The alert rules' expressions parse and evaluate; the ones the
	// workload triggers return series.
	for alert, expr := range alerts {
		res := p.Query(t, expr)
		switch alert {
		case "BttlRefusalsRising", "BttlVerifySkipped":
			assert.NotEmpty(t, res, "alert %s: the workload should trigger it", alert)
		}
	}
	// Prometheus loaded the rule file and evaluates every rule without
	// error.
	p.WaitRulesEvaluated(t, len(alerts))

	// The template variable's query, through the label values API.
	values := p.LabelValues(t, "table", "bttl_reads_total")
	assert.Contains(t, values, table)
	t.Logf("whole test: %s", time.Since(start).Round(time.Millisecond))
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type workload struct {
	addr string
}

// startWorkload serves /metrics (a Recorder on a registry) and /audit (the
// file audit.WriteMetricsFile wrote) on a loopback port, and keeps reading
// expired cells, writing and being refused until the test ends.
func startWorkload(t *testing.T) *workload {
	t.Helper()
	e := newEnv(t, nil, ttlclient.WithShadowSampling(1))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(e.rec))

	// Planted: rows whose one-second and default-expiry cells expire 30
	// minutes after writing, and live ones.
	for i := 0; i < 5; i++ {
		m := ttlclient.NewMutation()
		m.SetTTL(famOne, "a", 30*time.Minute, []byte("v"))
		m.SetTTL(famDef, "a", 30*time.Minute, []byte("v"))
		m.SetTTL(famDef, "b", 10*time.Hour, []byte("v"))
		m.SetVersion(famSeq, "a", int64(i+1), []byte("v"))
		require.NoError(t, e.tbl.Apply(e.ctx, fmt.Sprintf("r%d", i), m))
	}
	// The stock, measured by an audit at the same instant, written as a
	// textfile.
	rep := auditStock(t, e, "stock")
	// A table whose families have no GC rule, audited with its rules read:
	// what the no-rule gauge and alert watch.
	unruled := auditUnruled(t, e, "unruled")
	e.h.Clock.Advance(2 * time.Hour)
	file := filepath.Join(t.TempDir(), "bttl.prom")
	require.NoError(t, audit.WriteMetricsFile(file, []*audit.Report{rep, unruled}))

	// A table opened without verifying its GC rules.
	require.NoError(t, e.h.CreateTable(e.ctx, "unverified", schema()))
	_, err := e.client.Open(context.Background(), "unverified", schema(), ttlclient.WithoutVerify())
	require.NoError(t, err)

	// A table whose family has an idle TTL: each tick below writes a
	// cell due for a refresh (1m left of a 1h idle TTL) in a new column,
	// and reads the row: one refresh, the earlier (refreshed) cells
	// skipped.
	require.NoError(t, e.h.CreateTable(e.ctx, idleTable, idleSchema()))
	idleTbl, err := e.client.Open(context.Background(), idleTable, idleSchema())
	require.NoError(t, err)

	// The change stream's GC records, through the real recorder
	// (changestream/gclag): each tick below hands it a GC deletion of a
	// default-expiry cell collected ten days after its expiry.
	gcRec, err := gclag.New("t", schema(), gclag.WithRegisterer(reg))
	require.NoError(t, err)
	// The stock of announced cells not yet collected, through a real
	// expiry notifier (changestream/expiry): t/one holds one.
	streamStock(t, reg)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/audit", func(w http.ResponseWriter, _ *http.Request) {
		// What node_exporter's textfile collector would serve.
		b, err := os.ReadFile(file)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(b)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()

	// The load: every 100ms a read walking past the expired cells, a
	// write, a refused write. Bounded in count and time; stops with the
	// test.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 3000; i++ { // at most 5 minutes
			_ = e.tbl.ReadRows(ctx, bigtable.PrefixRange("r"), func(bigtable.Row) bool { return true })
			m := ttlclient.NewMutation()
			m.SetTTL(famOne, "w", time.Hour, []byte("v"))
			m.Set(famDef, "w", bigtable.ServerTime, []byte("v"))
			_ = e.tbl.Apply(ctx, fmt.Sprintf("w%d", i%10), m)
			bad := ttlclient.NewMutation()
			bad.Set(famOne, "w", bigtable.ServerTime, []byte("v"))
			_ = e.tbl.Apply(ctx, "w0", bad)
			im := ttlclient.NewMutation()
			im.SetTTL(famIdle, fmt.Sprintf("c%d", i), time.Minute, []byte("v"))
			_ = idleTbl.Apply(ctx, "session", im)
			_, _ = idleTbl.ReadRow(ctx, "session")
			_ = gcRec.Handle(ctx, gcChange(famDef, time.Now().Add(-10*24*time.Hour-time.Hour))) // D = 1h
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = srv.Close()
	})
	return &workload{addr: ln.Addr().String()}
}

// startPrometheus runs a real Prometheus (promtest.Start) scraping
// target's /metrics and /audit and evaluating the alert rules.
func startPrometheus(t *testing.T, bin, target string) *promtest.Server {
	t.Helper()
	return promtest.Start(t, bin, rulesFile, target)
}
