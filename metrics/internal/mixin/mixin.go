// Package mixin renders bttl's monitoring mixin: the Prometheus alerting
// rules, their promtool unit tests, the Grafana dashboard and the alerts'
// runbook, all from one source, metrics/mixin/mixin.yaml, the way
// monitoring mixins are built. `go generate ./metrics` writes them; a test
// fails when a generated file differs from what the source gives, so the
// four cannot drift apart.
package mixin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Source is the mixin's source file.
type Source struct {
	Dashboard struct {
		Title       string   `yaml:"title"`
		UID         string   `yaml:"uid"`
		Description string   `yaml:"description"`
		Tags        []string `yaml:"tags"`
	} `yaml:"dashboard"`
	// Rows are the dashboard's rows of panels; a last row, "Alerts", is
	// made of the alerts' panels.
	Rows   []Row   `yaml:"rows"`
	Alerts []Alert `yaml:"alerts"`
	// Procedures are runbook sections that answer no alert (a migration
	// job, undoing a wrong TTL), after the alerts'.
	Procedures []Procedure `yaml:"procedures"`
}

// Procedure is a runbook section of its own: a title (its anchor is the
// title in lower case, words joined by '-') and Markdown.
type Procedure struct {
	Title string `yaml:"title"`
	Body  string `yaml:"body"`
}

// Row is a titled row of panels, two per line.
type Row struct {
	Title  string  `yaml:"row"`
	Panels []Panel `yaml:"panels"`
}

// Panel is a dashboard panel. Every query selects $table.
type Panel struct {
	Title       string   `yaml:"title"`
	Description string   `yaml:"description"`
	Type        string   `yaml:"type"` // timeseries (default) or heatmap
	Unit        string   `yaml:"unit"`
	Threshold   *float64 `yaml:"threshold,omitempty"` // a red line, where an alert fires
	Targets     []Target `yaml:"targets"`
}

// Target is one query of a panel.
type Target struct {
	Expr   string `yaml:"expr"`
	Legend string `yaml:"legend"`
}

// Alert is an alerting rule with its panel, its unit tests and its
// runbook entry.
type Alert struct {
	Name        string `yaml:"name"`
	Comment     string `yaml:"comment"` // why the rule exists, above it in the rules file
	Expr        string `yaml:"expr"`
	For         string `yaml:"for,omitempty"`
	Severity    string `yaml:"severity"`
	Summary     string `yaml:"summary"`
	Description string `yaml:"description"`
	// Runbook is the alert's entry in docs/runbook.md (Markdown): what to
	// check and what to do.
	Runbook string     `yaml:"runbook"`
	Panel   Panel      `yaml:"panel"`
	Tests   []RuleTest `yaml:"tests"`
}

// RuleTest is one promtool test group of an alert.
type RuleTest struct {
	Name        string        `yaml:"name"`
	InputSeries []InputSeries `yaml:"input_series"`
	Cases       []Case        `yaml:"cases"`
}

// InputSeries is a promtool input series.
type InputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// Case is the alert's expected state at one evaluation time.
type Case struct {
	EvalTime  string     `yaml:"eval_time"`
	ExpAlerts []ExpAlert `yaml:"exp_alerts"`
}

// ExpAlert is one expected firing alert. The runbook_url annotation is
// added to every one.
type ExpAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

// Paths of the source and of the files generated from it, relative to the
// repository's root.
const (
	SourcePath    = "metrics/mixin/mixin.yaml"
	RulesPath     = "metrics/alerts/bttl-rules.yaml"
	RuleTestsPath = "metrics/alerts/bttl-rules_test.yaml"
	DashboardPath = "metrics/dashboards/bttl.json"
	RunbookPath   = "docs/runbook.md"
)

// RunbookURL is where an alert's runbook_url points: its section of
// docs/runbook.md on the repository's main branch.
func RunbookURL(alert string) string {
	return "https://github.com/bttl/bttl/blob/main/docs/runbook.md#" + strings.ToLower(alert)
}

// Load reads and checks the source.
func Load(path string) (*Source, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Source
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, s.check()
}

var alertName = regexp.MustCompile(`^Bttl[A-Z][A-Za-z0-9]+$`)

