package scan_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/scan"
	"github.com/bttl/bttl/strategy"
)

// exampleTable starts an in-process emulator holding table "events" with
// 1,000 rows of 3 cells in family f.
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
			m.Set("f", fmt.Sprint("c", c), bigtable.Time(h.Clock.Now()), []byte("v"))
		}
		keys, muts = append(keys, fmt.Sprintf("user#%04d", i)), append(muts, m)
	}
	if _, err := tbl.ApplyBulk(ctx, keys, muts); err != nil {
		panic(err)
	}
	return h, tbl
}

// auditRows audits events with opts and returns the rows it read.
func auditRows(opts ...scan.Option) int64 {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	rep, err := audit.Scan(ctx, tbl, "events", strategy.Schema{"f": strategy.DefaultExpiry(24 * time.Hour)},
		bigtable.Time(h.Clock.Now()), opts...)
	if err != nil {
		panic(err)
	}
	return rep.Rows
}

// An audit read by eight workers at once.
func ExampleWithWorkers() {
	fmt.Println(auditRows(scan.WithWorkers(8)))
	// Output: 1000
}

// The shard cut into at most two ranges (each an entry of the checkpoint).
func ExampleWithRanges() {
	fmt.Println(auditRows(scan.WithRanges(2)))
	// Output: 1000
}

// At most 2,000 cells a second over all workers: the first second's
// allowance at once, then the pace.
func ExampleWithCellsPerSecond() {
	start := time.Now()
	rows := auditRows(scan.WithCellsPerSecond(2000), scan.WithWorkers(2)) // 3,000 cells
	fmt.Println(rows, time.Since(start) >= 400*time.Millisecond)
	// Output: 1000 true
}

// countingPacer lets every cell through and counts them.
type countingPacer struct{ cells atomic.Int64 }

func (p *countingPacer) WaitN(_ context.Context, n int) error {
	p.cells.Add(int64(n))
	return nil
}

// A pacer of one's own: each row waits for its cells before it is counted.
func ExampleWithPacer() {
	p := &countingPacer{}
	rows := auditRows(scan.WithPacer(p), scan.WithWorkers(4))
	fmt.Println(rows, p.cells.Load())
	// Output: 1000 3000
}

// Two processes (here two calls) each audit one shard; their reports merge
// into the whole table's.
func ExampleWithShard() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	now := bigtable.Time(h.Clock.Now())
	schema := strategy.Schema{"f": strategy.DefaultExpiry(24 * time.Hour)}
	var parts []*audit.Report
	for i := 0; i < 2; i++ {
		rep, err := audit.Scan(ctx, tbl, "events", schema, now, scan.WithShard(i, 2), scan.WithShardKeys("user#0500"))
		if err != nil {
			panic(err)
		}
		fmt.Printf("shard %s: %d rows\n", rep.Shard, rep.Rows)
		parts = append(parts, rep)
	}
	whole, err := audit.Merge(parts...)
	if err != nil {
		panic(err)
	}
	fmt.Println("merged:", whole.Rows)
	// Output:
	// shard 0/2: 500 rows
	// shard 1/2: 500 rows
	// merged: 1000
}

func ExampleWithShardKeys() {
	fmt.Println(auditRows(scan.WithShard(1, 3), scan.WithShardKeys("user#0250", "user#0500")))
	// Output: 250
}

// Shard keys chosen from the table's data, computed once and given to
// every process.
func ExampleSuggestShardKeys() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	keys, err := scan.SuggestShardKeys(ctx, tbl, "", "", 2)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(keys))
	// Output: 1
}

func ExampleWithRange() {
	fmt.Println(auditRows(scan.WithRange("user#0100", "user#0200")))
	// Output: 100
}

// A second audit with the same checkpoint finds every range finished and
// reads nothing again; the same file for another schema is refused.
func ExampleWithCheckpoint() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	dir, _ := os.MkdirTemp("", "scan")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.checkpoint")
	now := bigtable.Time(h.Clock.Now())
	run := func(ttl time.Duration) (*audit.Report, error) {
		return audit.Scan(ctx, tbl, "events", strategy.Schema{"f": strategy.DefaultExpiry(ttl)}, now, scan.WithCheckpoint(path))
	}
	if _, err := run(24 * time.Hour); err != nil {
		panic(err)
	}
	_, err := run(24 * time.Hour)
	fmt.Println("same audit again:", err)
	_, err = run(time.Hour)
	fmt.Println("another schema refused:", errors.Is(err, scan.ErrCheckpoint))
	// Output:
	// same audit again: <nil>
	// another schema refused: true
}

// Progress once at the end (and at most every second before).
func ExampleWithProgress() {
	var last scan.Progress
	rows := auditRows(scan.WithProgress(time.Second, func(p scan.Progress) { last = p }))
	fmt.Println(rows, last.Rows, last.RangesDone == last.Ranges)
	// Output: 1000 1000 true
}

// Audit the rows whose key ends in 7 only, by a row-key filter (a
// RowSampleFilter samples instead).
func ExampleWithFilter() {
	fmt.Println(auditRows(scan.WithFilter(bigtable.RowKeyFilter(".*7"))))
	// Output: 100
}

// A read that receives nothing for a minute is read again once, then the
// scan stops with a *StallError.
func ExampleWithStall() {
	fmt.Println(auditRows(scan.WithStall(time.Minute)))
	// Output: 1000
}

func ExampleWithLimit() {
	fmt.Println(auditRows(scan.WithLimit(10)))
	// Output: 10
}
