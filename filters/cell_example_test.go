package filters_test

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/filters"
)

// Cell pins one stored cell: a conditional mutation on it moves the cell to
// a new timestamp only while that very cell is stored.
func ExampleCell() {
	ctx := context.Background()
	tbl, done := exampleTable(ctx, 5000)
	defer done()
	move := func(from, to bigtable.Timestamp) bool {
		pin, err := filters.Cell("f", "c", from, []byte("v"))
		if err != nil {
			panic(err)
		}
		return exampleMove(ctx, tbl, pin, from, to)
	}
	fmt.Println(move(5000, 9000)) // the cell is at 5000
	fmt.Println(move(5000, 7000)) // it is not any more
	// Output:
	// true
	// false
}

// CellMove also requires the target millisecond to be free: a move never
// replaces a cell a concurrent writer put there.
func ExampleCellMove() {
	ctx := context.Background()
	tbl, done := exampleTable(ctx, 5000, 9000) // 9000: a concurrent write at the target
	defer done()
	move := func(to bigtable.Timestamp) bool {
		pred, err := filters.CellMove("f", "c", 5000, []byte("v"), "f", to)
		if err != nil {
			panic(err)
		}
		return exampleMove(ctx, tbl, pred, 5000, to)
	}
	fmt.Println(move(9000)) // taken: not applied, the other value kept
	fmt.Println(move(8000)) // free
	// Output:
	// false
	// true
}

// CellLift also requires nothing to be stored between the cell and its
// target: a cell lifted to a later timestamp never passes another, which
// would then sort below it (and drop out of a max-versions rule's newest).
func ExampleCellLift() {
	ctx := context.Background()
	tbl, done := exampleTable(ctx, 5000, 7000) // 7000: written since the cell was read
	defer done()
	lift := func(to bigtable.Timestamp) bool {
		pred, err := filters.CellLift("f", "c", 5000, []byte("v"), to)
		if err != nil {
			panic(err)
		}
		return exampleMove(ctx, tbl, pred, 5000, to)
	}
	fmt.Println(lift(9000)) // would pass the cell at 7000: not applied
	fmt.Println(lift(6000)) // nothing in between
	// Output:
	// false
	// true
}

// exampleTable is a table on an in-process server holding f:c = "v" at
// 5000 and "other" at each of others; done stops the server.
func exampleTable(ctx context.Context, at bigtable.Timestamp, others ...bigtable.Timestamp) (*bigtable.Table, func()) {
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true})
	if err != nil {
		panic(err)
	}
	if err := h.Admin.CreateTable(ctx, "t"); err != nil {
		panic(err)
	}
	if err := h.Admin.CreateColumnFamily(ctx, "t", "f"); err != nil {
		panic(err)
	}
	tbl := h.Raw.Open("t")
	m := bigtable.NewMutation()
	m.Set("f", "c", at, []byte("v"))
	for _, ts := range others {
		m.Set("f", "c", ts, []byte("other"))
	}
	if err := tbl.Apply(ctx, "r", m); err != nil {
		panic(err)
	}
	return tbl, func() { _ = h.Close() }
}

// exampleMove moves f:c's "v" from one timestamp to another on pred, and
// reports whether it applied.
func exampleMove(ctx context.Context, tbl *bigtable.Table, pred bigtable.Filter, from, to bigtable.Timestamp) bool {
	mv := bigtable.NewMutation()
	mv.DeleteTimestampRange("f", "c", from, from+1000)
	mv.Set("f", "c", to, []byte("v"))
	var applied bool
	if err := tbl.Apply(ctx, "r", bigtable.NewCondMutation(pred, mv, nil), bigtable.GetCondMutationResult(&applied)); err != nil {
		panic(err)
	}
	return applied
}

