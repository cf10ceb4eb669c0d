package scanjob_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	scan "github.com/bttl/bttl/internal/scanjob"
)

// exampleTable starts an in-process emulator holding table "events" with
// 1,000 rows of 3 cells.
func exampleTable(ctx context.Context) (*bttestharness.Harness, *bigtable.Table) {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	if err := h.Admin.CreateTable(ctx, "events"); err != nil {
		panic(err)
	}
	if err := h.Admin.CreateColumnFamily(ctx, "events", "f"); err != nil {
		panic(err)
	}
	tbl := h.Raw.Open("events")
	var keys []string
	var muts []*bigtable.Mutation
	for i := 0; i < 1000; i++ {
		m := bigtable.NewMutation()
		for c := 0; c < 3; c++ {
			m.Set("f", fmt.Sprint("c", c), 1000, []byte("v"))
		}
		keys, muts = append(keys, fmt.Sprintf("user#%04d", i)), append(muts, m)
	}
	if _, err := tbl.ApplyBulk(ctx, keys, muts); err != nil {
		panic(err)
	}
	return h, tbl
}

// Scan a table with four workers, at most 100,000 cells a second, keeping
// a checkpoint so that a restart skips the ranges already read. The
// callback runs on the workers: it must be safe for concurrent use.
func ExampleRun() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	dir, _ := os.MkdirTemp("", "scan")
	defer os.RemoveAll(dir)

	var cells atomic.Int64
	sum, err := scan.Run(ctx, tbl, "events", func(ctx context.Context, r bigtable.Row) error {
		for _, items := range r {
			cells.Add(int64(len(items)))
		}
		return nil
	}, scan.WithWorkers(4), scan.WithCellsPerSecond(100_000),
		scan.WithCheckpoint(filepath.Join(dir, "events.checkpoint"), "count cells"))
	if err != nil {
		panic(err)
	}
	fmt.Println("rows:", sum.Rows, "cells:", cells.Load(), "complete:", sum.Complete(), "covered:", sum.Covered())
	// Output:
	// rows: 1000 cells: 3000 complete: true covered: [["", end)]
}

// RunRanges keeps state per range, merged afterwards in key order: the
// result is the same whatever the workers' order, and a restart with a
// checkpoint finds the finished ranges' results there.
func ExampleRunRanges() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()

	type counts struct{ Rows, Cells int }
	sum, err := scan.RunRanges(ctx, tbl, "events", func(scan.Range) (scan.RowFunc, func() (json.RawMessage, error)) {
		var c counts // one range's: one worker at a time
		return func(_ context.Context, r bigtable.Row) error {
				c.Rows++
				for _, items := range r {
					c.Cells += len(items)
				}
				return nil
			}, func() (json.RawMessage, error) {
				return json.Marshal(c)
			}
	}, scan.WithWorkers(4))
	if err != nil {
		panic(err)
	}
	var total counts
	for _, r := range sum.Ranges {
		var c counts
		if err := json.Unmarshal(r.Result, &c); err != nil {
			panic(err)
		}
		total.Rows, total.Cells = total.Rows+c.Rows, total.Cells+c.Cells
	}
	fmt.Printf("%+v\n", total)
	// Output:
	// {Rows:1000 Cells:3000}
}

func ExampleParseShard() {
	s, err := scan.ParseShard("2/8")
	fmt.Println(s.Index, s.Count, err)
	_, err = scan.ParseShard("8/8")
	fmt.Println(err)
	// Output:
	// 2 8 <nil>
	// bttl: scan option shard: 8/8: want i/n with 0 <= i < n
}
