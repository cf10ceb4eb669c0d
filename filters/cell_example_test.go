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
	h, _ := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true})
	defer h.Close()
	if err := h.Admin.CreateTable(ctx, "t"); err != nil {
		panic(err)
	}
	if err := h.Admin.CreateColumnFamily(ctx, "t", "f"); err != nil {
		panic(err)
	}
	tbl := h.Raw.Open("t")
	m := bigtable.NewMutation()
	m.Set("f", "c", 5000, []byte("v"))
	_ = tbl.Apply(ctx, "r", m)

	move := func(from, to bigtable.Timestamp) bool {
		pin, err := filters.Cell("f", "c", from, []byte("v"))
		if err != nil {
			panic(err)
		}
		mv := bigtable.NewMutation()
		mv.DeleteTimestampRange("f", "c", from, from+1000)
		mv.Set("f", "c", to, []byte("v"))
		var applied bool
		if err := tbl.Apply(ctx, "r", bigtable.NewCondMutation(pin, mv, nil), bigtable.GetCondMutationResult(&applied)); err != nil {
			panic(err)
		}
		return applied
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
	h, _ := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true})
	defer h.Close()
	if err := h.Admin.CreateTable(ctx, "t"); err != nil {
		panic(err)
	}
	if err := h.Admin.CreateColumnFamily(ctx, "t", "f"); err != nil {
		panic(err)
	}
	tbl := h.Raw.Open("t")
	m := bigtable.NewMutation()
	m.Set("f", "c", 5000, []byte("v"))
	m.Set("f", "c", 9000, []byte("newer")) // a concurrent write at the target
	_ = tbl.Apply(ctx, "r", m)

	move := func(to bigtable.Timestamp) bool {
		pred, err := filters.CellMove("f", "c", 5000, []byte("v"), "f", to)
		if err != nil {
			panic(err)
		}
		mv := bigtable.NewMutation()
		mv.DeleteTimestampRange("f", "c", 5000, 6000)
		mv.Set("f", "c", to, []byte("v"))
		var applied bool
		if err := tbl.Apply(ctx, "r", bigtable.NewCondMutation(pred, mv, nil), bigtable.GetCondMutationResult(&applied)); err != nil {
			panic(err)
		}
		return applied
	}
	fmt.Println(move(9000)) // taken: not applied, "newer" kept
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
	h, _ := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true})
	defer h.Close()
	if err := h.Admin.CreateTable(ctx, "t"); err != nil {
		panic(err)
	}
	if err := h.Admin.CreateColumnFamily(ctx, "t", "f"); err != nil {
		panic(err)
	}
	tbl := h.Raw.Open("t")
	m := bigtable.NewMutation()
	m.Set("f", "c", 5000, []byte("v"))
	m.Set("f", "c", 7000, []byte("between")) // written since the cell was read
	_ = tbl.Apply(ctx, "r", m)

	lift := func(to bigtable.Timestamp) bool {
		pred, err := filters.CellLift("f", "c", 5000, []byte("v"), to)
		if err != nil {
			panic(err)
		}
		mv := bigtable.NewMutation()
		mv.DeleteTimestampRange("f", "c", 5000, 6000)
		mv.Set("f", "c", to, []byte("v"))
		var applied bool
		if err := tbl.Apply(ctx, "r", bigtable.NewCondMutation(pred, mv, nil), bigtable.GetCondMutationResult(&applied)); err != nil {
			panic(err)
		}
		return applied
	}
	fmt.Println(lift(9000)) // would pass "between": not applied
	fmt.Println(lift(6000)) // nothing in between
	// Output:
	// false
	// true
}