// RowMove moves two cells of a row in one conditional mutation: it
// applies only while both are stored and both new slots are free.
func ExampleRowMove_Add() {
	ctx := context.Background()
	h, _ := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true})
	defer h.Close()
	_ = h.Admin.CreateTable(ctx, "t")
	_ = h.Admin.CreateColumnFamily(ctx, "t", "f")
	tbl := h.Raw.Open("t")
	m := bigtable.NewMutation()
	m.Set("f", "a", 5000, []byte("x"))
	m.Set("f", "b", 6000, []byte("y"))
	_ = tbl.Apply(ctx, "r", m)

	var rm filters.RowMove
	mv := bigtable.NewMutation()
	for _, c := range []struct {
		col string
		ts  bigtable.Timestamp
		v   string
	}{{"a", 5000, "x"}, {"b", 6000, "y"}} {
		ok, err := rm.Add("f", c.col, c.ts, []byte(c.v), "f", c.ts+100_000)
		if err != nil || !ok {
			panic(err)
		}
		mv.DeleteTimestampRange("f", c.col, c.ts, c.ts+1000)
		mv.Set("f", c.col, c.ts+100_000, []byte(c.v))
	}
	var applied bool
	_ = tbl.Apply(ctx, "r", bigtable.NewCondMutation(rm.Filter(), mv, nil), bigtable.GetCondMutationResult(&applied))
	fmt.Println(rm.Len(), applied)
	// Output:
	// 2 true
}

// Len is how many cells the predicate pins.
func ExampleRowMove_Len() {
	var rm filters.RowMove
	_, _ = rm.Add("f", "a", 5000, []byte("x"), "", 0) // a deletion: no target slot
	fmt.Println(rm.Len())
	// Output:
	// 1
}

// Filter is nil until a cell is pinned; one pin and one slot is
// CellMove's shape.
func ExampleRowMove_Filter() {
	var rm filters.RowMove
	fmt.Println(rm.Filter() == nil)
	_, _ = rm.Add("f", "a", 5000, []byte("x"), "f", 9000)
	fmt.Println(rm.Filter() != nil)
	// Output:
	// true
	// true
}

// Proto is the predicate as sent, for checks on its size and shape.
func ExampleRowMove_Proto() {
	var rm filters.RowMove
	_, _ = rm.Add("f", "a", 5000, []byte("x"), "f", 9000)
	_, _ = rm.Add("f", "b", 5000, []byte("y"), "f", 9000)
	p := rm.Proto()
	fmt.Println(p.GetCondition().GetFalseFilter().GetChain().GetFilters()[1].GetCellsPerRowOffsetFilter())
	// Output:
	// 1
}

// Span is the region of the row that SpanFilter requires empty: every
// target slot's column and millisecond, as one range of each.
func ExampleRowMove_Span() {
	var rm filters.RowMove
	_, _ = rm.Add("f", "a", 5000, []byte("x"), "f", 90_000)
	_, _ = rm.Add("f", "c", 6000, []byte("y"), "f", 91_000)
	s, ok := rm.Span()
	fmt.Println(ok, s.FirstColumn, s.LastColumn, s.Start, s.End)
	// Output:
	// true a c 90000 92000
}

// SpanFilter checks every target slot as one region; a caller sends it
// for a row that, as read, holds nothing in the Span, and Filter (one
// filter per slot) otherwise.
func ExampleRowMove_SpanFilter() {
	var rm filters.RowMove
	_, _ = rm.Add("f", "a", 5000, []byte("x"), "f", 105_000)
	_, _ = rm.Add("f", "b", 6000, []byte("y"), "f", 106_000)
	read := []bigtable.ReadItem{ // the row as read
		{Row: "r", Column: "f:a", Timestamp: 5000, Value: []byte("x")},
		{Row: "r", Column: "f:b", Timestamp: 6000, Value: []byte("y")},
	}
	s, _ := rm.Span()
	pred := rm.SpanFilter()
	for _, it := range read {
		if s.Holds("f", strings.TrimPrefix(it.Column, "f:"), it.Timestamp) {
			pred = rm.Filter()
		}
	}
	fmt.Println(pred != nil, s.FirstColumn, s.LastColumn, s.Start, s.End)
	// Output:
	// true a b 105000 107000
}

// Holds says whether a cell lies in the span: the row as read is checked
// with it before SpanFilter is sent.
func ExampleSpan_Holds() {
	s := filters.Span{Family: "f", FirstColumn: "a", LastColumn: "c", Start: 90_000, End: 92_000}
	fmt.Println(s.Holds("f", "b", 91_500), s.Holds("f", "d", 91_500), s.Holds("f", "b", 92_000))
	// Output:
	// true false false
}
