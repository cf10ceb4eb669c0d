package filters_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// A conditional mutation on filters.Cell applies only while that very cell
// is stored: every neighbour that differs in one coordinate (family,
// column, a column it prefixes, the next or previous millisecond, a value
// it prefixes or extends) leaves it unapplied.
func TestCellPinsExactlyOneCell(t *testing.T) {
	tbl, lastFilter := recordingTable(t)
	ctx := context.Background()
	const ts = bigtable.Timestamp(1_700_000_000_123_000)
	type cell struct {
		fam, col string
		ts       bigtable.Timestamp
		val      string
	}
	pinned := []cell{
		{"f", "c", ts, "v"},
		{"f", "", ts, ""},                    // empty column and empty value
		{"f", "c\x00\xff", ts, "\x00\xffa*"}, // bytes that are regex or range edge cases
		{"g.h", "c", ts, strings.Repeat("x", 9000)},
	}
	neighbours := func(p cell) []cell {
		return []cell{
			{"g", p.col, p.ts, p.val}, {p.fam, p.col + "x", p.ts, p.val}, {p.fam, "x" + p.col, p.ts, p.val},
			{p.fam, p.col, p.ts + 1000, p.val}, {p.fam, p.col, p.ts - 1000, p.val},
			{p.fam, p.col, p.ts, p.val + "\x00"}, {p.fam, p.col, p.ts, "w" + p.val},
		}
	}
	for i, p := range pinned {
		pred, err := filters.Cell(p.fam, p.col, p.ts+999, []byte(p.val)) // any µs in the millisecond pins it
		require.NoError(t, err)
		for j, n := range append(neighbours(p), p) {
			row := string(rune('a'+i)) + string(rune('a'+j))
			m := bigtable.NewMutation()
			m.Set(n.fam, n.col, n.ts, []byte(n.val))
			require.NoError(t, tbl.Apply(ctx, row, m))
			mark := bigtable.NewMutation()
			mark.Set("f", "applied", 0, []byte("y"))
			var matched bool
			require.NoError(t, tbl.Apply(ctx, row, bigtable.NewCondMutation(pred, mark, nil), bigtable.GetCondMutationResult(&matched)))
			assert.Equal(t, n == p, matched, "pin %q matched %q", p, n)
		}
		// The size check counts what the client sends for this predicate.
		require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"r"}, func(bigtable.Row) bool { return true }, bigtable.RowFilter(pred)))
		assert.True(t, bytes.Contains(mustMarshal(t, lastFilter()), []byte(p.val)))
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

// Values too large for the predicate are refused with a typed error, not
// pinned by a weaker predicate; the boundary is the service's filter limit
// measured on the proto the client sends.
func TestCellTooLargeToPin(t *testing.T) {
	tbl, lastFilter := recordingTable(t)
	ctx := context.Background()
	largest := 0
	for n := 10_000; n < 11_000; n++ {
		pred, err := filters.Cell("f", "c", 1000, bytes.Repeat([]byte{'v'}, n))
		if err != nil {
			var pe *filters.PinError
			require.True(t, errors.As(err, &pe))
			assert.ErrorIs(t, err, filters.ErrCellTooLargeToPin)
			assert.Equal(t, n, pe.ValueBytes)
			assert.Greater(t, pe.FilterBytes, filters.MaxFilterBytes)
			break
		}
		largest = n
		require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"r"}, func(bigtable.Row) bool { return true }, bigtable.RowFilter(pred)))
		assert.LessOrEqual(t, proto.Size(lastFilter()), filters.MaxFilterBytes, "value of %d bytes", n)
	}
	require.Positive(t, largest, "a 10,000-byte value must be pinnable")
	pred, err := filters.Cell("f", "c", 1000, bytes.Repeat([]byte{'v'}, largest))
	require.NoError(t, err)
	require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"r"}, func(bigtable.Row) bool { return true }, bigtable.RowFilter(pred)))
	assert.Greater(t, proto.Size(lastFilter())+2, filters.MaxFilterBytes, "the limit is reached at %d bytes, not earlier", largest)
}

