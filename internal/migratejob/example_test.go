package migratejob_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
	migrate "github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/scan"
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

// Move a legacy family's cells onto one-second expiry in place: each cell
// gets its write time + its TTL as timestamp, a cell already expired is
// kept (counted: GC collects it once the one-second rule is applied), and a
// second run finds nothing to do.
func ExampleMigrator_Run() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()

	m, err := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock))
	if err != nil {
		panic(err)
	}
	rep, err := m.Run(ctx, scan.WithWorkers(2))
	if err != nil {
		panic(err)
	}
	fmt.Printf("moved %d, expired and kept %d, not moved %d\n", rep.Moved, rep.ExpiredLeft, rep.Unmoved())
	for _, row := range []string{"order#1", "user#1"} {
		r, _ := tbl.ReadRow(ctx, row)
		for _, it := range r["f"] {
			fmt.Printf("%s %s expires in %s\n", row, it.Column, it.Timestamp.Time().Sub(now))
		}
	}

	again, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock))
	rep, _ = again.Run(ctx)
	fmt.Printf("second run: %d changes, %d cells on the target\n", rep.Changes(), rep.OnTarget)
	// Output:
	// moved 2, expired and kept 1, not moved 0
	// order#1 f:total expires in 672h0m0s
	// user#1 f:name expires in -960h0m0s
	// user#1 f:session expires in 144h0m0s
	// second run: 0 changes, 2 cells on the target
}

// New refuses a plan that cannot run before any RPC.
func ExampleNew() {
	_, err := migrate.New(nil, "events", migrate.Plan{Family: "f", From: strategy.Unmanaged(), To: strategy.OneSecond(),
		TTL: migrate.TTLRules{{TTL: time.Hour}}})
	var pe *migrate.PlanError
	fmt.Println(errors.Is(err, migrate.ErrInvalidPlan), errors.As(err, &pe), pe.Field)
	// Output:
	// true true FirstSwitch
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

func ExampleParseTTLRule() {
	r, err := migrate.ParseTTLRule("prefix=user#,column=session,ttl=7d")
	fmt.Println(r.Prefix, r.Column, r.TTL, err)
	_, err = migrate.ParseTTLRule("prefix=user#")
	fmt.Println(err)
	// Output:
	// user# session 168h0m0s <nil>
	// bttl: invalid TTL rule: "prefix=user#": ttl is required
}

// Rules are tried in order; the last must match every cell, and none may
// be shadowed by an earlier one.
func ExampleTTLRules_Validate() {
	rules := migrate.TTLRules{{Prefix: "user#", TTL: time.Hour}, {Prefix: "user#1", TTL: 2 * time.Hour}, {TTL: 3 * time.Hour}}
	fmt.Println(rules.Validate())
	// Output:
	// bttl: invalid TTL rule: rule 2 (prefix=user#1,ttl=2h0m0s): never applies: rule 1 (prefix=user#,ttl=1h0m0s) matches every cell it matches
}

// A dry run counts and shows what would change, and writes nothing.
func ExampleWithDryRun() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	m, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithDryRun(), migrate.WithClock(h.Clock), migrate.WithExamples(1))
	rep, _ := m.Run(ctx)
	fmt.Printf("would move %d, expired %d (kept); %d example(s)\n", rep.Moved, rep.ExpiredLeft, len(rep.Examples))
	r, _ := tbl.ReadRow(ctx, "order#1")
	fmt.Println("order#1 unchanged:", r["f"][0].Timestamp < bigtable.Time(now))
	// Output:
	// would move 2, expired 1 (kept); 1 example(s)
	// order#1 unchanged: true
}

// WithExamples keeps the first changed cells, for a report.
func ExampleWithExamples() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	m, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithExamples(5))
	rep, _ := m.Run(ctx)
	for _, x := range rep.Examples {
		if x.Expired {
			fmt.Println(x.Row, x.Column, "expired, kept")
			continue
		}
		fmt.Println(x.Row, x.Column, "moved by", x.New.Time().Sub(x.Old.Time()))
	}
	// Unordered output:
	// order#1 total moved by 720h0m0s
	// user#1 session moved by 168h0m0s
	// user#1 name expired, kept
}

