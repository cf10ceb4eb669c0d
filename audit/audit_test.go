package audit_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
)

// An age family with a max-versions union keeps the N newest live cells of
// a column: older versions count as beyond N, expired ones as expired.
func TestScanAgeFamilyWithMaxVersions(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	schema := strategy.Schema{"d": strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2))}
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"d": {GCPolicy: schema["d"].GCPolicy()},
	}}))
	now := bigtable.Timestamp(h.Clock.Now().UnixMicro())
	minute := bigtable.Timestamp(time.Minute / time.Microsecond)
	m := bigtable.NewMutation()
	m.Set("d", "a", now, []byte("1"))
	m.Set("d", "a", now-minute, []byte("22"))
	m.Set("d", "a", now-2*minute, []byte("333")) // third newest: beyond N
	m.Set("d", "b", now-2*60*minute, []byte("4444"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", m))

	var calls int
	var last [2]int64
	rep, err := audit.Scan(ctx, h.Raw.Open("t"), "t", schema, now, audit.Options{
		Progress: func(rows, cells int64) { calls, last = calls+1, [2]int64{rows, cells} }, ProgressEvery: time.Nanosecond,
	})
	require.NoError(t, err)
	require.Len(t, rep.Families, 1)
	f := rep.Families[0]
	assert.Equal(t, int64(4), f.Cells)
	assert.Equal(t, int64(2), f.Live)
	assert.Equal(t, int64(1), f.BeyondKept)
	assert.Equal(t, int64(3), f.BeyondKeptBytes)
	assert.Equal(t, int64(1), f.Expired)
	assert.Equal(t, int64(4), f.ExpiredBytes)
	assert.Equal(t, now-2*60*minute+60*minute, f.OldestExpiry)
	assert.Equal(t, 2, f.Versions)
	assert.Equal(t, int64(1), rep.Rows)
	assert.Equal(t, int64(1+4*8+10+4), rep.LargestRowBytes, "key, timestamps, values, qualifiers")
	assert.GreaterOrEqual(t, calls, 1, "progress at least once, at the end")
	assert.Equal(t, [2]int64{1, 4}, last, "the last progress call has every row and cell")
}

// The adoption mismatches: real times in a sequence family (as cbt
// writes), timestamp 0 (seq 0), and sequence numbers in an
// age family.
func TestScanFlagsSequenceAgeMismatches(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"doc": {GCPolicy: bigtable.NoGcPolicy()}, "ev": {GCPolicy: bigtable.NoGcPolicy()},
	}}))
	now := bigtable.Time(h.Clock.Now())
	m := bigtable.NewMutation()
	m.Set("doc", "body", now, []byte("legacy"))
	m.Set("doc", "body", now-60_000_000, []byte("legacy-older"))
	m.Set("doc", "body", 0, []byte("odd")) // seq 0; Bigtable keeps milliseconds, so nothing else below 1000
	m.Set("doc", "body", 2000, []byte("seq 2"))
	m.Set("ev", "e", 3000, []byte("seq 3"))
	m.Set("ev", "e", now, []byte("real"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "d1", m))
	schema := strategy.Schema{"doc": strategy.Sequence(3), "ev": strategy.DefaultExpiry(48 * time.Hour)}

	rep, err := audit.Scan(ctx, h.Raw.Open("t"), "t", schema, now, audit.Options{})
	require.NoError(t, err)
	require.Len(t, rep.Families, 2)
	doc, ev := rep.Families[0], rep.Families[1]
	assert.Equal(t, int64(3), doc.NotSequence, "two real times and seq 0")
	assert.Equal(t, int64(2), doc.RealTimes)
	assert.Equal(t, int64(6+12+3), doc.NotSequenceBytes)
	assert.Equal(t, &audit.Cell{Row: "d1", Column: "body", Timestamp: now}, doc.NotSequenceExample)
	assert.Zero(t, doc.SequenceNumbers)
	assert.Equal(t, int64(1), ev.SequenceNumbers)
	assert.Equal(t, &audit.Cell{Row: "d1", Column: "e", Timestamp: 3000}, ev.SequenceNumbersExample)
	assert.Equal(t, int64(1), ev.Expired, "a sequence number is long expired under an age rule")
	assert.Zero(t, ev.NotSequence)
}
