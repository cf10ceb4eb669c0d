package audit_test

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/scan"
	"github.com/bttl/bttl/strategy"
)

// Before adopting bttl on a legacy table, scan it with the schema you plan
// to use: the report says, per family, which stored cells that schema
// treats as expired, which a one-second adoption would delete at once, and
// which versions a sequence family would not keep.
func ExampleScan() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx) // an in-process emulator
	if err != nil {
		panic(err)
	}
	defer h.Close()

	// A legacy table: no GC rules, real timestamps.
	if err := h.Admin.CreateTable(ctx, "events"); err != nil {
		panic(err)
	}
	for _, f := range []string{"clicks", "session", "doc", "legacy"} {
		if err := h.Admin.CreateColumnFamily(ctx, "events", f); err != nil {
			panic(err)
		}
	}
	now := h.Clock.Now()
	at := func(d time.Duration) bigtable.Timestamp { return bigtable.Time(now.Add(d)) }
	m := bigtable.NewMutation()
	m.Set("clicks", "c1", at(-48*time.Hour), []byte("two days old"))
	m.Set("clicks", "c2", at(-time.Hour), []byte("an hour old"))
	m.Set("session", "token", at(-time.Hour), []byte("a write time, not an expiry"))
	for v := int64(1); v <= 3; v++ {
		m.Set("doc", "body", bigtable.Timestamp(v*1000), []byte("version"))
	}
	m.Set("legacy", "x", at(0), []byte("?"))
	if err := h.Raw.Open("events").Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}

	schema := strategy.Schema{
		"clicks":  strategy.DefaultExpiry(24 * time.Hour),
		"session": strategy.OneSecond(),
		"doc":     strategy.Sequence(2),
	}
	rep, err := audit.Scan(ctx, h.Raw.Open("events"), "events", schema, bigtable.Time(now))
	if err != nil {
		panic(err)
	}
	fmt.Println("rows:", rep.Rows, "cells:", rep.Cells)
	for _, f := range rep.Families { // sorted by name
		fmt.Printf("%-8s %-26s live=%d expired=%d at-or-before-now=%d beyond-kept=%d\n",
			f.Family, f.Strategy, f.Live, f.Expired, f.AtOrBeforeNow, f.BeyondKept)
	}
	clicks := rep.Families[0]
	fmt.Println("clicks expired for:", now.Sub(clicks.OldestExpiry.Time()))
	// Output:
	// rows: 1 cells: 7
	// clicks   default-expiry(D=24h0m0s)  live=1 expired=1 at-or-before-now=0 beyond-kept=0
	// doc      sequence(N=2)              live=2 expired=0 at-or-before-now=0 beyond-kept=1
	// legacy   not in schema              live=1 expired=0 at-or-before-now=0 beyond-kept=0
	// session  one-second                 live=0 expired=1 at-or-before-now=1 beyond-kept=0
	// clicks expired for: 24h0m0s
}

// Shards of one audit, run by separate processes at the same now, merge
// into the report a single scan makes.
func ExampleMerge() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"clicks": strategy.DefaultExpiry(24 * time.Hour)}
	if err := h.CreateTable(ctx, "events", schema); err != nil {
		panic(err)
	}
	now := h.Clock.Now()
	tbl := h.Raw.Open("events")
	for i, key := range []string{"a#1", "m#1", "z#1"} {
		m := bigtable.NewMutation()
		m.Set("clicks", "c", bigtable.Time(now.Add(-time.Duration(i)*24*time.Hour)), []byte("click"))
		if err := tbl.Apply(ctx, key, m); err != nil {
			panic(err)
		}
	}
	var shards []*audit.Report
	for i := 0; i < 2; i++ {
		rep, err := audit.Scan(ctx, tbl, "events", schema, bigtable.Time(now), scan.WithShard(i, 2), scan.WithShardKeys("n"))
		if err != nil {
			panic(err)
		}
		fmt.Println("shard", rep.Shard, "rows:", rep.Rows, "covers:", rep.Ranges)
		shards = append(shards, rep)
	}
	merged, err := audit.Merge(shards...)
	if err != nil {
		panic(err)
	}
	fmt.Println("merged rows:", merged.Rows, "expired:", merged.Families[0].Expired, "covers:", merged.Ranges)
	// Output:
	// shard 0/2 rows: 2 covers: [["", "n")]
	// shard 1/2 rows: 1 covers: [["n", end)]
	// merged rows: 3 expired: 2 covers: [["", end)]
}
