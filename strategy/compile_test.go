package strategy_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The options are typed by the strategies that take them, so what the
// docs forbid does not compile: each snippet is type-checked (go/types)
// against the package's compiled export data, which go list -export
// builds from the module cache, offline.
func TestOptionsThatContradictDoNotCompile(t *testing.T) {
	refused := map[string]string{
		// Sequence takes no option: its only parameter is n.
		"sequence max versions": `strategy.Sequence(3, strategy.WithMaxVersions(5))`,
		"sequence write time":   `strategy.Sequence(3, strategy.WithWriteTime())`,
		// DefaultExpiry's d is its default TTL.
		"default TTL beside D": `strategy.DefaultExpiry(48*time.Hour, strategy.WithDefaultTTL(time.Hour))`,
		// The clamp is WithMaxTTL's second argument, the debounce
		// WithIdleTTL's: neither can be given alone.
		"cap without its clamp choice": `strategy.OneSecond(strategy.WithMaxTTL(time.Hour))`,
		"idle TTL without debounce":    `strategy.OneSecond(strategy.WithIdleTTL(time.Hour))`,
		// Unmanaged takes nothing.
		"unmanaged option": `strategy.Unmanaged(strategy.SingleValue())`,
	}
	accepted := map[string]string{
		"sequence":          `strategy.Sequence(3)`,
		"default expiry":    `strategy.DefaultExpiry(48*time.Hour, strategy.WithMaxVersions(5), strategy.WithMaxTTL(72*time.Hour, strategy.ClampLonger))`,
		"one-second":        `strategy.OneSecond(strategy.WithDefaultTTL(time.Hour), strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce))`,
		"age option shared": `strategy.OneSecond(strategy.AgeOption(strategy.SingleValue()))`,
	}
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}",
		"github.com/bttl/bttl/strategy", "time").Output()
	require.NoError(t, err, "go list -export")
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "=")
		exports[path] = file
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(file)
	})
	check := func(expr string) error {
		src := "package p\n\nimport (\n\t\"time\"\n\n\t\"github.com/bttl/bttl/strategy\"\n)\n\nvar _ = time.Second\n\nvar _ = " + expr + "\n"
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		require.NoError(t, err, expr)
		_, err = (&types.Config{Importer: imp}).Check("p", fset, []*ast.File{f}, nil)
		return err
	}
	for name, expr := range accepted {
		// Also proves the importer finds the package: a refusal below is
		// the type checker's, not a missing import.
		require.NoError(t, check(expr), name)
	}
	for name, expr := range refused {
		err := check(expr)
		if assert.Error(t, err, "%s: %s compiles", name, expr) {
			t.Logf("%s: %v", name, err)
		}
	}
}
