package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/changestream/gclag"
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
	rec.Table(idleTable, idleSchema())     // the time-to-idle series exist for a family with an idle TTL
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

	have := exportedWithAudit(t)
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
		audit.MetricExpiredNotCollectedCells, audit.MetricExpiredNotCollectedBytes, audit.MetricOldestExpiry, audit.MetricLiveCells,
		metrics.ShadowReadExpiredCellsTotal, metrics.GCLagSeconds + "_bucket", metrics.RefusalsTotal,
		metrics.WriteTTLSeconds + "_bucket", metrics.ReadAddedLatencySeconds + "_bucket", metrics.WriteAddedLatencySeconds + "_bucket",
		metrics.IdleRefreshesTotal, gclag.MetricName + "_bucket", gclag.MetricName + "_count",
		expiry.StockMetricName,
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

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	Templating struct {
		List []struct {
			Name       string         `json:"name"`
			Type       string         `json:"type"`
			Query      any            `json:"query"`
			Current    map[string]any `json:"current"`
			AllValue   string         `json:"allValue"`
			Definition string         `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Options map[string]any           `json:"options"`
	Targets []struct {
		RefID  string `json:"refId"`
		Expr   string `json:"expr"`
		Format string `json:"format"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile("dashboards/bttl.json")
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	return d
}

// The dashboard imports on a grafana.com-style install (a Prometheus
// input), its heatmap reads Prometheus buckets as buckets, panels do not
// overlap, and every alert of the rules and the audit's stock have panels.
func TestDashboardStructure(t *testing.T) {
	d := loadDashboard(t)
	require.Len(t, d.Inputs, 1)
	assert.Equal(t, "DS_PROMETHEUS", d.Inputs[0].Name)
	assert.Equal(t, "datasource", d.Inputs[0].Type)
	assert.Equal(t, "prometheus", d.Inputs[0].PluginID)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Name == "datasource" {
			assert.Equal(t, "datasource", v.Type)
			assert.Equal(t, "prometheus", v.Query)
			assert.Equal(t, "${DS_PROMETHEUS}", v.Current["value"], "the import input selects the data source")
		}
	}
	assert.True(t, vars["datasource"] && vars["table"], "variables: %v", vars)

	ids := map[int]bool{}
	cells := map[[2]int]int{} // grid cell -> panel id
	titles := ""
	var heatmaps int
	for _, p := range d.Panels {
		assert.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		assert.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "panel %d is wider than the grid", p.ID)
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Errorf("panels %d and %d overlap at %d,%d", other, p.ID, x, y)
				}
				cells[[2]int{x, y}] = p.ID
			}
		}
		if p.Type == "row" {
			continue
		}
		titles += p.Title + "\n"
		require.NotNil(t, p.Datasource, "panel %d has no data source", p.ID)
		assert.Equal(t, "${datasource}", p.Datasource.UID, "panel %d", p.ID)
		require.NotEmpty(t, p.Targets, "panel %d has no query", p.ID)
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			assert.False(t, refs[tg.RefID], "panel %d: refId %s twice", p.ID, tg.RefID)
			refs[tg.RefID] = true
			assert.Contains(t, tg.Expr, `table=~"$table"`, "panel %d ignores the table variable", p.ID)
		}
		if p.Type == "heatmap" {
			heatmaps++
			for _, tg := range p.Targets {
				// Grafana de-accumulates the le buckets only for this format.
				assert.Equal(t, "heatmap", tg.Format, "heatmap panel %d", p.ID)
				assert.Regexp(t, `^sum by \(le\) \((rate|increase)\(bttl_[a-z_]+_bucket\{`, tg.Expr, "heatmap panel %d", p.ID)
			}
			assert.Equal(t, false, p.Options["calculate"], "heatmap panel %d: the buckets come from Prometheus", p.ID)
			legend, _ := p.Options["legend"].(map[string]any)
			assert.NotContains(t, legend, "displayMode", "heatmap panel %d carries time-series legend options", p.ID)
		}
	}
	assert.Equal(t, 1, heatmaps)
	for alert := range alertRules(t) {
		assert.Equal(t, 1, strings.Count(titles, "(alert "+alert+" "), "panels for alert %s:\n%s", alert, titles)
	}
}
