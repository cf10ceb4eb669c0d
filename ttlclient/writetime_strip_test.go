package ttlclient_test

import (
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/ttlclient"
)

// A cell read with StripValueFilter has an empty value, which identified no
// stored cell: WriteTime answered another version's write time (one whose
// value is empty) or ErrNoWriteTime. A stripped value now identifies the cell
// by its coordinates (issue 35 item 7).
func TestWriteTimeOfStrippedCell(t *testing.T) {
	e := newEnvNoGC(t, writeTimeSchema())
	start := e.h.Clock.Now()
	// Three versions of def:c, written a second apart: "v1", "" and "v3".
	for i, v := range []string{"v1", "", "v3"} {
		e.h.Clock.Set(start.Add(time.Duration(i) * time.Second))
		e.setTTL(t, "r", "def", "c", v, time.Duration(i+1)*time.Hour)
	}
	written := func(i int) time.Time { return start.Add(time.Duration(i) * time.Second).Truncate(time.Millisecond) }
	r, err := e.tbl.ReadRow(e.ctx, "r", bigtable.RowFilter(bigtable.ChainFilters(bigtable.FamilyFilter("def"), bigtable.StripValueFilter())))
	require.NoError(t, err)
	require.Len(t, r["def"], 3)
	// Newest first: expiries 3h, 2h, 1h, written at 2s, 1s, 0s.
	for i, it := range r["def"] {
		require.Empty(t, it.Value)
		got, err := e.tbl.WriteTime(e.ctx, it)
		require.NoError(t, err, "version %d", i)
		assert.True(t, written(2-i).Equal(got), "version %d: write time %s, want %s", i, got, written(2-i))
	}

	// Moved after the stripped read: found among the column's live cells
	// when they agree on one write time, else ErrCellMoved, never another
	// cell's write time.
	e.setTTL(t, "s", "def", "c", "only", time.Hour)
	r, err = e.tbl.ReadRow(e.ctx, "s", bigtable.RowFilter(bigtable.StripValueFilter()))
	require.NoError(t, err)
	it := r["def"][0]
	applied, err := e.tbl.Expire(e.ctx, "s", "def", "c", 5*time.Hour)
	require.NoError(t, err)
	require.True(t, applied)
	got, err := e.tbl.WriteTime(e.ctx, it)
	require.NoError(t, err)
	assert.True(t, written(2).Equal(got), "moved single version: %s", got)

	r, err = e.tbl.ReadRow(e.ctx, "r", bigtable.RowFilter(bigtable.ChainFilters(bigtable.FamilyFilter("def"), bigtable.StripValueFilter(), bigtable.LatestNFilter(1))))
	require.NoError(t, err)
	it = r["def"][0]
	applied, err = e.tbl.Expire(e.ctx, "r", "def", "c", 5*time.Hour)
	require.NoError(t, err)
	require.True(t, applied)
	_, err = e.tbl.WriteTime(e.ctx, it)
	require.ErrorIs(t, err, ttlclient.ErrCellMoved, "three versions with different write times")
}
