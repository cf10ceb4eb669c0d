package metrics_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The package documentation's code lines appear verbatim in Example_wrap,
// which the go tool compiles and runs: the snippet cannot drift from the API.
func TestDocSnippetIsCompiledByExample(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	example, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	start := strings.Index(string(example), "func Example_wrap()")
	require.GreaterOrEqual(t, start, 0, "example_test.go has no Example_wrap")
	body := string(example[start:])
	body = body[:strings.Index(body, "\n}\n")]

	var lines int
	for _, line := range strings.Split(string(doc), "\n") {
		code, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			continue
		}
		lines++
		require.Contains(t, body, "\t"+code+"\n", "doc.go's snippet line is not in Example_wrap")
	}
	require.Equal(t, 3, lines, "doc.go's snippet has three lines")
}
