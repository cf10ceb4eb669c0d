package rules

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

var update = flag.Bool("update", false, "rewrite the table of docs/design.md#refusal-status-codes from the registry")

// sentinelName is how the docs name a registry row's sentinel: qualified
// by its package outside internal/rules (whose sentinels ttlclient
// re-exports under the same names).
func sentinelName(t *testing.T, err error) string {
	t.Helper()
	named := map[error]string{
		strategy.ErrInvalidPolicy: "strategy.ErrInvalidPolicy", strategy.ErrUnsupportedGCRule: "strategy.ErrUnsupportedGCRule",
		strategy.ErrInvalidTTL: "strategy.ErrInvalidTTL", strategy.ErrTimestampOverflow: "strategy.ErrTimestampOverflow",
		strategy.ErrBeforeEpoch: "strategy.ErrBeforeEpoch", strategy.ErrInvalidSequence: "strategy.ErrInvalidSequence",
		strategy.ErrWrongCellOption: "strategy.ErrWrongCellOption", strategy.ErrTTLTooLong: "strategy.ErrTTLTooLong",
		strategy.ErrServerTimestamp: "strategy.ErrServerTimestamp", strategy.ErrAlreadyExpired: "strategy.ErrAlreadyExpired",
		filters.ErrFilterTooLarge: "filters.ErrFilterTooLarge", filters.ErrCellTooLargeToPin: "filters.ErrCellTooLargeToPin",
		gcrule.ErrMismatch: "gcrule.ErrMismatch",
	}
	if n, ok := named[err]; ok {
		return n
	}
	for name, e := range ownSentinels(t) {
		if e == err {
			return name
		}
	}
	t.Fatalf("registry row for %v: sentinel not declared", err)
	return ""
}

// ownSentinels is every Err* variable of errors.go, by name.
func ownSentinels(t *testing.T) map[string]error {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	byName := map[string]error{}
	values := map[string]error{}
	for i := range Registry {
		values[Registry[i].Err.Error()] = Registry[i].Err
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && strings.HasPrefix(id.Name, "Err") && id.Obj != nil && id.Obj.Kind == ast.Var {
			byName[id.Name] = nil
		}
		return true
	})
	for i := range Registry {
		// Match by identity through the declared variables.
		for name := range byName {
			if v := ownByName(name); v == Registry[i].Err {
				byName[name] = v
			}
		}
	}
	return byName
}

func ownByName(name string) error {
	return map[string]error{
		"ErrUnknownFamily": ErrUnknownFamily, "ErrServerAssignedTimestamp": ErrServerAssignedTimestamp, "ErrNilMutation": ErrNilMutation,
		"ErrEmptyMutation": ErrEmptyMutation, "ErrNestedCondition": ErrNestedCondition, "ErrConditionalInBulk": ErrConditionalInBulk,
		"ErrEmptyRowKey": ErrEmptyRowKey, "ErrRowKeyTooLong": ErrRowKeyTooLong, "ErrValueTooLarge": ErrValueTooLarge, "ErrTooManyMutations": ErrTooManyMutations,
		"ErrInvalidTimestampRange": ErrInvalidTimestampRange, "ErrTimestampGranularity": ErrTimestampGranularity,
		"ErrNoAdminClient": ErrNoAdminClient, "ErrTableNotFound": ErrTableNotFound,
		"ErrNotApplicable":  ErrNotApplicable,
		"ErrReservedColumn": ErrReservedColumn, "ErrNoWriteTime": ErrNoWriteTime, "ErrCellMoved": ErrCellMoved, "ErrCannotPersist": ErrCannotPersist,
		"ErrReadOnlyView": ErrReadOnlyView, "ErrUnfilteredSQL": ErrUnfilteredSQL, "ErrSQLUnknownTable": ErrSQLUnknownTable,
		"ErrNotDialed": ErrNotDialed, "ErrUnclassifiable": ErrUnclassifiable,
		"ErrSessionDataPlane": ErrSessionDataPlane, "ErrUndeclaredMaterializedView": ErrUndeclaredMaterializedView,
		"ErrSchemaMismatch": ErrSchemaMismatch, "ErrVerifyProbe": ErrVerifyProbe, "ErrGuardNotInstalled": ErrGuardNotInstalled,
		"ErrTransactionsNotAllowed": ErrTransactionsNotAllowed, "ErrReadOnlyProfile": ErrReadOnlyProfile,
	}[name]
}

const (
	tableStart = "<!-- refusal registry: generated from internal/rules.Registry (go test ./internal/rules -update) -->"
	tableEnd   = "<!-- end of refusal registry -->"
)

func renderTable(t *testing.T) string {
	var b strings.Builder
	b.WriteString(tableStart + "\n\n")
	b.WriteString("| sentinel (ttlclient's unless qualified) | gRPC code | reason (metric, ErrorInfo) | wire guard rule | docs |\n|---|---|---|---|---|\n")
	for _, r := range Registry {
		b.WriteString("| `" + sentinelName(t, r.Err) + "` | `" + r.Code.String() + "` | `" + r.Metric + "` | `" + r.Rule + "` | [" + r.Anchor + "](#" + r.Anchor + ") |\n")
	}
	b.WriteString("\n" + tableEnd)
	return b.String()
}

// The table of docs/design.md#refusal-status-codes is the registry, row
// for row: each refusal's sentinel, code, reason, guard rule and anchor.
func TestDocsTableIsTheRegistry(t *testing.T) {
	const path = "../../docs/design.md"
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(doc)
	i, j := strings.Index(s, tableStart), strings.Index(s, tableEnd)
	require.True(t, i >= 0 && j > i, "docs/design.md has no generated registry table")
	want := renderTable(t)
	got := s[i : j+len(tableEnd)]
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(s[:i]+want+s[j+len(tableEnd):]), 0o644))
		return
	}
	assert.Equal(t, want, got, "run go test ./internal/rules -update")
	for _, r := range Registry {
		assert.Contains(t, s, `<a id="`+r.Anchor+`"></a>`, "anchor of %s", r.Metric)
	}
}

// Every row has its own sentinel, metric reason and rule: one event is
// counted under one reason, whichever path refuses it.
func TestRegistryRowsAreDistinct(t *testing.T) {
	errs, metrics, rules := map[error]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range Registry {
		assert.False(t, errs[r.Err], "sentinel %v twice", r.Err)
		assert.False(t, metrics[r.Metric], "reason %s twice", r.Metric)
		assert.False(t, rules[r.Rule], "rule %s twice", r.Rule)
		assert.Regexp(t, `^[a-z]+(_[a-z]+)*$`, r.Metric)
		assert.Regexp(t, `^[a-z]+(-[a-z]+)*$`, r.Rule)
		errs[r.Err], metrics[r.Metric], rules[r.Rule] = true, true, true
	}
	for name := range ownSentinels(t) {
		assert.NotNil(t, Of(ownByName(name)), "%s has no registry row", name)
	}
}
