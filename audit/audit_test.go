package audit_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
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
	rep, err := audit.Scan(ctx, h.Raw.Open("t"), "t", schema, now, scan.WithProgress(time.Nanosecond, func(p scan.Progress) { calls, last = calls+1, [2]int64{p.Rows, p.Cells} }))
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

	rep, err := audit.Scan(ctx, h.Raw.Open("t"), "t", schema, now)
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

// Three cells written through bttl into a write-time family are three live
// cells and three companions, counted apart (they were six live cells); a
// reserved qualifier that is no companion (written before the family had write
// times) is counted apart as hidden. The gauges say the same
// (issue 26 item 6).
func TestScanCountsWriteTimeCompanionsApart(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	schema := strategy.Schema{"s": strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime())}
	tbl := h.MustTable(t, "wt", schema)
	for i, row := range []string{"a", "b", "c"} {
		m := ttlclient.NewMutation()
		m.Set("s", "tok", bigtable.ServerTime, []byte{'v', byte('0' + i)})
		require.NoError(t, tbl.Apply(ctx, row, m))
	}
	rep, err := audit.Scan(ctx, h.Raw.Open("wt"), "wt", schema, bigtable.Time(h.Clock.Now()))
	require.NoError(t, err)
	require.Len(t, rep.Families, 1)
	f := rep.Families[0]
	assert.Equal(t, int64(3), f.Cells, "data cells")
	assert.Equal(t, int64(6), f.Bytes)
	assert.Equal(t, int64(3), f.Live)
	assert.Equal(t, int64(3), f.Companions)
	assert.Equal(t, int64(24), f.CompanionBytes, "8 bytes each")
	assert.Zero(t, f.HiddenReserved)
	assert.Equal(t, int64(6), rep.Cells, "the table's count is every cell read")

	// A column under the reserved prefix, written past bttl: hidden.
	m := bigtable.NewMutation()
	m.Set("s", "\xff\xfflegacy", bigtable.Time(h.Clock.Now()), []byte("live data"))
	require.NoError(t, h.Raw.Open("wt").Apply(ctx, "d", m))
	rep, err = audit.Scan(ctx, h.Raw.Open("wt"), "wt", schema, bigtable.Time(h.Clock.Now()))
	require.NoError(t, err)
	f = rep.Families[0]
	assert.Equal(t, int64(3), f.Live)
	assert.Equal(t, int64(3), f.Companions)
	assert.Equal(t, int64(1), f.HiddenReserved)
	assert.Equal(t, int64(9), f.HiddenReservedBytes)
	require.NotNil(t, f.HiddenReservedExample)
	assert.Equal(t, audit.Cell{Row: "d", Column: "\xff\xfflegacy", Timestamp: bigtable.Time(h.Clock.Now())}, *f.HiddenReservedExample)

	var buf bytes.Buffer
	require.NoError(t, audit.WriteMetrics(&buf, []*audit.Report{rep}))
	s := parse(t, buf.String())
	assert.Equal(t, 3.0, s.must(t, audit.MetricStoredCells, "wt", "s"))
	assert.Equal(t, 3.0, s.must(t, audit.MetricLiveCells, "wt", "s"))
	assert.Equal(t, 6.0, s.must(t, audit.MetricLiveBytes, "wt", "s"))
	assert.Equal(t, 3.0, s.must(t, audit.MetricWriteTimeCompanionCells, "wt", "s"))
	assert.Equal(t, 24.0, s.must(t, audit.MetricWriteTimeCompanionBytes, "wt", "s"))
	assert.Equal(t, 1.0, s.must(t, audit.MetricHiddenReservedCells, "wt", "s"))
}
