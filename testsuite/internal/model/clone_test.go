package model_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/model"
)

// A clone holds the same cells and does not follow later writes.
func TestCloneIsIndependent(t *testing.T) {
	m := model.New(strategy.Schema{"plain": strategy.Unmanaged()})
	at := time.Now()
	require.NoError(t, m.Apply("r", at, []model.Op{{Kind: model.SetExplicit, Family: "plain", Column: "c", TS: 1000, Value: "v1"}}))
	c := m.Clone()
	require.Equal(t, m.Stored("r"), c.Stored("r"))
	require.NoError(t, m.Apply("r", at, []model.Op{{Kind: model.SetExplicit, Family: "plain", Column: "c", TS: 2000, Value: "v2"}}))
	require.Len(t, m.Stored("r"), 2)
	require.Len(t, c.Stored("r"), 1, "the clone does not see a later write")
}
