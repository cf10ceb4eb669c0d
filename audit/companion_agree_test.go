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
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// Filters.Explain called any cell under the companion prefix a companion,
// while audit (internal/companion) required a cell of its column at the same
// timestamp. One definition now (internal/companion, the paired one
// docs/design.md#write-time describes): for paired, orphaned and forged
// companions written by a raw client, Explain (bttl lookup), audit's counts
// and what a read through bttl returns agree, on both servers (issue 27).
func TestCompanionsAgreeAcrossExplainAuditAndReads(t *testing.T) {
	bttestharness.OnBothServers(t, bttestharness.Config{NoGC: true}, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		schema := strategy.Schema{"wt": strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime())}
		require.NoError(t, h.CreateTable(ctx, "t", schema))
		now := bigtable.Time(h.Clock.Now()).TruncateToMilliseconds()
		t1, t2 := now-60_000_000, now-120_000_000 // a minute and two ago: live
		wt := strategy.WriteTimeColumn
		legacy := "\xff\xfflegacy"

		m := bigtable.NewMutation()
		// Paired: a@t1 and its companion, as bttl writes them.
		m.Set("wt", "a", t1, []byte("v"))
		m.Set("wt", wt("a"), t1, strategy.WriteTimeValue(t1))
		// Orphaned: b's companion at t1, b stored at t2 only; and the
		// companion of a column the row does not hold.
		m.Set("wt", "b", t2, []byte("v"))
		m.Set("wt", wt("b"), t1, strategy.WriteTimeValue(t1))
		m.Set("wt", wt("gone"), t1, strategy.WriteTimeValue(t1))
		// Forged: c's companion at c's timestamp holding no write time
		// (paired, value not checked: a companion, recording nothing);
		// the "companion" of a reserved column, which none is.
		m.Set("wt", "c", t1, []byte("v"))
		m.Set("wt", wt("c"), t1, []byte("xyz"))
		m.Set("wt", legacy, t1, []byte("old column"))
		m.Set("wt", wt(legacy), t1, strategy.WriteTimeValue(t1))
		require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", m))

		stored, err := h.Stored(ctx, "t", "r")
		require.NoError(t, err)
		reports := filters.Explain(schema, stored, now)
		require.Len(t, reports, 9)
		type cell struct {
			col string
			ts  bigtable.Timestamp
		}
		got := map[cell]filters.Visibility{}
		for _, r := range reports {
			got[cell{r.Column, r.Timestamp}] = r.Visibility
		}
		assert.Equal(t, map[cell]filters.Visibility{
			{"a", t1}: filters.Returned, {wt("a"), t1}: filters.Companion,
			{"b", t2}: filters.Returned, {wt("b"), t1}: filters.Reserved, {wt("gone"), t1}: filters.Reserved,
			{"c", t1}: filters.Returned, {wt("c"), t1}: filters.Companion,
			{legacy, t1}: filters.Reserved, {wt(legacy), t1}: filters.Reserved,
		}, got)
		for _, r := range reports {
			switch r.Column {
			case "a":
				assert.Equal(t, t1.Time().UTC(), r.WriteTime, "a paired companion gives its cell's write time")
			case "b", "c":
				assert.True(t, r.WriteTime.IsZero(), "%s: no write time from an orphan or an unreadable value", r.Column)
			case wt("b"):
				assert.Contains(t, r.Reason, `orphaned write-time companion of column "b"`)
			}
		}

		// The read filter returns exactly what Explain calls returned.
		tbl, err := h.Client.Open(ctx, "t", schema)
		require.NoError(t, err)
		row, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		returned := map[cell]bool{}
		for _, it := range row["wt"] {
			returned[cell{it.Column[len("wt:"):], it.Timestamp}] = true
		}
		for c, v := range got {
			assert.Equal(t, v == filters.Returned, returned[c], "%q@%d: Explain says %s", c.col, c.ts, v)
		}
		assert.Len(t, returned, 3)

		// Audit counts what Explain calls companions and reserved.
		rep, err := audit.Scan(ctx, h.Raw.Open("t"), "t", schema, now)
		require.NoError(t, err)
		require.Len(t, rep.Families, 1)
		f := rep.Families[0]
		count := func(v filters.Visibility) (n int64) {
			for _, x := range got {
				if x == v {
					n++
				}
			}
			return n
		}
		assert.Equal(t, count(filters.Companion), f.Companions, "companions")
		assert.Equal(t, count(filters.Reserved), f.HiddenReserved, "hidden reserved cells")
		assert.Equal(t, count(filters.Returned), f.Cells, "data cells")
	})
}
