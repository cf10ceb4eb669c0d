package migratejob_test

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/strategy"
)

// legacyTable starts an in-process emulator with table "events", family
// "f" without a GC rule, holding cells a plain client wrote with real
// timestamps: written 1 day and 40 days ago in row user#1, 2 days ago in
// row order#1.
func legacyTable(ctx context.Context) (*bttestharness.Harness, *bigtable.Table, time.Time) {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	if err := h.CreateTable(ctx, "events", strategy.Schema{"f": strategy.Unmanaged()}); err != nil {
		panic(err)
	}
	tbl := h.Raw.Open("events")
	now := h.Clock.Now()
	ago := func(d time.Duration) bigtable.Timestamp { return bigtable.Time(now.Add(-d)) }
	m := bigtable.NewMutation()
	m.Set("f", "session", ago(24*time.Hour), []byte("a"))
	m.Set("f", "name", ago(40*24*time.Hour), []byte("b"))
	if err := tbl.Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}
	m = bigtable.NewMutation()
	m.Set("f", "total", ago(48*time.Hour), []byte("c"))
	if err := tbl.Apply(ctx, "order#1", m); err != nil {
		panic(err)
	}
	return h, tbl, now
}

// realToOneSecond is the plan the examples run: 30 days for every cell,
// 7 days for user rows' sessions; writers switched to bttl an hour ago.
func realToOneSecond(now time.Time) migrate.Plan {
	return migrate.Plan{
		Family: "f", From: strategy.Unmanaged(), To: strategy.OneSecond(),
		TTL:         migrate.TTLRules{{Prefix: "user#", Column: "session", TTL: 7 * 24 * time.Hour}, {TTL: 30 * 24 * time.Hour}},
		FirstSwitch: now.Add(-2 * time.Hour), WrittenBefore: now.Add(-time.Hour),
	}
}

// In place, only real timestamps to one-second expiry are accepted: for a
// default-expiry target the old and new timestamps overlap, so the plan
// copies into a new family.
func ExamplePlan_Validate() {
	p := migrate.Plan{Family: "clicks", From: strategy.DefaultExpiry(48 * time.Hour), To: strategy.DefaultExpiry(24 * time.Hour)}
	fmt.Println(p.Validate() != nil)
	p.ToFamily = "clicks24h"
	fmt.Println(p.Validate())
	// Output:
	// true
	// <nil>
}

// The order of steps for a live system, as bttl migrate prints them.
func ExamplePlan_Steps() {
	p := migrate.Plan{Family: "clicks", From: strategy.DefaultExpiry(48 * time.Hour), To: strategy.DefaultExpiry(24 * time.Hour), ToFamily: "clicks24h"}
	for i, s := range p.Steps() {
		fmt.Printf("%d. %.60s...\n", i+1, s)
	}
	// Output:
	// 1. bttl apply a schema that adds family "clicks24h" with the de...
	// 2. make every writer of "clicks" build its deletions and overwr...
	// 3. run bttl migrate -to-family clicks24h: it copies every live ...
	// 4. run bttl migrate -to-family clicks24h -check-copy: every cel...
	// 5. switch every writer to write "clicks24h" through bttl with t...
	// 6. run bttl migrate -to-family clicks24h again: it copies what ...
	// 7. bttl verify the final schema and switch readers to "clicks24...
	// 8. remove "clicks" from the schema and drop it: every live cell...
}

// Rules are tried in order; the last must match every cell, and none may
// be shadowed by an earlier one.
func ExampleTTLRules_Validate() {
	rules := migrate.TTLRules{{Prefix: "user#", TTL: time.Hour}, {Prefix: "user#1", TTL: 2 * time.Hour}, {TTL: 3 * time.Hour}}
	fmt.Println(rules.Validate())
	// Output:
	// bttl: invalid TTL rule: rule 2 (prefix=user#1,ttl=2h0m0s): never applies: rule 1 (prefix=user#,ttl=1h0m0s) matches every cell it matches
}

// MigrateRow is the per-row callback for a scan of your own: read rows
// with Filter and hand each to it (safe for concurrent use on different
// rows).
func ExampleMigrator_MigrateRow() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	m, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock))
	r, _ := tbl.ReadRow(ctx, "order#1", bigtable.RowFilter(m.Filter()))
	if err := m.MigrateRow(ctx, r); err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", m.Stats().Moved)
	// Output:
	// 1
}