// CellMove matches while the pinned cell is stored and the target
// millisecond is free, in the same family or another one.
func TestCellMoveNeedsThePinAndAFreeTarget(t *testing.T) {
	tbl, _ := recordingTable(t)
	ctx := context.Background()
	const ts, to = bigtable.Timestamp(1_000_000), bigtable.Timestamp(9_000_000)
	cases := []struct {
		name     string
		toFamily string
		extra    func(m *bigtable.Mutation)
		want     bool
	}{
		{"pinned, target free", "f", func(*bigtable.Mutation) {}, true},
		{"target taken", "f", func(m *bigtable.Mutation) { m.Set("f", "c", to+999, []byte("other")) }, false},
		{"target taken in another column", "f", func(m *bigtable.Mutation) { m.Set("f", "d", to, []byte("x")) }, true},
		{"copy, the source family's cell at the target time does not block", "g", func(m *bigtable.Mutation) { m.Set("f", "c", to, []byte("x")) }, true},
		{"copy, target family taken", "g", func(m *bigtable.Mutation) { m.Set("g", "c", to, []byte("x")) }, false},
		{"copy, free", "g", func(*bigtable.Mutation) {}, true},
	}
	for i, tc := range cases {
		row := fmt.Sprintf("m%d", i)
		m := bigtable.NewMutation()
		m.Set("f", "c", ts, []byte("v"))
		tc.extra(m)
		require.NoError(t, tbl.Apply(ctx, row, m))
		pred, err := filters.CellMove("f", "c", ts, []byte("v"), tc.toFamily, to)
		require.NoError(t, err)
		mark := bigtable.NewMutation()
		mark.Set("f", "applied", 0, []byte("y"))
		var matched bool
		require.NoError(t, tbl.Apply(ctx, row, bigtable.NewCondMutation(pred, mark, nil), bigtable.GetCondMutationResult(&matched)))
		assert.Equal(t, tc.want, matched, tc.name)
	}
}

// The size limit counts CellMove's whole predicate as the client sends it.
func TestCellMoveTooLargeToPin(t *testing.T) {
	tbl, lastFilter := recordingTable(t)
	ctx := context.Background()
	largest := 0
	for n := 10_000; n < 11_000; n++ {
		pred, err := filters.CellMove("f", "column", 1000, bytes.Repeat([]byte{'v'}, n), "g.h", 5000)
		if err != nil {
			require.ErrorIs(t, err, filters.ErrCellTooLargeToPin)
			break
		}
		largest = n
		require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"r"}, func(bigtable.Row) bool { return true }, bigtable.RowFilter(pred)))
		require.LessOrEqual(t, proto.Size(lastFilter()), filters.MaxFilterBytes, "value of %d bytes", n)
	}
	require.Positive(t, largest)
	assert.Greater(t, proto.Size(lastFilter())+2, filters.MaxFilterBytes, "the limit is reached at %d bytes, not earlier", largest)
	_, err := filters.Cell("f", "column", 1000, bytes.Repeat([]byte{'v'}, largest+1))
	assert.NoError(t, err, "the pin alone is smaller than the move's predicate")
}

// pinned is a cell of family "f" a RowMove pins.
type pinned struct {
	col string
	ts  bigtable.Timestamp
	val string
}

