// Package typecheck type-checks Go snippets against this module's compiled
// packages, for tests proving that what the docs forbid does not compile
// (an option given where it has no meaning). It uses go/types with the
// export data `go list -export` builds, so it runs offline, from the
// module cache, and sees the packages exactly as a caller's build would.
package typecheck

import (
	"errors"
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
)

// Checker type-checks snippets importing a fixed set of packages.
type Checker struct {
	imports []string
	exports map[string]string // import path -> export data file
}

// New builds imports (and their dependencies) with go list -export.
func New(imports ...string) (*Checker, error) {
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}, imports...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list -export: %w", err)
	}
	c := &Checker{imports: imports, exports: map[string]string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "=")
		c.exports[path] = file
	}
	return c, nil
}

// Expr type-checks expr as a package-level var's value, in a file
// importing the Checker's packages; nil when it compiles (an import expr
// does not use is not an error).
func (c *Checker) Expr(expr string) error {
	var b strings.Builder
	b.WriteString("package p\n\nimport (\n")
	for _, imp := range c.imports {
		fmt.Fprintf(&b, "\t%q\n", imp)
	}
	b.WriteString(")\n\n")
	fmt.Fprintf(&b, "\nvar _ = %s\n", expr)
	return c.check(b.String())
}

func (c *Checker) check(src string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file := c.exports[path]
		if file == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(file)
	})
	var errs []error
	conf := types.Config{Importer: imp, Error: func(err error) {
		// The snippet need not use every import the Checker has.
		if !strings.Contains(err.Error(), "imported and not used") {
			errs = append(errs, err)
		}
	}}
	_, _ = conf.Check("p", fset, []*ast.File{f}, nil)
	return errors.Join(errs...)
}