// The clock decides which cells are already expired: here, two weeks on,
// the 7-day session and the 40-day-old cell are.
func ExampleWithClock() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	h.Clock.Set(now.Add(14 * 24 * time.Hour))
	m, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock))
	rep, _ := m.Run(ctx)
	fmt.Printf("moved %d, expired %d\n", rep.Moved, rep.ExpiredLeft)
	// Output:
	// moved 1, expired 2
}

// With a checkpoint, a rerun skips the key ranges a run finished.
func ExampleWithCheckpoint() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	dir, _ := os.MkdirTemp("", "migrate")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.checkpoint")
	for i := 0; i < 2; i++ {
		m, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithCheckpoint(path))
		rep, err := m.Run(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Printf("run %d: read %d rows; earlier runs moved %d\n", i+1, rep.Rows, rep.Earlier.Moved)
	}
	// Output:
	// run 1: read 2 rows; earlier runs moved 0
	// run 2: read 0 rows; earlier runs moved 2
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

// WithInflight bounds the rows' mutations in flight per scan worker.
func ExampleWithInflight() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	m, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithInflight(1))
	rep, _ := m.Run(ctx, scan.WithWorkers(2))
	fmt.Println(rep.Moved)
	// Output:
	// 2
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

// Each conditional write bounded: one that gets no answer within a minute
// fails Run with a *scan.StallError, as a read that stalls does, instead
// of waiting as long as the context allows.
func ExampleWithWriteTimeout() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	m, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithWriteTimeout(time.Minute))
	rep, err := m.Run(ctx)
	fmt.Println(err, rep.Moved)
	// Output: <nil> 2
}

// The scan reads through a Data Boost profile, the moves go through a
// single-cluster profile that allows transactional writes: on the
// production-rules server, as production does, the Data Boost profile
// alone refuses the moves.
func ExampleWithWriteTable() {
	ctx := context.Background()
	srv, err := prodserver.Start(ctx, prodserver.Config{Profiles: []prodserver.AppProfile{
		prodserver.DataBoost("boost", prodserver.DefaultCluster),
		prodserver.SingleCluster("batch", prodserver.DefaultCluster, true),
	}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{Addr: srv.Addr})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	if err := h.CreateTable(ctx, "events", strategy.Schema{"f": strategy.Unmanaged()}); err != nil {
		panic(err)
	}
	now := h.Clock.Now()
	m := bigtable.NewMutation()
	m.Set("f", "session", bigtable.Time(now.Add(-24*time.Hour)).TruncateToMilliseconds(), []byte("a"))
	if err := h.Raw.Open("events").Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}
	// Data Boost reads lag by half an hour: Flush stands for the wait.
	if err := srv.Flush(ctx); err != nil {
		panic(err)
	}
	open := func(profile string) *bigtable.Table {
		c, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
			bigtable.ClientConfig{AppProfile: profile, MetricsProvider: bigtable.NoopMetricsProvider{}},
			option.WithEndpoint(srv.Addr), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
		if err != nil {
			panic(err)
		}
		return c.Open("events")
	}
	boost, batch := open("boost"), open("batch")

	alone, _ := migrate.New(boost, "events", realToOneSecond(now), migrate.WithClock(h.Clock))
	_, err = alone.Run(ctx)
	fmt.Println("Data Boost alone:", status.Code(err) == codes.FailedPrecondition)

	mg, err := migrate.New(boost, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithWriteTable(batch))
	if err != nil {
		panic(err)
	}
	rep, err := mg.Run(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("with a write table: moved", rep.Moved)
	// Output:
	// Data Boost alone: true
	// with a write table: moved 1
}
