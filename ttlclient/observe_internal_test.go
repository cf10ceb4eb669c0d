package ttlclient

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sentinelNames lists the Err* variables declared in a source file.
func sentinelNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if len(n.Name) > 3 && n.Name[:3] == "Err" {
					names = append(names, n.Name)
				}
			}
		}
	}
	return names
}

// packageSentinelNames is every sentinel declared in the package's
// non-test files, then those of strategy, gcrule and filters its refusals
// wrap, each once: a sentinel declared beside its feature (ErrCellMoved in
// companion.go) is found as well as errors.go's.
func packageSentinelNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	files = append(files, "../strategy/errors.go", "../gcrule/gcrule.go", "../filters/size.go", "../filters/cell.go")
	var names []string
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, n := range sentinelNames(t, f) {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	require.NotEmpty(t, names)
	return names
}

// Every sentinel of the package (any non-test file) and of
// strategy/errors.go has its own stable snake_case reason. A sentinel
// added later fails this test until it is named in refusalReasons.
func TestEverySentinelHasAReason(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[string]string{}
	all := packageSentinelNames(t)
	for _, name := range all {
		err, ok := sentinelsByName[name]
		if !assert.True(t, ok, "sentinel %s has no reason in refusalReasons (add it, and to sentinelsByName)", name) {
			continue
		}
		reason := RefusalReason(fmt.Errorf("context: %w", &CellError{Err: err}))
		assert.Regexp(t, snake, reason, name)
		assert.NotEqual(t, "other", reason, name)
		if prev, dup := seen[reason]; dup && prev != name {
			t.Errorf("%s and %s share the reason %q", prev, name, reason)
		}
		seen[reason] = name
	}
	assert.Equal(t, "other", RefusalReason(errors.New("not a refusal")))
}