func (s *Source) check() error {
	seen := map[string]bool{}
	for _, a := range s.Alerts {
		switch {
		case !alertName.MatchString(a.Name):
			return fmt.Errorf("alert %q: names are BttlCamelCase", a.Name)
		case seen[a.Name]:
			return fmt.Errorf("alert %s twice", a.Name)
		case a.Expr == "" || a.Summary == "" || a.Description == "" || strings.TrimSpace(a.Runbook) == "":
			return fmt.Errorf("alert %s: expr, summary, description and runbook are required", a.Name)
		case a.Severity != "info" && a.Severity != "warning" && a.Severity != "critical":
			return fmt.Errorf("alert %s: severity %q (want info, warning or critical)", a.Name, a.Severity)
		case !strings.Contains(a.Panel.Title, "(alert "+a.Name+" "):
			return fmt.Errorf("alert %s: its panel's title must say \"(alert %s ...)\"", a.Name, a.Name)
		}
		seen[a.Name] = true
	}
	for _, p := range s.Procedures {
		if p.Title == "" || strings.TrimSpace(p.Body) == "" || seen[p.Title] {
			return fmt.Errorf("procedure %q: a title of its own and a body are required", p.Title)
		}
		seen[p.Title] = true
	}
	return nil
}

// Files renders every generated file: path (relative to the repository's
// root) to content.
func (s *Source) Files() (map[string][]byte, error) {
	rules, err := s.rules()
	if err != nil {
		return nil, err
	}
	tests, err := s.ruleTests()
	if err != nil {
		return nil, err
	}
	dash, err := s.dashboard()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{RulesPath: rules, RuleTestsPath: tests, DashboardPath: dash, RunbookPath: s.runbook()}, nil
}

