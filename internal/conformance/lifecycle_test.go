package conformance_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bttl/bttl/internal/model"
	"github.com/bttl/bttl/strategy"
)

// The model writes companions as the library does.
func TestModelCompanionPrefixIsTheLibrarys(t *testing.T) {
	assert.Equal(t, strategy.WriteTimePrefix, model.CompanionPrefix)
}
