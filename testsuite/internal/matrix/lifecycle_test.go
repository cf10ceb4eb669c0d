package matrix_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/model"
)

// The model writes companions as the library does.
func TestModelCompanionPrefixIsTheLibrarys(t *testing.T) {
	assert.Equal(t, strategy.WriteTimePrefix, model.CompanionPrefix)
}