// Write renders the files under root, the repository's root.
func Write(root string) error {
	s, err := Load(filepath.Join(root, SourcePath))
	if err != nil {
		return err
	}
	files, err := s.Files()
	if err != nil {
		return err
	}
	for p, b := range files {
		if err := os.WriteFile(filepath.Join(root, p), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

const generated = "Generated from metrics/mixin/mixin.yaml by `go generate ./metrics`: edit the source, not this file."

func (s *Source) rules() ([]byte, error) {
	var items []*yaml.Node
	for _, a := range s.Alerts {
		r := struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for,omitempty"`
			Labels      map[string]string `yaml:"labels"`
			Annotations yaml.Node         `yaml:"annotations"`
		}{Alert: a.Name, Expr: strings.TrimRight(a.Expr, "\n") + "\n", For: a.For, Labels: map[string]string{"severity": a.Severity}}
		if err := r.Annotations.Encode(orderedMap("summary", a.Summary, "description", a.Description, "runbook_url", RunbookURL(a.Name))); err != nil {
			return nil, err
		}
		var n yaml.Node
		if err := n.Encode(r); err != nil {
			return nil, err
		}
		n.HeadComment = wrap(a.Comment, 72)
		items = append(items, &n)
	}
	rulesSeq := &yaml.Node{Kind: yaml.SequenceNode, Content: items}
	group := mapping("name", scalar("bttl"), "rules", rulesSeq)
	doc := mapping("groups", &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{group}})
	doc.HeadComment = "Prometheus alerting rules over bttl's metrics (package metrics, and the\n" +
		"bttl_audit_* gauges of audit.WriteMetrics). Load with rule_files in\n" +
		"prometheus.yml. bttl-rules_test.yaml holds their unit tests (promtool test\n" +
		"rules); each alert's runbook_url leads to its entry in docs/runbook.md.\n" + generated
	return encodeYAML(doc)
}

func (s *Source) ruleTests() ([]byte, error) {
	type alertCase struct {
		EvalTime  string     `yaml:"eval_time"`
		AlertName string     `yaml:"alertname"`
		ExpAlerts []ExpAlert `yaml:"exp_alerts"`
	}
	type group struct {
		Name         string        `yaml:"name"`
		Interval     string        `yaml:"interval"`
		InputSeries  []InputSeries `yaml:"input_series"`
		AlertRuleTst []alertCase   `yaml:"alert_rule_test"`
	}
	var groups []group
	for _, a := range s.Alerts {
		for _, t := range a.Tests {
			g := group{Name: a.Name + ": " + t.Name, Interval: "1m", InputSeries: t.InputSeries}
			for _, c := range t.Cases {
				exp := make([]ExpAlert, 0, len(c.ExpAlerts))
				for _, e := range c.ExpAlerts {
					ann := map[string]string{"runbook_url": RunbookURL(a.Name)}
					for k, v := range e.ExpAnnotations {
						ann[k] = v
					}
					exp = append(exp, ExpAlert{ExpLabels: e.ExpLabels, ExpAnnotations: ann})
				}
				g.AlertRuleTst = append(g.AlertRuleTst, alertCase{EvalTime: c.EvalTime, AlertName: a.Name, ExpAlerts: exp})
			}
			groups = append(groups, g)
		}
	}
	var n yaml.Node
	if err := n.Encode(struct {
		RuleFiles          []string `yaml:"rule_files"`
		EvaluationInterval string   `yaml:"evaluation_interval"`
		Tests              []group  `yaml:"tests"`
	}{[]string{"bttl-rules.yaml"}, "1m", groups}); err != nil {
		return nil, err
	}
	n.HeadComment = "promtool test rules bttl-rules_test.yaml: each alert of bttl-rules.yaml\n" +
		"firing, and staying quiet, on input series.\n" + generated
	return encodeYAML(&n)
}

func (s *Source) runbook() []byte {
	var b strings.Builder
	b.WriteString("# Runbook: bttl's alerts\n\n<!-- " + generated + " -->\n\n")
	b.WriteString("One section per alert of `metrics/alerts/bttl-rules.yaml`; each alert's\n`runbook_url` annotation links here. The dashboard (`metrics/dashboards/bttl.json`)\nhas a panel per alert, in its last row, showing what the alert evaluates.\n" +
		"Procedures that answer no alert follow the alerts' sections.\n")
	for _, a := range s.Alerts {
		fmt.Fprintf(&b, "\n## %s\n\n", a.Name)
		fmt.Fprintf(&b, "Severity **%s**", a.Severity)
		if a.For != "" {
			fmt.Fprintf(&b, ", after %s", a.For)
		}
		fmt.Fprintf(&b, ". %s\n\n```promql\n%s\n```\n\n%s\n", a.Comment, strings.TrimSpace(a.Expr), strings.TrimSpace(a.Runbook))
	}
	for _, p := range s.Procedures {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", p.Title, strings.TrimSpace(p.Body))
	}
	return []byte(b.String())
}

// Grafana's JSON model, as much of it as the dashboard uses.
type (
	dsRef struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	grafanaTarget struct {
		RefID        string `json:"refId"`
		Datasource   dsRef  `json:"datasource"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
		Format       string `json:"format,omitempty"`
	}
	grafanaPanel struct {
		ID          int             `json:"id"`
		Type        string          `json:"type"`
		Title       string          `json:"title"`
		Description string          `json:"description,omitempty"`
		Collapsed   *bool           `json:"collapsed,omitempty"`
		Datasource  *dsRef          `json:"datasource,omitempty"`
		GridPos     gridPosJSON     `json:"gridPos"`
		FieldConfig any             `json:"fieldConfig,omitempty"`
		Options     any             `json:"options,omitempty"`
		Targets     []grafanaTarget `json:"targets,omitempty"`
		Panels      []any           `json:"panels,omitempty"`
	}
	gridPosJSON struct {
		H int `json:"h"`
		W int `json:"w"`
		X int `json:"x"`
		Y int `json:"y"`
	}
)

var ds = dsRef{Type: "prometheus", UID: "${datasource}"}

func (s *Source) dashboard() ([]byte, error) {
	rows := append([]Row(nil), s.Rows...)
	alertRow := Row{Title: "Alerts (metrics/alerts/bttl-rules.yaml): what each alert evaluates"}
	for _, a := range s.Alerts {
		alertRow.Panels = append(alertRow.Panels, a.Panel)
	}
	rows = append(rows, alertRow)
	var panels []grafanaPanel
	id, y := 1, 0
	for _, r := range rows {
		collapsed := false
		panels = append(panels, grafanaPanel{ID: id, Type: "row", Title: r.Title, Collapsed: &collapsed, GridPos: gridPosJSON{1, 24, 0, y}, Panels: []any{}})
		id, y = id+1, y+1
		for i, p := range r.Panels {
			gp, err := panel(id, p, gridPosJSON{8, 12, 12 * (i % 2), y + 8*(i/2)})
			if err != nil {
				return nil, fmt.Errorf("row %q: %w", r.Title, err)
			}
			panels = append(panels, gp)
			id++
		}
		y += 8 * ((len(r.Panels) + 1) / 2)
	}
	d := map[string]any{
		"__inputs": []any{map[string]any{
			"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "pluginId": "prometheus", "pluginName": "Prometheus",
			"description": "The Prometheus that scrapes the applications using bttl (and node_exporter's textfile collector, for bttl audit -metrics-out).",
		}},
		"__requires": []any{
			map[string]any{"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
			map[string]any{"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
			map[string]any{"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
			map[string]any{"type": "panel", "id": "heatmap", "name": "Heatmap", "version": ""},
		},
		"title": s.Dashboard.Title, "uid": s.Dashboard.UID, "description": s.Dashboard.Description + " " + generated,
		"tags": s.Dashboard.Tags, "schemaVersion": 39, "version": 3, "editable": true,
		"time": map[string]any{"from": "now-6h", "to": "now"}, "refresh": "1m",
		"templating": map[string]any{"list": []any{
			map[string]any{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source",
				"current": map[string]any{"text": "${DS_PROMETHEUS}", "value": "${DS_PROMETHEUS}"}, "hide": 0},
			// Every bttl series, the audit's gauges included: a table that
			// only bttl audit has seen is listed too.
			map[string]any{"name": "table", "type": "query", "datasource": ds, "label": "Table",
				"includeAll": true, "multi": true, "allValue": ".*", "refresh": 2,
				"query":      map[string]any{"query": TableVariableQuery, "refId": "tables"},
				"definition": TableVariableQuery},
		}},
		"panels": panels,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// TableVariableQuery fills the dashboard's $table variable: the table
// label of every bttl series.
const TableVariableQuery = `label_values({__name__=~"bttl_.+"}, table)`

func panel(id int, p Panel, pos gridPosJSON) (grafanaPanel, error) {
	if p.Unit == "" {
		return grafanaPanel{}, fmt.Errorf("panel %q has no unit", p.Title)
	}
	if len(p.Targets) == 0 {
		return grafanaPanel{}, fmt.Errorf("panel %q has no query", p.Title)
	}
	gp := grafanaPanel{ID: id, Type: p.Type, Title: p.Title, Description: p.Description, Datasource: &ds, GridPos: pos}
	if gp.Type == "" {
		gp.Type = "timeseries"
	}
	for i, t := range p.Targets {
		if !strings.Contains(t.Expr, `table=~"$table"`) {
			return grafanaPanel{}, fmt.Errorf("panel %q: query %q does not select $table", p.Title, t.Expr)
		}
		gt := grafanaTarget{RefID: string(rune('A' + i)), Datasource: ds, Expr: t.Expr, LegendFormat: t.Legend}
		if gp.Type == "heatmap" {
			gt.Format = "heatmap"
		}
		gp.Targets = append(gp.Targets, gt)
	}
	switch gp.Type {
	case "timeseries":
		defaults := map[string]any{"unit": p.Unit}
		if p.Threshold != nil {
			defaults["thresholds"] = map[string]any{"mode": "absolute", "steps": []any{
				map[string]any{"color": "green", "value": nil}, map[string]any{"color": "red", "value": *p.Threshold}}}
			defaults["custom"] = map[string]any{"thresholdsStyle": map[string]any{"mode": "line"}}
		}
		gp.FieldConfig = map[string]any{"defaults": defaults, "overrides": []any{}}
		gp.Options = map[string]any{
			"legend":  map[string]any{"displayMode": "table", "placement": "bottom", "calcs": []string{"lastNotNull", "max"}},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		}
	case "heatmap":
		// The buckets come from Prometheus (calculate false, rows from le):
		// Grafana de-accumulates them for the heatmap format.
		gp.FieldConfig = map[string]any{"defaults": map[string]any{"unit": p.Unit, "custom": map[string]any{"scaleDistribution": map[string]any{"type": "linear"}}}, "overrides": []any{}}
		gp.Options = map[string]any{
			"calculate": false, "cellGap": 1,
			"color":        map[string]any{"mode": "scheme", "scheme": "Oranges", "exponent": 0.5, "fill": "dark-orange", "scale": "exponential", "steps": 64, "reverse": false},
			"yAxis":        map[string]any{"axisPlacement": "left", "unit": p.Unit, "reverse": false},
			"rowsFrame":    map[string]any{"layout": "le"},
			"cellValues":   map[string]any{"unit": "short"},
			"showValue":    "never",
			"legend":       map[string]any{"show": true},
			"tooltip":      map[string]any{"mode": "single", "yHistogram": true, "showColorScale": false},
			"exemplars":    map[string]any{"color": "rgba(255,0,255,0.7)"},
			"filterValues": map[string]any{"le": 1e-09},
		}
	default:
		return grafanaPanel{}, fmt.Errorf("panel %q: type %q (want timeseries or heatmap)", p.Title, p.Type)
	}
	return gp, nil
}

// YAML helpers: nodes keep the order they are built in, and comments.

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

func mapping(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i < len(kv); i += 2 {
		n.Content = append(n.Content, scalar(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return n
}

// orderedMap is a mapping node of string pairs, in the order given.
func orderedMap(kv ...string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i < len(kv); i += 2 {
		v := scalar(kv[i+1])
		v.Style = yaml.DoubleQuotedStyle
		n.Content = append(n.Content, scalar(kv[i]), v)
	}
	return n
}

func encodeYAML(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// wrap folds text into lines of at most width characters.
func wrap(text string, width int) string {
	var lines []string
	var line string
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}
