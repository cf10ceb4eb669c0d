package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// Before and during a migration a family's schema says one-second (or a
// shorter default expiry) while its GC rule is still max age 60d and its cells
// carry real write times. Those cells are not on their rule yet, not expired
// stock GC failed to collect: audited through the real path (audit.Scan,
// Report.NoteGCRules on the table's rules) and served to a real Prometheus,
// only the rule-mismatch alerts fire (the one-second family's
// BttlOneSecondRealTimestamps, the default-expiry family's
// BttlFamilyNotOnItsRule), never BttlExpiredStockOverAWeek (issue 35, item 2).
func TestNotOnRuleFiresOnlyTheMismatchAlerts(t *testing.T) {
	bin := tool(t, "prometheus")
	rules := alertRules(t)
	h := bttestharness.New(t)
	ctx := context.Background()
	const tbl = "legacy"
	sixtyDays := bigtable.MaxAgePolicy(60 * 24 * time.Hour)
	require.NoError(t, h.Admin.CreateTable(ctx, tbl))
	for _, fam := range []string{"session", "clicks", "fresh"} {
		require.NoError(t, h.Admin.CreateColumnFamily(ctx, tbl, fam))
		require.NoError(t, h.Admin.SetGCPolicy(ctx, tbl, fam, sixtyDays))
	}
	schema := strategy.Schema{
		"session": strategy.OneSecond(),                        // rule still max age 60d
		"clicks":  strategy.DefaultExpiry(24 * time.Hour),      // rule still max age 60d
		"fresh":   strategy.DefaultExpiry(60 * 24 * time.Hour), // on its rule
	}
	now := time.Now()
	// A legacy writer's cells: real write times 10 to 40 days old.
	raw := h.Raw.Open(tbl)
	for i := 0; i < 20; i++ {
		at := bigtable.Time(now.Add(-time.Duration(10+i%31) * 24 * time.Hour)).TruncateToMilliseconds()
		m := bigtable.NewMutation()
		m.Set("session", "c", at, []byte("v"))
		m.Set("clicks", "c", at, []byte("v"))
		m.Set("fresh", "c", at, []byte("v"))
		require.NoError(t, raw.Apply(ctx, fmt.Sprintf("user#%02d", i), m))
	}
	rep, err := audit.Scan(ctx, raw, tbl, schema, bigtable.Time(now))
	require.NoError(t, err)
	fams, err := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance).Families(ctx, tbl)
	require.NoError(t, err)
	rep.NoteGCRules(fams)
	var file bytes.Buffer
	require.NoError(t, audit.WriteMetrics(&file, []*audit.Report{rep}))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	})
	mux.HandleFunc("/audit", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(file.Bytes())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p := startPrometheus(t, bin, ln.Addr().String())

	want := []string{"BttlFamilyNotOnItsRule legacy/clicks", "BttlOneSecondRealTimestamps legacy/session"}
	active := func() []string {
		var data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
			} `json:"alerts"`
		}
		p.Get(t, "/api/v1/alerts", url.Values{}, &data)
		var out []string
		for _, a := range data.Alerts {
			out = append(out, a.Labels["alertname"]+" "+a.Labels["table"]+"/"+a.Labels["family"])
		}
		sort.Strings(out)
		return out
	}
	// Every alert reads the same scrape of the audit file: once the
	// expected ones are active, any other one would be too. Polled a few
	// more evaluations (1s apart) all the same.
	var got []string
	deadline := time.Now().Add(60 * time.Second) // generous: the whole suite shares 2 cores in CI
	for time.Now().Before(deadline) {
		if got = active(); len(got) >= len(want) {
			break
		}
		time.Sleep(250 * time.Millisecond) // polling Prometheus, not waiting for a clock
	}
	p.WaitRulesEvaluated(t, len(rules))
	for i := 0; i < 3; i++ {
		require.Equal(t, want, active(), "active alerts, with a family not on its rule full of legacy cells (first seen: %v)", got)
		time.Sleep(time.Second) // one evaluation interval: polling Prometheus
	}
}
