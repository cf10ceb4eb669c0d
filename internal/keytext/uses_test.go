package keytext

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyVerbs are the ways to print a key past this package: "%q" after row,
// column or qualifier in a format string (strconv.Quote, uncut), and a
// log attribute named row or column.
var keyVerbs = regexp.MustCompile(`\b(row|rows|column|columns|qualifier|qualifiers)( key| keys)? %[qsvx]|slog\.\w+\("(row|column|qualifier|key)"|\.(Debug|Info|Warn|Error)\([^\n]*"(row|column|qualifier)",`)

// keytextCall is a key formatted by this package: keytext.Quote, or a
// Text's Key.
var keytextCall = regexp.MustCompile(`keytext\.Quote|\.Key\(`)

// notMessages are the trees whose text is not a message bttl writes: the
// conformance proxy (its own module), the test model and runner, the
// example programs, scripts, and the dashboard mixin (whose "row" is a
// Grafana row).
var notMessages = []string{"testsuite/", "examples/", "scripts/", "metrics/internal/mixin/"}

// Every message naming a row or column goes through this package: no
// non-test source of the module prints one with a format verb of its own
// (issue 30 item 7). A "%s" after row or column is flagged too, unless a
// key formatted by this package is among the next three lines.
func TestEveryPackagePrintsKeysThroughKeytext(t *testing.T) {
	root := filepath.Join("..", "..")
	_, err := os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			for _, skip := range notMessages {
				if rel+"/" == skip || strings.HasPrefix(rel, ".") && rel != "." {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := strings.Split(string(src), "\n")
		for i, line := range lines {
			if !keyVerbs.MatchString(line) {
				continue
			}
			m := keyVerbs.FindString(line)
			args := strings.Join(lines[i:min(i+3, len(lines))], "\n")
			if strings.HasSuffix(m, "%q") || !keytextCall.MatchString(args) {
				found = append(found, rel+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, found, "print row keys and qualifiers with internal/keytext (docs/design.md#keys-in-messages)")
}
