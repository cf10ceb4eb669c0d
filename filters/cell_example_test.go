package filters_test

import (
	"context"
	"fmt"

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
