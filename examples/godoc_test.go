package examples

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// documentedPackages must give every exported function and method a
// runnable Example in its package documentation (go doc, pkg.go.dev).
var documentedPackages = []string{"strategy", "filters", "ttlclient", "bttest_harness", "metrics", "gcrule", "provision", "schemafile", "wireguard", "audit", "scan", "migrate", "changestream/expiry"}

// notEntryPoints are methods that implement a standard interface; their
// type's examples cover them.
var notEntryPoints = map[string]bool{"String": true, "Error": true, "Unwrap": true, "Format": true, "MarshalJSON": true, "UnmarshalJSON": true}

// TestEveryEntryPointHasAnExample lists the exported functions and methods
// without an Example: adding a public entry point means adding its example.
func TestEveryEntryPointHasAnExample(t *testing.T) {
	for _, dir := range documentedPackages {
		t.Run(dir, func(t *testing.T) {
			pkg := docPackage(t, filepath.Join("..", dir))
			assert.NotEmpty(t, strings.TrimSpace(pkg.Doc), "package %s has no package doc (doc.go)", dir)
			var missing []string
			check := func(name string, examples []*doc.Example) {
				if len(examples) == 0 {
					missing = append(missing, name)
				}
			}
			for _, f := range pkg.Funcs {
				check(f.Name, f.Examples)
			}
			for _, typ := range pkg.Types {
				for _, f := range typ.Funcs {
					check(f.Name, f.Examples)
				}
				for _, m := range typ.Methods {
					if !notEntryPoints[m.Name] {
						check(typ.Name+"."+m.Name, m.Examples)
					}
				}
			}
			sort.Strings(missing)
			assert.Empty(t, missing, "package %s: exported entry points without an Example (add ExampleF or ExampleT_M to example_test.go)", dir)
		})
	}
}

// docPackage parses dir, test files included, as go doc sees it.
func docPackage(t *testing.T, dir string) *doc.Package {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		require.NoError(t, err)
		files = append(files, f)
	}
	require.NotEmpty(t, files, "no Go files in %s", dir)
	pkg, err := doc.NewFromFiles(fset, files, "github.com/bttl/bttl/"+filepath.Base(dir))
	require.NoError(t, err)
	return pkg
}
