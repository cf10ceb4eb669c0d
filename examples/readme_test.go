package examples

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
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

// The README's code blocks are checked by compiling them, so the README
// cannot drift from the API. The rules (a comment at the top of README.md
// points contributors here):
//
//   - a ```go block that starts with `package` is a whole file;
//   - a ```go block of top-level declarations (funcs, types, vars) is put in
//     a file of its own package;
//   - any other ```go block is a function body, with ctx (a
//     context.Context) in scope, and may `return err`;
//   - a ```diff block is Go: its old side (' ' and '-' lines) and its new
//     side (' ' and '+' lines) are each compiled as above;
//   - imports are added from the package names the block uses (this
//     module's packages, the standard library, the client's);
//   - "declared and not used" and "imported and not used" are forgiven:
//     snippets show calls, not whole programs. Any other error fails, with
//     the README's line number.
//
// Blocks in other languages (sh, text, json, yaml) are not compiled.

type codeBlock struct {
	line int // README line of the block's first source line
	src  string
	what string // for messages: "go block" or "diff block, old side"
}

func TestReadmeGoBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the README's code blocks")
	}
	t.Parallel()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	blocks := readmeBlocks(t, filepath.Join(root, "README.md"))
	require.NotEmpty(t, blocks, "README.md has no go block")

	imports := knownImports(t, root)
	// Inside the module (so its packages resolve), in a directory that
	// ./... patterns skip.
	dir, err := os.MkdirTemp(root, ".readme-check-")
	if err != nil && os.IsPermission(err) {
		t.Skipf("module directory is read-only (module cache?): %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	var pkgs []string
	for i, b := range blocks {
		name := fmt.Sprintf("block%03d", i)
		src, err := wrapBlock(b, name, imports)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "block.go"), []byte(src), 0o644))
		pkgs = append(pkgs, "./"+filepath.Join(filepath.Base(dir), name))
	}
	// -e: report every error, so a forgiven one cannot hide another.
	cmd := exec.Command("go", append([]string{"build", "-gcflags=-e"}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	var real []string
	sawError := false
	for _, line := range strings.Split(string(out), "\n") {
		if !errorLine.MatchString(line) {
			continue
		}
		sawError = true
		if strings.Contains(line, "declared and not used") || strings.Contains(line, "imported and not used") {
			continue
		}
		real = append(real, line)
	}
	if !sawError {
		t.Fatalf("go build failed without a compile error: %v\n%s", err, out)
	}
	for _, line := range real {
		t.Errorf("README code block does not compile: %s", line)
	}
	if len(real) > 0 {
		t.Logf("blocks as compiled are in %s (removed after the test); full output:\n%s", dir, out)
	}
}

var errorLine = regexp.MustCompile(`^\S+\.(go|md):\d+(:\d+)?: `)

// readmeBlocks returns the Go source of README.md's go and diff blocks.
func readmeBlocks(t *testing.T, path string) []codeBlock {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var (
		blocks []codeBlock
		lang   string
		in     bool
		start  int
		body   []string
	)
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if !in {
			if strings.HasPrefix(trimmed, "```") {
				in, lang, start, body = true, strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), n+1, nil
			}
			continue
		}
		if trimmed == "```" {
			in = false
			switch lang {
			case "go":
				blocks = append(blocks, codeBlock{line: start, src: strings.Join(body, "\n"), what: "go block"})
			case "diff":
				blocks = append(blocks,
					codeBlock{line: start, src: diffSide(body, '-'), what: "diff block, old side"},
					codeBlock{line: start, src: diffSide(body, '+'), what: "diff block, new side"})
			}
			continue
		}
		body = append(body, line)
	}
	require.NoError(t, sc.Err())
	require.False(t, in, "README.md: unclosed code block from line %d", start-1)
	return blocks
}

// diffSide is one side of a unified diff, keeping line positions (lines of
// the other side become blank) so errors point at the right README line.
func diffSide(lines []string, drop byte) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		switch {
		case l == "":
		case l[0] == drop:
			// the other side's line: left blank
		case l[0] == ' ' || l[0] == '+' || l[0] == '-':
			out[i] = l[1:]
		default:
			out[i] = l
		}
	}
	return strings.Join(out, "\n")
}

// selector finds the package-like names a block uses: x in x.Y, but not the
// b of a.b.c.
var selector = regexp.MustCompile(`(?:^|[^.\w])([A-Za-z_]\w*)\.[A-Za-z_]`)

var packageClause = regexp.MustCompile(`^(?:\s*//[^\n]*\n|\s*/\*[\s\S]*?\*/|\s)*package\s`)

