package metrics_test

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/bttl/bttl/internal/promtest"
)

const (
	rulesFile     = "alerts/bttl-rules.yaml"
	rulesTestFile = "alerts/bttl-rules_test.yaml"
)

// tool finds a Prometheus binary (promtest.Tool).
func tool(t *testing.T, name string) string {
	t.Helper()
	return promtest.Tool(t, name)
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// alertRules reads the alerting rules: name to expression.
func alertRules(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var f ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &f))
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "only alerting rules here (expression %q)", r.Expr)
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// Acceptance 2: promtool accepts the rules, and their unit tests pass.
func TestAlertRulesPromtool(t *testing.T) {
	promtool := tool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		require.NoError(t, err, "promtool %v:\n%s", args, out)
		t.Logf("promtool %v:\n%s", args, out)
	}
}

// Every alert the rules define has a unit test where it fires and one
// where it does not; the rules cover what users of the dashboard expect.
func TestAlertRulesUnitTestsCoverEachAlert(t *testing.T) {
	rules := alertRules(t)
	for _, want := range []string{"BttlGCLagOverAWeek", "BttlRefusalsRising", "BttlShadowReadsFailing", "BttlShadowReadsDropped", "BttlVerifySkipped", "BttlExpiredStockOverAWeek"} {
		assert.Contains(t, rules, want)
	}
	raw, err := os.ReadFile(rulesTestFile)
	require.NoError(t, err)
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Cases []struct {
				Alert string `yaml:"alertname"`
				Exp   []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &tests))
	require.Equal(t, []string{"bttl-rules.yaml"}, tests.RuleFiles)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, g := range tests.Tests {
		for _, c := range g.Cases {
			assert.Contains(t, rules, c.Alert, "a unit test names an alert the rules lack")
			if len(c.Exp) > 0 {
				fires[c.Alert] = true
			} else {
				quiet[c.Alert] = true
			}
		}
	}
	for name := range rules {
		assert.True(t, fires[name], "no unit test where %s fires", name)
		assert.True(t, quiet[name], "no unit test where %s stays quiet", name)
	}
}

// The rules name only metrics the collector (or audit.WriteMetrics)
// exports.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	have := exportedWithAudit(t)
	name := regexp.MustCompile(`\bbttl_[a-z0-9_]+`)
	for alert, expr := range alertRules(t) {
		for _, n := range name.FindAllString(expr, -1) {
			assert.True(t, have[n], "alert %s queries %s, which nothing exports", alert, n)
		}
	}
}
