package ttlclient

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
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

// Every sentinel of the core, in ttlclient/errors.go and
// strategy/errors.go, has its own stable snake_case reason. A sentinel added
// later fails this test until it is named in refusalReasons.
func TestEverySentinelHasAReason(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[string]string{}
	local := sentinelNames(t, "errors.go")
	require.NotEmpty(t, local)
	// ttlclient re-exports every strategy sentinel under the same name.
	all := append(local, sentinelNames(t, "../strategy/errors.go")...)
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
	assert.Len(t, seen, len(refusalReasons), "every reason belongs to a declared sentinel")
	assert.Equal(t, "other", RefusalReason(errors.New("not a refusal")))
}
