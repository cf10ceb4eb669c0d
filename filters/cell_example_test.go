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
