package ttlclient_test

import (
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// A real time written as a sequence family's timestamp would sort above
// every sequence number: later revisions would read as older. It is refused
// (as audit and provision already treat such cells), so seq 3 stays latest.
func TestRealTimeRefusedInSequenceFamily(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := ttlclient.NewMutation()
	m.Set(famSeq, "c", e.now().TruncateToMilliseconds(), []byte("legacy"))
	assert.ErrorIs(t, e.tbl.Apply(e.ctx, "row", m), strategy.ErrInvalidSequence)
	for seq := int64(1); seq <= 3; seq++ {
		m := ttlclient.NewMutation()
		m.SetVersion(famSeq, "c", seq, []byte("rev"))
		e.apply(t, "row", m)
	}
	r, err := e.tbl.ReadRow(e.ctx, "row", bigtable.RowFilter(bigtable.LatestNFilter(1)))
	require.NoError(t, err)
	require.Len(t, r[famSeq], 1)
	assert.Equal(t, bigtable.Timestamp(3000), r[famSeq][0].Timestamp)

	m = ttlclient.NewMutation()
	m.SetVersion(famSeq, "d", strategy.MaxSequence+1, []byte("v"))
	assert.ErrorIs(t, e.tbl.Apply(e.ctx, "row2", m), strategy.ErrInvalidSequence)
	m = ttlclient.NewMutation()
	m.SetVersion(famSeq, "d", strategy.MaxSequence, []byte("v"))
	require.NoError(t, e.tbl.Apply(e.ctx, "row2", m))
}
