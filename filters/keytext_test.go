package filters_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/filters"
)

// A PinError names its column as every bttl message does (internal/keytext):
// quoted and cut; the field keeps it whole (issue 30 item 7).
func TestPinErrorQuotesAndCutsTheColumn(t *testing.T) {
	for _, tc := range []struct{ column, shown string }{
		{"c\n\x00", `f:"c\n\x00"@1000`},
		{strings.Repeat("q", 10<<10), `f:"` + strings.Repeat("q", 64) + `"...(10240 bytes)@1000`},
	} {
		_, err := filters.Cell("f", tc.column, 1000, bytes.Repeat([]byte("x"), 20<<10))
		var pe *filters.PinError
		require.True(t, errors.As(err, &pe))
		assert.Contains(t, err.Error(), tc.shown)
		assert.NotContains(t, err.Error(), "\n")
		assert.Equal(t, tc.column, pe.Column)
	}
}
