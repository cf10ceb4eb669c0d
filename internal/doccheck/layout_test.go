package doccheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/bttl/bttl"

// layoutRow is one row of CONTRIBUTING.md's layout table.
type layoutRow struct {
	path    string   // a package's directory, or a tree ending in "/"
	imports []string // nil for "nothing"; the cell's text otherwise
	text    string   // the imports cell as written
}

// layoutTable reads the table of CONTRIBUTING.md's Layout section.
func layoutTable(t *testing.T, contributing string) []layoutRow {
	t.Helper()
	_, section, ok := strings.Cut(contributing, "\n## Layout\n")
	require.True(t, ok, "CONTRIBUTING.md has no Layout section")
	section, _, _ = strings.Cut(section, "\n## ")
	code := regexp.MustCompile("`([^`]+)`")
	var rows []layoutRow
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue // not a row, or the header
		}
		row := layoutRow{path: strings.Trim(strings.TrimSpace(cells[1]), "`"), text: strings.TrimSpace(cells[3])}
		for _, m := range code.FindAllStringSubmatch(row.text, -1) {
			row.imports = append(row.imports, m[1])
		}
		rows = append(rows, row)
	}
	require.NotEmpty(t, rows, "no rows in CONTRIBUTING.md's layout table")
	return rows
}

// modulePackages is every package of the module (go list ./...): its
// directory, relative to the root, and what its non-test code imports of
// the module.
func modulePackages(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		dir := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		if dir == "" {
			dir = "."
		}
		imports := []string{}
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module+"/") {
				imports = append(imports, strings.TrimPrefix(imp, module+"/"))
			}
		}
		sort.Strings(imports)
		pkgs[dir] = imports
	}
	return pkgs
}

// TestLayoutTableMatchesThePackages: CONTRIBUTING.md's layout table has a
// row for every package of the module (or a tree row "dir/" covering it),
// every row names a directory that exists, and each package's row lists
// exactly what its non-test code imports of the module. Adding a package
// or an import means adding it to the table.
func TestLayoutTableMatchesThePackages(t *testing.T) {
	root := filepath.Join("..", "..")
	src, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	require.NoError(t, err)
	rows := layoutTable(t, string(src))
	pkgs := modulePackages(t, root)

	byPath := map[string]layoutRow{}
	var trees []string
	for _, r := range rows {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(r.path)))
		assert.NoError(t, err, "the layout table names %s, which does not exist", r.path)
		assert.NotContains(t, byPath, r.path, "two rows for %s", r.path)
		byPath[r.path] = r
		if strings.HasSuffix(r.path, "/") {
			trees = append(trees, r.path)
		}
	}
	for dir, imports := range pkgs {
		row, ok := byPath[dir]
		if !ok {
			covered := false
			for _, tree := range trees {
				covered = covered || strings.HasPrefix(dir+"/", tree)
			}
			assert.True(t, covered, "package %s has no row in CONTRIBUTING.md's layout table", dir)
			continue
		}
		want := row.imports
		if row.text == "nothing" {
			want = []string{}
		}
		sort.Strings(want)
		assert.Equal(t, imports, want, "CONTRIBUTING.md's layout row %s: its imports (this module, non-test) are %q", dir, strings.Join(imports, ", "))
	}
	for _, r := range rows {
		if _, ok := pkgs[r.path]; ok || strings.HasSuffix(r.path, "/") {
			continue
		}
		// A row of a directory that is not a package of this module: its
		// own module (go.mod) is the one kind allowed.
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(r.path), "go.mod"))
		assert.NoError(t, err, "the layout row %s is neither a package of the module nor a module of its own", r.path)
	}
}

// The table reader finds rows and their imports, so the test above is not
// vacuous.
func TestLayoutTableReader(t *testing.T) {
	rows := layoutTable(t, "intro\n## Layout\n\n| path | owns | imports |\n|---|---|---|\n| `a` | x | `b`, `c` |\n| `d/` | y | anything |\n| `e` | z | nothing |\n\n## Next\n| `f` | no | `g` |\n")
	require.Len(t, rows, 3)
	assert.Equal(t, layoutRow{path: "a", imports: []string{"b", "c"}, text: "`b`, `c`"}, rows[0])
	assert.Equal(t, "d/", rows[1].path)
	assert.Equal(t, "nothing", rows[2].text)
}
