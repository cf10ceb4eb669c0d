package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// optionPackages are the packages that may read a strategy.Policy's option
// accessors (strategy/options.go): strategy itself, the one rule set, the
// schema file (which writes a policy back out) and the test model (which
// re-derives each option's effect from the formula). Every other package
// asks the policy what the family does (strategy/behaviour.go), so that
// adding a family option touches these four packages and no other
// (CONTRIBUTING.md, "Adding a strategy option, end to end").
var optionPackages = []string{"strategy", "internal/rules", "schemafile", "testsuite/internal/model"}

// optionAccessors is the zero-argument methods of Policy declared in
// root/strategy/options.go: one per option parameter, so a new option's
// accessor is covered as soon as it is written.
func optionAccessors(root string) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "strategy", "options.go"), nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && recvName(fd) == "Policy" && fd.Type.Params.NumFields() == 0 && fd.Name.IsExported() {
			out[fd.Name.Name] = true
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("strategy/options.go declares no option accessor")
	}
	return out, nil
}

func recvName(fd *ast.FuncDecl) string {
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// optionReads is every call of an option accessor (x.Name() with no
// arguments) in the non-test Go files under root outside optionPackages,
// as "file:line: Name", and every zero-argument method of another type
// named like an accessor (which would make the first list guess wrong).
// The check is by name, not by type, so that it needs no type checker;
// the second list keeps the names unambiguous.
func optionReads(root string, accessors map[string]bool) (reads, clashes []string, err error) {
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		allowed := false
		for _, p := range optionPackages {
			allowed = allowed || dir == p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.FuncDecl:
				if x.Recv != nil && accessors[x.Name.Name] && x.Type.Params.NumFields() == 0 &&
					!(dir == "strategy" && recvName(x) == "Policy") {
					clashes = append(clashes, fmt.Sprintf("%s:%d: %s.%s", rel, fset.Position(x.Pos()).Line, recvName(x), x.Name.Name))
				}
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && len(x.Args) == 0 && accessors[sel.Sel.Name] && !allowed {
					reads = append(reads, fmt.Sprintf("%s:%d: %s", rel, fset.Position(x.Pos()).Line, sel.Sel.Name))
				}
			}
			return true
		})
		return nil
	})
	sort.Strings(reads)
	sort.Strings(clashes)
	return reads, clashes, err
}

// TestOptionAccessorsStayInTheirPackages is issue 34's rule, kept: no
// package outside optionPackages reads a policy's option fields, so a new
// option touches only those packages.
func TestOptionAccessorsStayInTheirPackages(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	accessors, err := optionAccessors(root)
	require.NoError(t, err)
	reads, clashes, err := optionReads(root, accessors)
	require.NoError(t, err)
	for _, r := range reads {
		t.Errorf("%s: an option accessor read outside %s; ask the policy what the family does (strategy/behaviour.go)", r, strings.Join(optionPackages, ", "))
	}
	for _, c := range clashes {
		t.Errorf("%s: a method named like a strategy.Policy option accessor; the check finds accessors by name, rename it", c)
	}
}

// TestOptionReadsFindsEachRead plants accessor calls in a small tree, so a
// check that finds nothing cannot pass.
func TestOptionReadsFindsEachRead(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("strategy/options.go", "package strategy\n\ntype Policy struct{ n int }\n\n"+
		"func (p Policy) Versions() int { return p.n }\n\nfunc (p Policy) scale(k int) int { return p.n * k }\n\n"+
		"func (p Policy) Within(k int) bool { return k <= p.n }\n")
	write("strategy/use.go", "package strategy\n\nfunc use(p Policy) int { return p.Versions() }\n")
	write("schemafile/s.go", "package schemafile\n\nfunc f(p interface{ Versions() int }) int { return p.Versions() }\n")
	write("audit/a.go", "package audit\n\nfunc f(p interface{ Versions() int }) int {\n\treturn p.Versions()\n}\n")
	write("audit/a_test.go", "package audit\n\nfunc g(p interface{ Versions() int }) int { return p.Versions() }\n")
	write("filters/x.go", "package filters\n\ntype T struct{ Versions int }\n\nfunc (T) Versions2() int { return 0 }\n\nfunc h(t T) int { return t.Versions }\n")
	write("gcrule/g.go", "package gcrule\n\ntype N struct{}\n\nfunc (N) Versions() int { return 0 }\n")

	accessors, err := optionAccessors(root)
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"Versions": true}, accessors, "exported zero-argument Policy methods only")
	reads, clashes, err := optionReads(root, accessors)
	require.NoError(t, err)
	assert.Equal(t, []string{"audit/a.go:4: Versions"}, reads, "allowed packages, tests and fields are not reads")
	assert.Equal(t, []string{"gcrule/g.go:5: N.Versions"}, clashes)
}

// optionConstructors is the exported functions of root/strategy/options.go
// that return an option (an AgeOption or a OneSecondOption).
func optionConstructors(root string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "strategy", "options.go"), nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Type.Results.NumFields() != 1 {
			continue
		}
		if id, ok := fd.Type.Results.List[0].Type.(*ast.Ident); ok && strings.HasSuffix(id.Name, "Option") {
			out = append(out, fd.Name.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// calledFrom is the names X called as strategy.X(...) in file.
func calledFrom(file string) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "strategy" {
					out[sel.Sel.Name] = true
				}
			}
		}
		return true
	})
	return out, nil
}

// TestEveryOptionHasAMatrixColumn: each option strategy offers is given in
// one of the model's option columns (model.OptionColumns), which the
// composition matrix runs on every path and both servers; an option
// without one would ship untested against the model.
func TestEveryOptionHasAMatrixColumn(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	options, err := optionConstructors(root)
	require.NoError(t, err)
	require.Contains(t, options, "WithMaxVersions", "the reader finds the options")
	called, err := calledFrom(filepath.Join(root, "testsuite", "internal", "model", "options.go"))
	require.NoError(t, err)
	for _, o := range options {
		assert.True(t, called[o], "strategy.%s has no column in testsuite/internal/model/options.go's OptionColumns", o)
	}
}