// Filter reads the source family only (and, in a copy, the target family,
// whose cells say what is copied already).
func ExampleMigrator_Filter() {
	m, _ := migrate.New(nil, "events", migrate.Plan{Family: "f", From: strategy.OneSecond(), To: strategy.DefaultExpiry(time.Hour), ToFamily: "g"})
	fmt.Println(m.Filter())
	// Output:
	// (col(^f$:) + col(^g$:))
}

// Stats are the counts so far, for a progress line.
func ExampleMigrator_Stats() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	m, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock))
	_, _ = m.Run(ctx)
	st := m.Stats()
	fmt.Println(st.Rows, st.Cells, st.Moved, st.ExpiredLeft)
	// Output:
	// 2 3 2 1
}

func ExampleStats_Changes() {
	st := migrate.Stats{Moved: 10, ExpiredDeleted: 2, OnTarget: 5}
	fmt.Println(st.Changes())
	// Output:
	// 12
}

// Unmoved cells keep the migration incomplete: bttl migrate exits 1 and
// a rerun picks them up once dealt with.
func ExampleStats_Unmoved() {
	st := migrate.Stats{Moved: 10, Changed: 1, TooLargeToPin: 2}
	fmt.Println(st.Unmoved())
	// Output:
	// 3
}

// A cell a writer deleted before its move leaves nothing to do: Gone is
// not in Unmoved.
func ExampleStats_Gone() {
	st := migrate.Stats{Moved: 10, Gone: 3}
	fmt.Println(st.Unmoved())
	// Output:
	// 0
}

// Plus sums the counts of runs over disjoint key ranges (shards).
func ExampleStats_Plus() {
	a := migrate.Stats{Moved: 10, ExpiredLeft: 2}
	b := migrate.Stats{Moved: 5, Gone: 1}
	sum := a.Plus(b)
	fmt.Println(sum.Moved, sum.ExpiredLeft, sum.Gone)
	// Output:
	// 15 2 1
}

// Now is the instant expiry is judged at: a dry run's Now is what a run
// deleting the expired cells it counted takes as Plan.ExpiredAsOf.
func ExampleMigrator_Now() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	dry, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithDryRun())
	rep, _ := dry.Run(ctx)
	fmt.Println(dry.Now().Equal(now), rep.ExpiredLeft)

	del := realToOneSecond(now)
	del.Expired, del.ExpiredAsOf, del.ExpectExpired = migrate.DeleteExpired, dry.Now(), rep.ExpiredLeft
	m, _ := migrate.New(tbl, "events", del, migrate.WithClock(h.Clock))
	rep, err := m.Run(ctx)
	fmt.Println(rep.ExpiredDeleted, err)
	// Output:
	// true 1
	// 1 <nil>
}

// Window is what an in-place plan proves: at or before the first instant,
// real write times; after the second, bttl expiry instants.
func ExamplePlan_Window() {
	t1 := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	p := migrate.Plan{Family: "f", From: strategy.Unmanaged(), To: strategy.OneSecond(), TTL: migrate.TTLRules{{TTL: time.Hour}},
		FirstSwitch: t1, WrittenBefore: t1.Add(10 * time.Minute)}
	legacy, bttl := p.Window()
	fmt.Println(legacy.Format(time.TimeOnly), bttl.Format(time.TimeOnly))
	// Output:
	// 09:59:55 10:10:05
}

// NextStep follows an in-place run that found nothing to migrate.
func ExamplePlan_NextStep() {
	p := realToOneSecond(time.Now())
	fmt.Printf("%.40s...\n", p.NextStep())
	// Output:
	// only once bttl migrate exits 0 (no cell ...
}

// A writer of a copy's source family deletes one cell through a Mirror:
// the one row mutation also deletes the cell's copy in the new family,
// which the copy itself cannot see (docs/design.md#migrate, step 2).
func ExampleMirror() {
	p := migrate.Plan{Family: "clicks", From: strategy.DefaultExpiry(48 * time.Hour), To: strategy.DefaultExpiry(24 * time.Hour), ToFamily: "clicks24h"}
	mirror, err := migrate.NewMirror(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := bigtable.Timestamp(1_767_225_600_000_000) // the cell's timestamp
	mut := bigtable.NewMutation()
	mirror.DeleteTimestampRange(mut, "user#1", "page", ts, ts+1000)
	// tbl.Apply(ctx, "user#1", mut): the source cell and its copy go together.
	fmt.Println(mirror)
	// Output: mirror of family "clicks": default-expiry(D=48h0m0s) -> default-expiry(D=24h0m0s), copied into family "clicks24h"
}
