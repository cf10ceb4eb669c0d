// Package promtest runs a real Prometheus for tests: the prometheus
// binary on a loopback port, scraping a target's /metrics and /audit (the
// textfile a bttl audit writes, as node_exporter's textfile collector
// would serve it) every second and evaluating a rule file every second,
// with helpers for its HTTP API. Tests of several packages share it
// (metrics, cmd/bttl); it is for tests only.
package promtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/internal/testenv"
)

// Tool finds a Prometheus binary (prometheus, promtool). Outside CI a
// missing one skips the test, saying so; in CI (CI=true) it fails it:
// .ci/run installs the package.
func Tool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	tool := testenv.Prometheus
	if name == testenv.Promtool.Name {
		tool = testenv.Promtool
	}
	testenv.Missing(t, tool, err)
	return ""
}

// Server is a running Prometheus.
type Server struct {
	base string
}

// Start runs the prometheus binary bin on a free loopback port with a
// config of its own (1s scrapes of target's /metrics, job "bttl", and
// /audit, job "bttl-audit"; the alerting rules of rulesFile evaluated
// every second) and storage in a temporary directory, and stops it when
// the test ends.
func Start(t testing.TB, bin, rulesFile, target string) *Server {
	t.Helper()
	rules, err := filepath.Abs(rulesFile)
	require.NoError(t, err)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: bttl
    static_configs:
      - targets: [%q]
  - job_name: bttl-audit
    metrics_path: /audit
    static_configs:
      - targets: [%q]
`, rules, target, target)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(cfg), 0o644))

	// A free port: taken from the kernel, released, handed to Prometheus.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	var stderr syncBuffer
	cmd := exec.Command(bin,
		"--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--web.console.templates="+dir,
		"--web.console.libraries="+dir,
	)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", stderr.String())
		}
	})

	p := &Server{base: "http://" + addr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, stderr.String())
		default:
		}
		resp, err := http.Get(p.base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		require.True(t, time.Now().Before(deadline), "prometheus not ready after 30s: %v\n%s", err, stderr.String())
		time.Sleep(100 * time.Millisecond)
	}
	return p
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Sample is one series of an instant query's result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Float is the sample's value.
func (s Sample) Float(t testing.TB) float64 {
	t.Helper()
	str, ok := s.Value[1].(string)
	require.True(t, ok, "value %v", s.Value)
	v, err := strconv.ParseFloat(str, 64)
	require.NoError(t, err)
	return v
}

// Get calls the HTTP API and decodes its data; any error (a query that
// does not parse, say) fails the test.
func (p *Server) Get(t testing.TB, path string, params url.Values, data any) {
	t.Helper()
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, "success", body.Status, "%s %v: %s: %s", path, params, body.ErrorType, body.Error)
	require.NoError(t, json.Unmarshal(body.Data, data))
}

// Query runs an instant query; vector results come back as samples, a
// scalar as one sample without labels.
func (p *Server) Query(t testing.TB, expr string) []Sample {
	t.Helper()
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	p.Get(t, "/api/v1/query", url.Values{"query": {expr}}, &data)
	switch data.ResultType {
	case "vector":
		var out []Sample
		require.NoError(t, json.Unmarshal(data.Result, &out))
		return out
	case "scalar":
		var v [2]any
		require.NoError(t, json.Unmarshal(data.Result, &v))
		return []Sample{{Metric: map[string]string{}, Value: v}}
	}
	t.Fatalf("query %s: result type %s", expr, data.ResultType)
	return nil
}

// LabelValues is the label values API: label's values on the series
// match selects.
func (p *Server) LabelValues(t testing.TB, label, match string) []string {
	t.Helper()
	var out []string
	p.Get(t, "/api/v1/label/"+label+"/values", url.Values{"match[]": {match}}, &out)
	return out
}

// Alert is one alert Prometheus holds, pending or firing.
type Alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// Alerts is every alert pending or firing.
func (p *Server) Alerts(t testing.TB) []Alert {
	t.Helper()
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	p.Get(t, "/api/v1/alerts", url.Values{}, &data)
	return data.Alerts
}

// WaitRulesEvaluated waits until Prometheus has evaluated the n alerting
// rules it loaded, and checks none failed.
func (p *Server) WaitRulesEvaluated(t testing.TB, n int) {
	t.Helper()
	type rule struct {
		Name      string `json:"name"`
		Health    string `json:"health"`
		LastError string `json:"lastError"`
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var data struct {
			Groups []struct {
				Rules []rule `json:"rules"`
			} `json:"groups"`
		}
		p.Get(t, "/api/v1/rules", url.Values{"type": {"alert"}}, &data)
		var rules []rule
		for _, g := range data.Groups {
			rules = append(rules, g.Rules...)
		}
		evaluated := 0
		for _, r := range rules {
			if r.Health != "unknown" {
				evaluated++
			}
		}
		if len(rules) == n && evaluated == n {
			for _, r := range rules {
				assert.Equal(t, "ok", r.Health, "rule %s: %s", r.Name, r.LastError)
			}
			return
		}
		require.True(t, time.Now().Before(deadline), "rules loaded %d of %d, evaluated %d", len(rules), n, evaluated)
		time.Sleep(200 * time.Millisecond)
	}
}