// writeAndPin writes cells to row, then extra's mutation (when not nil),
// and returns a RowMove pinning the cells, each to move shift later.
func writeAndPin(t *testing.T, tbl *bigtable.Table, row string, cells []pinned, shift bigtable.Timestamp, extra func(*bigtable.Mutation)) *filters.RowMove {
	t.Helper()
	ctx := context.Background()
	m := bigtable.NewMutation()
	rm := &filters.RowMove{}
	for _, c := range cells {
		m.Set("f", c.col, c.ts, []byte(c.val))
		ok, err := rm.Add("f", c.col, c.ts, []byte(c.val), "f", c.ts+shift)
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.NoError(t, tbl.Apply(ctx, row, m))
	if extra != nil {
		e := bigtable.NewMutation()
		extra(e)
		require.NoError(t, tbl.Apply(ctx, row, e))
	}
	return rm
}

// RowMove matches only while every pinned cell is stored and every target
// slot is free: each case removes or changes one of three pinned cells,
// or takes one of the three slots, and the predicate stops matching.
func TestRowMoveNeedsEveryPinAndEverySlot(t *testing.T) {
	tbl, lastFilter := recordingTable(t)
	ctx := context.Background()
	const hour = bigtable.Timestamp(3_600_000_000)
	base := bigtable.Timestamp(1_700_000_000_000_000)
	cells := []pinned{{"a", base, "va"}, {"a", base - hour, "va-older"}, {"b", base, ""}}
	cases := []struct {
		name  string
		extra func(m *bigtable.Mutation)
		want  bool
	}{
		{"all pinned, all free", func(*bigtable.Mutation) {}, true},
		{"a pinned cell changed", func(m *bigtable.Mutation) { m.DeleteTimestampRange("f", "a", base-hour, base-hour+1000) }, false},
		{"another value", func(m *bigtable.Mutation) {
			m.DeleteTimestampRange("f", "b", base, base+1000)
			m.Set("f", "b", base, []byte("x"))
		}, false},
		{"a slot taken", func(m *bigtable.Mutation) { m.Set("f", "a", base-hour+10*hour+5, []byte("w")) }, false},
		{"last slot taken", func(m *bigtable.Mutation) { m.Set("f", "b", base+10*hour, []byte("w")) }, false},
		{"a neighbour of a slot", func(m *bigtable.Mutation) { m.Set("f", "b", base+10*hour+1000, []byte("w")) }, true},
		{"an extra cell", func(m *bigtable.Mutation) { m.Set("f", "c", base, []byte("w")) }, true},
	}
	for i, tc := range cases {
		row := fmt.Sprintf("rm%d", i)
		extra := tc.extra
		if tc.name == "all pinned, all free" {
			extra = nil
		}
		rm := writeAndPin(t, tbl, row, cells, 10*hour, extra)
		mark := bigtable.NewMutation()
		mark.Set("f", "applied", 0, []byte("y"))
		var matched bool
		require.NoError(t, tbl.Apply(ctx, row, bigtable.NewCondMutation(rm.Filter(), mark, nil), bigtable.GetCondMutationResult(&matched)))
		assert.Equal(t, tc.want, matched, tc.name)
		require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"r"}, func(bigtable.Row) bool { return true }, bigtable.RowFilter(rm.Filter())))
		assert.True(t, proto.Equal(rm.Proto(), lastFilter()), "Proto is what the client sends")
	}
}

// SpanFilter matches only where Filter does, and not when a cell lies in
// the span though on no slot: each case writes one cell and both
// predicates are evaluated by the server on the same row.
func TestRowMoveSpanFilterIsStricterThanFilter(t *testing.T) {
	tbl, _ := recordingTable(t)
	ctx := context.Background()
	const hour = bigtable.Timestamp(3_600_000_000)
	base := bigtable.Timestamp(1_700_000_000_000_000)
	cells := []pinned{{"a", base, "va"}, {"a", base - hour, "va-older"}, {"c", base, ""}}
	cases := []struct {
		name         string
		extra        func(m *bigtable.Mutation)
		filter, span bool
	}{
		{"all pinned, all free", nil, true, true},
		{"a pinned cell changed", func(m *bigtable.Mutation) { m.DeleteTimestampRange("f", "a", base-hour, base-hour+1000) }, false, false},
		{"a slot taken", func(m *bigtable.Mutation) { m.Set("f", "a", base-hour+10*hour+5, []byte("w")) }, false, false},
		{"last slot taken", func(m *bigtable.Mutation) { m.Set("f", "c", base+10*hour, []byte("w")) }, false, false},
		{"in the span, between the slots' columns", func(m *bigtable.Mutation) { m.Set("f", "b", base+10*hour, []byte("w")) }, true, false},
		{"in the span, between the slots' times", func(m *bigtable.Mutation) { m.Set("f", "a", base+9*hour+hour/2, []byte("w")) }, true, false},
		{"after the span", func(m *bigtable.Mutation) { m.Set("f", "c", base+10*hour+1000, []byte("w")) }, true, true},
		{"another family", func(m *bigtable.Mutation) { m.Set("g", "b", base+10*hour, []byte("w")) }, true, true},
	}
	for i, tc := range cases {
		row := fmt.Sprintf("span%d", i)
		rm := writeAndPin(t, tbl, row, cells, 10*hour, tc.extra)
		for _, f := range []struct {
			name string
			pred bigtable.Filter
			want bool
		}{{"Filter", rm.Filter(), tc.filter}, {"SpanFilter", rm.SpanFilter(), tc.span}} {
			var matched bool
			// False branch only: nothing is written, the next predicate sees the same row.
			require.NoError(t, tbl.Apply(ctx, row, bigtable.NewCondMutation(f.pred, nil, bigtable.NewMutation()), bigtable.GetCondMutationResult(&matched)))
			assert.Equal(t, f.want, matched, "%s: %s", tc.name, f.name)
		}
	}
	var none filters.RowMove
	_, err := none.Add("f", "a", base, []byte("va"), "", 0)
	require.NoError(t, err)
	_, ok := none.Span()
	assert.False(t, ok, "a deletion has no slot, so no span")
}

