package provisionjob_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	provision "github.com/bttl/bttl/internal/provisionjob"
)

// The first cell a safety scan names is shown as every bttl message shows keys
// (internal/keytext): quoted and cut; the fields keep the values whole
// (issue 30 item 7).
func TestSafetyErrorsQuoteAndCutTheFirstCell(t *testing.T) {
	row, col := "u1\nlevel=ERROR msg=forged", strings.Repeat("q", 10<<10)
	shown := `first: row "u1\nlevel=ERROR msg=forged", column "` + strings.Repeat("q", 64) + `"...(10240 bytes)`
	for _, err := range []error{
		&provision.AdoptionError{Err: provision.ErrRealTimestamps, Table: "t", Family: "f", Cells: 1, Row: row, Column: col},
		&provision.AdoptionError{Err: provision.ErrHiddenColumns, Table: "t", Family: "f", Cells: 1, Row: row, Column: col},
		&provision.AdoptionError{Err: provision.ErrAgeOverSequence, Table: "t", Family: "f", Cells: 1, Row: row, Column: col},
		&provision.AdoptionError{Err: provision.ErrNotSequenceNumbers, Table: "t", Family: "f", Cells: 1, Row: row, Column: col},
		&provision.AdoptionError{Table: "t", Family: "f", Cells: 1, Row: row, Column: col},
	} {
		assert.Contains(t, err.Error(), shown, "%v", errors.Unwrap(err))
		assert.NotContains(t, err.Error(), "\n", "%v", errors.Unwrap(err))
		assert.Less(t, len(err.Error()), 1500, "%v", errors.Unwrap(err))
	}
	i := &provision.Impact{Collectable: 1, Row: row, Column: col}
	assert.Contains(t, i.String(), shown)
}
