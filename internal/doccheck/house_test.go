package doccheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The house rules of issue 34 that a newcomer relies on, kept true by
// tests: ttlclient stays small enough to read, and a test file's name says
// what it checks.

// maxTTLClientLines bounds ttlclient's non-test source: past it, a concern
// moves to its own internal package (as internal/lifecycle,
// internal/shadow and internal/sqlscan did) rather than grow the front.
const maxTTLClientLines = 3000

// nonTestLines counts the lines of the non-test Go files directly in dir.
func nonTestLines(dir string) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			n++
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// TestTTLClientStaysSmall: ttlclient has at most maxTTLClientLines lines
// outside its tests (`cat $(ls ttlclient/*.go | grep -v _test) | wc -l`).
func TestTTLClientStaysSmall(t *testing.T) {
	n, err := nonTestLines(filepath.Join("..", "..", "ttlclient"))
	require.NoError(t, err)
	require.NotZero(t, n, "no ttlclient source found")
	assert.LessOrEqual(t, n, maxTTLClientLines,
		"ttlclient has %d non-test lines, over %d: move a concern to its own internal package, drop dead code, or cut a comment that repeats docs/design.md to a reference", n, maxTTLClientLines)
}

// The counter counts every line of the non-test files and none of the
// tests', so the bound above is not vacuous.
func TestNonTestLinesCountsSourceOnly(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n\nfunc A() {}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.go"), []byte("package a\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a_test.go"), []byte("package a\n\n\n\n"), 0o644))
	n, err := nonTestLines(dir)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
}

// notABehaviour matches a segment of a test file's name (split at '_' and
// '-') that names where the test came from (an issue, a review round, the
// "holes" or "seams" a review found) instead of what it checks.
var notABehaviour = regexp.MustCompile(`^(issues?[0-9]*|reviews?[0-9]*|holes?|seams?|rounds?[0-9]*)$`)

// misnamedTest reports whether a test file's base name names its origin
// rather than its behaviour.
func misnamedTest(name string) bool {
	stem := strings.TrimSuffix(name, "_test.go")
	for _, seg := range strings.FieldsFunc(stem, func(r rune) bool { return r == '_' || r == '-' }) {
		if notABehaviour.MatchString(strings.ToLower(seg)) {
			return true
		}
	}
	return false
}

// TestTestFilesAreNamedForTheirBehaviour: no test file of the repository
// is named after an issue or a review round (lifecycle_issue37_test.go,
// explain_holes_test.go): a newcomer finds a behaviour's tests by the
// behaviour. Reference the issue in the test's comment, in parentheses.
func TestTestFilesAreNamedForTheirBehaviour(t *testing.T) {
	root := filepath.Join("..", "..")
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), "_test.go") && misnamedTest(d.Name()) {
			rel, _ := filepath.Rel(root, path)
			bad = append(bad, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, bad, "test files named after an issue or a review round: name each for the behaviour it checks (or merge it into that behaviour's file)")
}

func TestMisnamedTest(t *testing.T) {
	for name, want := range map[string]bool{
		"lifecycle_issue37_test.go":          true,
		"lifecycle_issue37_race_test.go":     true,
		"lifecycle_review_test.go":           true,
		"explain_holes_test.go":              true,
		"wire_seams_test.go":                 true,
		"round2_test.go":                     true,
		"issue-12_test.go":                   true,
		"background_ctx_test.go":             false, // "round" inside a word
		"lifecycle_persist_test.go":          false,
		"reviewer_assignment_test.go":        false,
		"lifecycle_instant_forms_test.go":    false,
		"issuer_certificate_test.go":         false,
		"lifecycle_long_default_ttl_test.go": false,
	} {
		assert.Equal(t, want, misnamedTest(name), name)
	}
}
