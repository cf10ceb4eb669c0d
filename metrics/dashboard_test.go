package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/metrics"
)

// exported is every sample name the collector exposes once a table is
// open (histograms as their _bucket, _sum and _count series).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	rec := metrics.New()
	tr := rec.Table("t", schema())
	tr.Refused(famOne, "server_timestamp") // refusal series appear on the first refusal
	tr.VerifySkipped()                     // and the skipped-verification one on the first skip
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(rec))
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]bool{}
	for _, f := range fams {
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[f.GetName()+s] = true
			}
			continue
		}
		out[f.GetName()] = true
	}
	return out
}

// exprs collects every "expr" and "query"/"definition" string in the
// dashboard, wherever it is nested.
func exprs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if s, ok := val.(string); ok && (k == "expr" || k == "query" || k == "definition") {
				*out = append(*out, s)
				continue
			}
			exprs(val, out)
		}
	case []any:
		for _, val := range x {
			exprs(val, out)
		}
	}
}

// The dashboard's queries name only metrics the collector exports, and
// cover the figures the dashboard is for.
func TestDashboardQueriesUseExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("dashboards/bttl.json")
	require.NoError(t, err)
	var dash map[string]any
	require.NoError(t, json.Unmarshal(raw, &dash))
	var queries []string
	exprs(dash, &queries)
	require.NotEmpty(t, queries)

	have := exported(t)
	name := regexp.MustCompile(`\bbttl_[a-z0-9_]+`)
	used := map[string]bool{}
	for _, q := range queries {
		for _, n := range name.FindAllString(q, -1) {
			used[n] = true
			assert.True(t, have[n], "the dashboard queries %s, which the collector does not export (query %q)", n, q)
		}
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("dashboard metrics: %v", names)
	for _, n := range []string{
		metrics.ExpiredNotCollectedTotal, metrics.GCLagSeconds + "_bucket", metrics.RefusalsTotal,
		metrics.WriteTTLSeconds + "_bucket", metrics.ReadAddedLatencySeconds + "_bucket", metrics.WriteAddedLatencySeconds + "_bucket",
	} {
		assert.True(t, used[n], "the dashboard has no panel over %s", n)
	}
}

// The names follow Prometheus conventions (units in the name, _total on
// counters), as promlint checks them.
func TestNamesPassPromlint(t *testing.T) {
	rec := metrics.New()
	rec.Table("t", schema()).Refused("", "nil_mutation")
	problems, err := testutil.CollectAndLint(rec)
	require.NoError(t, err)
	assert.Empty(t, problems)
	for n := range exported(t) {
		assert.Regexp(t, `^bttl_`, n)
	}
}
