package provision_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bttl/bttl/provision"
)

// The first cell a safety scan names is shown as every bttl message shows keys
// (internal/keytext): quoted and cut; the fields keep the values whole
// (issue 30 item 7).
func TestSafetyErrorsQuoteAndCutTheFirstCell(t *testing.T) {
	row, col := "u1\nlevel=ERROR msg=forged", strings.Repeat("q", 10<<10)
	shown := `first: row "u1\nlevel=ERROR msg=forged", column "` + strings.Repeat("q", 64) + `"...(10240 bytes)`
	for _, err := range []error{
		&provision.RealTimestampsError{Table: "t", Family: "f", Cells: 1, Row: row, Column: col},
		&provision.HiddenColumnsError{Table: "t", Family: "f", Cells: 1, Row: row, Column: col},
		&provision.SequenceCellsError{Table: "t", Family: "f", Cells: 1, Row: row, Column: col},
		&provision.NotSequenceError{Table: "t", Family: "f", Cells: 1, Row: row, Column: col},
	} {
		assert.Contains(t, err.Error(), shown, "%T", err)
		assert.NotContains(t, err.Error(), "\n", "%T", err)
		assert.Less(t, len(err.Error()), 1500, "%T", err)
	}
	i := &provision.Impact{Collectable: 1, Row: row, Column: col}
	assert.Contains(t, i.String(), shown)
}
