package migrate_test

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
	"github.com/bttl/bttl/migrate"
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

func ExampleParseTTLRule() {
	r, err := migrate.ParseTTLRule("prefix=user#,column=session,ttl=7d")
	fmt.Println(r.Prefix, r.Column, r.TTL, err)
	_, err = migrate.ParseTTLRule("prefix=user#")
	fmt.Println(err)
	// Output:
	// user# session 168h0m0s <nil>
	// bttl: invalid TTL rule: "prefix=user#": ttl is required
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

// ambiguousTable is legacyTable plus a cell written 90 minutes ago in row
// user#2: between realToOneSecond's FirstSwitch and WrittenBefore, so
// either a legacy write time or a bttl expiry instant (ambiguous).
func ambiguousTable(ctx context.Context) (*bttestharness.Harness, *bigtable.Table, time.Time) {
	h, tbl, now := legacyTable(ctx)
	m := bigtable.NewMutation()
	m.Set("f", "visit", bigtable.Time(now.Add(-90*time.Minute)).TruncateToMilliseconds(), []byte("d"))
	if err := tbl.Apply(ctx, "user#2", m); err != nil {
		panic(err)
	}
	return h, tbl, now
}

// A cell between the first switch and the last legacy write cannot be
// told apart (a legacy write time, or an expiry bttl gave it): it is left
// as it is, counted, and with WithAllAmbiguous every one is listed, for an
// operator to resolve (bttl migrate resolve).
func ExampleWithAllAmbiguous() {
	ctx := context.Background()
	h, tbl, now := ambiguousTable(ctx)
	defer h.Close()
	m, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithAllAmbiguous(), migrate.WithExamples(0))
	rep, err := m.Run(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("moved:", rep.Moved, "ambiguous:", rep.Ambiguous, "left to move:", rep.Unmoved())
	for _, x := range rep.AmbiguousExamples {
		fmt.Println(x.Row, x.Column, "written", now.Sub(x.Old.Time()), "ago, or expiring then")
	}
	// Output:
	// moved: 2 ambiguous: 1 left to move: 1
	// user#2 visit written 1h30m0s ago, or expiring then
}

// copyTable starts an in-process emulator with table "clicks" whose
// family "clicks" (48h default expiry) is being copied into "clicks24h"
// (24h), and the plan of that copy: a cell at t (expiring at t+48h) is
// copied to t+24h, which expires at the same instant.
func copyTable(ctx context.Context) (*bttestharness.Harness, *bigtable.Table, migrate.Plan) {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	if err := h.CreateTable(ctx, "clicks", strategy.Schema{"clicks": strategy.DefaultExpiry(48 * time.Hour), "clicks24h": strategy.DefaultExpiry(24 * time.Hour)}); err != nil {
		panic(err)
	}
	p := migrate.Plan{Family: "clicks", From: strategy.DefaultExpiry(48 * time.Hour), To: strategy.DefaultExpiry(24 * time.Hour), ToFamily: "clicks24h"}
	return h, h.Raw.Open("clicks"), p
}

// at is a timestamp ms milliseconds after the harness clock's now, whole.
func at(h *bttestharness.Harness, ms int64) bigtable.Timestamp {
	return bigtable.Time(h.Clock.Now()).TruncateToMilliseconds() + bigtable.Timestamp(ms*1000)
}

// copyOnce writes row's cells through the plain client and copies them.
func copyOnce(ctx context.Context, h *bttestharness.Harness, tbl *bigtable.Table, p migrate.Plan, row string, base bigtable.Timestamp) {
	mut := bigtable.NewMutation()
	mut.Set("clicks", "home", base, []byte("1"))
	mut.Set("clicks", "cart", base, []byte("2"))
	if err := tbl.Apply(ctx, row, mut); err != nil {
		panic(err)
	}
	m, err := migrate.New(tbl, "clicks", p, migrate.WithClock(h.Clock))
	if err != nil {
		panic(err)
	}
	if _, err := m.Run(ctx); err != nil {
		panic(err)
	}
}

// NewMirror takes a copy plan; in place there is no second family to
// mirror into.
func ExampleNewMirror() {
	const d = 48 * time.Hour
	_, err := migrate.NewMirror(migrate.Plan{Family: "f", From: strategy.DefaultExpiry(d), To: strategy.DefaultExpiry(d / 2), ToFamily: "g"})
	fmt.Println(err)
	_, err = migrate.NewMirror(migrate.Plan{Family: "f", From: strategy.Unmanaged(), To: strategy.OneSecond(), TTL: migrate.TTLRules{{TTL: d}},
		FirstSwitch: time.Unix(1e9, 0), WrittenBefore: time.Unix(1e9+60, 0)})
	fmt.Println(errors.Is(err, migrate.ErrInvalidPlan))
	// Output:
	// <nil>
	// true
}

// CheckCopy proves a copy: every target cell is the copy of a stored
// source cell. A source cell deleted without the Mirror leaves its copy,
// which the target family would serve: listed.
func ExampleMigrator_CheckCopy() {
	ctx := context.Background()
	h, tbl, p := copyTable(ctx)
	defer h.Close()
	base := at(h, 0)
	copyOnce(ctx, h, tbl, p, "user#1", base)
	m, _ := migrate.New(tbl, "clicks", p, migrate.WithClock(h.Clock))
	chk, err := m.CheckCopy(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("matched:", chk.Matched, "clean:", chk.Clean())

	mut := bigtable.NewMutation()
	mut.DeleteTimestampRange("clicks", "cart", base, base+1000) // not mirrored
	if err := tbl.Apply(ctx, "user#1", mut); err != nil {
		panic(err)
	}
	chk, _ = m.CheckCopy(ctx)
	for _, c := range chk.Cells {
		fmt.Println(c.What, c.Row, c.Family, c.Column)
	}
	// Output:
	// matched: 2 clean: true
	// only_in_target user#1 clicks24h cart
}