// wrapBlock turns a block into a Go file of package name.
func wrapBlock(b codeBlock, name string, known map[string]string) (string, error) {
	directive := fmt.Sprintf("\n//line README.md:%d\n", b.line)
	if packageClause.MatchString(b.src) {
		return directive[1:] + b.src + "\n", nil
	}
	need := map[string]bool{}
	for _, m := range selector.FindAllStringSubmatch(b.src, -1) {
		if _, ok := known[m[1]]; ok {
			need[m[1]] = true
		}
	}
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+b.src, parser.ImportsOnly)
	declarations := err == nil
	if declarations {
		// ImportsOnly stops early; make sure the rest is declarations too.
		_, err = parser.ParseFile(token.NewFileSet(), "", "package p\n"+b.src, 0)
		declarations = err == nil
	}
	if declarations && len(f.Imports) > 0 {
		return "package " + name + directive + b.src + "\n", nil // its own imports
	}
	if !declarations {
		need["context"] = true
	}
	var imps []string
	for n := range need {
		imps = append(imps, fmt.Sprintf("\t%s %q", n, known[n]))
	}
	sort.Strings(imps)
	var sb strings.Builder
	fmt.Fprintf(&sb, "package %s\n\n", name)
	if len(imps) > 0 {
		fmt.Fprintf(&sb, "import (\n%s\n)\n", strings.Join(imps, "\n"))
	}
	if declarations {
		sb.WriteString(directive + b.src + "\n")
		return sb.String(), nil
	}
	sb.WriteString("\nfunc _() error {\n\tctx := context.Background()\n\t_ = ctx\n\t{")
	sb.WriteString(directive + b.src + "\n")
	sb.WriteString("\t}\n\treturn nil\n}\n")
	return sb.String(), nil
}

// knownImports maps a package name to the import path a block means by it:
// this module's packages first, then the standard library, then the
// module's dependencies; among equals, the shortest path.
func knownImports(t *testing.T, root string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.Name}} {{.ImportPath}} {{.Standard}} {{.Module}}", "std", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	modPath := modulePath(t, root)
	// Of the dependencies, only what the module imports directly: a block
	// means bigtable.X, not some transitive package that happens to be
	// called "client".
	cmd = exec.Command("go", "list", "-f", `{{join .Imports "\n"}}
{{join .TestImports "\n"}}
{{join .XTestImports "\n"}}`, "./...")
	cmd.Dir = root
	direct, err := cmd.Output()
	require.NoError(t, err, "go list")
	directSet := map[string]bool{}
	for _, p := range strings.Fields(string(direct)) {
		directSet[p] = true
	}
	rank := func(path string, std bool) int {
		switch {
		case path == modPath || strings.HasPrefix(path, modPath+"/"):
			return 0
		case std:
			return 1
		}
		return 2
	}
	type choice struct {
		path string
		rank int
	}
	best := map[string]choice{}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		name, path, std := fields[0], fields[1], fields[2] == "true"
		if name == "main" || strings.Contains(path, "internal") || strings.Contains(path, "vendor/") ||
			strings.HasPrefix(path, modPath+"/examples") || strings.HasPrefix(path, modPath+"/cmd") {
			continue
		}
		c := choice{path, rank(path, std)}
		if c.rank == 2 && !directSet[path] {
			continue
		}
		if old, ok := best[name]; !ok || c.rank < old.rank ||
			(c.rank == old.rank && (len(c.path) < len(old.path) || (len(c.path) == len(old.path) && c.path < old.path))) {
			best[name] = c
		}
	}
	known := make(map[string]string, len(best))
	for name, c := range best {
		known[name] = c.path
	}
	// Names with a well-known meaning in this README.
	known["option"] = "google.golang.org/api/option"
	known["grpc"] = "google.golang.org/grpc"
	return known
}

func modulePath(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

// TestReadmeBlockWrapping checks the wrapping rules on blocks that must and
// must not compile, so a broken checker cannot pass everything.
func TestReadmeBlockWrapping(t *testing.T) {
	known := map[string]string{"fmt": "fmt", "context": "context"}
	body, err := wrapBlock(codeBlock{line: 7, src: "x := 1\nfmt.Println(x)\nreturn nil"}, "b", known)
	require.NoError(t, err)
	assert.Contains(t, body, "func _() error {")
	assert.Contains(t, body, "//line README.md:7")
	assert.Contains(t, body, `fmt "fmt"`)

	decl, err := wrapBlock(codeBlock{line: 3, src: "func F() { fmt.Println() }"}, "b", known)
	require.NoError(t, err)
	assert.NotContains(t, decl, "func _()")

	file, err := wrapBlock(codeBlock{line: 3, src: "// Doc.\npackage main\n\nfunc main() {}"}, "b", known)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(file, "//line README.md:3\n// Doc.\npackage main"))

	assert.Equal(t, "a\n\nc\nd", diffSide([]string{" a", "-b", "+c", "d"}, '-'))
	assert.Equal(t, "a\nb\n\nd", diffSide([]string{" a", "-b", "+c", "d"}, '+'))
}

// TestReadmeLinksExist checks the README's links to files of the repository
// (the examples, above all): a renamed file must not leave a dead link.
func TestReadmeLinksExist(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	links := regexp.MustCompile(`\]\(([^)#\s]+)(?:#[^)]*)?\)`).FindAllStringSubmatch(string(data), -1)
	require.NotEmpty(t, links)
	for _, l := range links {
		target := l[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		_, err := os.Stat(filepath.Join("..", filepath.FromSlash(target)))
		assert.NoError(t, err, "README links to %s", target)
	}
}