// RowMove fills up to MaxFilterBytes and refuses the cell that would pass
// it; what it holds is what the client sends, within the limit.
func TestRowMoveStaysUnderTheLimit(t *testing.T) {
	tbl, lastFilter := recordingTable(t)
	var rm filters.RowMove
	v := bytes.Repeat([]byte{'v'}, 1000)
	n := 0
	for ; ; n++ {
		ok, err := rm.Add("f", fmt.Sprintf("c%03d", n), 1_000_000, v, "f", 9_000_000)
		require.NoError(t, err)
		if !ok {
			break
		}
	}
	assert.Equal(t, n, rm.Len())
	assert.Greater(t, n, 5)
	require.NoError(t, tbl.ReadRows(context.Background(), bigtable.RowList{"r"}, func(bigtable.Row) bool { return true }, bigtable.RowFilter(rm.Filter())))
	size := proto.Size(lastFilter())
	assert.LessOrEqual(t, size, filters.MaxFilterBytes)
	assert.Greater(t, size+2*len(v)+100, filters.MaxFilterBytes, "it refused a cell that would have fit (a pin holds the value twice)")
	var alone filters.RowMove
	_, err := alone.Add("f", "c", 1000, bytes.Repeat([]byte{'v'}, 21<<10), "f", 9000)
	require.ErrorIs(t, err, filters.ErrCellTooLargeToPin)
	assert.Zero(t, alone.Len())
}

// A cell in the last millisecond of the timestamp range is pinned, and a
// target there is checked free: the millisecond's end is "no end" (it
// overflowed to a negative bound before, and the move never matched).
func TestRowMoveAtTheLargestTimestamp(t *testing.T) {
	tbl, lastFilter := recordingTable(t)
	ctx := context.Background()
	top := strategy.MaxTimestamp
	m := bigtable.NewMutation()
	m.Set("f", "c", top, []byte("v"))
	m.Set("f", "c", top-3_600_000_000, []byte("w"))
	require.NoError(t, tbl.Apply(ctx, "edge", m))
	var rm filters.RowMove
	ok, err := rm.Add("f", "c", top-3_600_000_000, []byte("w"), "f", top)
	require.NoError(t, err)
	require.True(t, ok)
	mark := bigtable.NewMutation()
	mark.Set("f", "applied", 0, []byte("y"))
	var matched bool
	require.NoError(t, tbl.Apply(ctx, "edge", bigtable.NewCondMutation(rm.Filter(), mark, nil), bigtable.GetCondMutationResult(&matched)))
	assert.False(t, matched, "the target, the last millisecond, is taken")
	require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"r"}, func(bigtable.Row) bool { return true }, bigtable.RowFilter(rm.Filter())))
	assert.True(t, proto.Equal(rm.Proto(), lastFilter()), "Proto is what the client sends")

	var free filters.RowMove
	ok, err = free.Add("f", "c", top, []byte("v"), "f", top-2000)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, tbl.Apply(ctx, "edge", bigtable.NewCondMutation(free.Filter(), mark, nil), bigtable.GetCondMutationResult(&matched)))
	assert.True(t, matched, "the cell at the largest timestamp is pinned")
}
