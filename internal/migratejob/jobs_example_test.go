package migratejob_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/scan"
	"github.com/bttl/bttl/strategy"
)

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

// firstAmbiguous runs the plan and returns the first ambiguous cell.
func firstAmbiguous(ctx context.Context, h *bttestharness.Harness, tbl *bigtable.Table, now time.Time) migrate.CellRef {
	m, err := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithAllAmbiguous())
	if err != nil {
		panic(err)
	}
	rep, err := m.Run(ctx)
	if err != nil {
		panic(err)
	}
	x := rep.AmbiguousExamples[0]
	return migrate.CellRef{Row: x.Row, Family: "f", Column: x.Column, Timestamp: x.Old}
}

// A cell between the first switch and the last legacy write cannot be
// told apart (a legacy write time, or an expiry bttl gave it): it is left
// as it is, counted, and with WithAllAmbiguous every one is listed, for an
// operator to resolve with MoveCell or DeleteCell.
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

// An operator who knows the ambiguous cell is a legacy write moves it to
// its expiry instant; the move is pinned, so a second one finds nothing.
func ExampleMoveCell() {
	ctx := context.Background()
	h, tbl, now := ambiguousTable(ctx)
	defer h.Close()
	c := firstAmbiguous(ctx, h, tbl, now)

	to := c.Timestamp + bigtable.Timestamp((7 * 24 * time.Hour).Microseconds()) // written then, kept 7 days
	fmt.Println(migrate.MoveCell(ctx, tbl, c, to))
	r, _ := tbl.ReadRow(ctx, c.Row)
	fmt.Println("now expires in", r["f"][0].Timestamp.Time().Sub(now))
	err := migrate.MoveCell(ctx, tbl, c, to)
	var ce *migrate.CellError
	fmt.Println(errors.Is(err, migrate.ErrNoSuchCell), errors.As(err, &ce) && ce.Cell == c)
	// Output:
	// <nil>
	// now expires in 166h30m0s
	// true true
}

// An ambiguous cell whose data is known to be unwanted (a deletion the
// copy revived, a stray write) is deleted alone, pinned as MoveCell pins;
// a CellRef naming no cell is refused before any RPC.
func ExampleDeleteCell() {
	ctx := context.Background()
	h, tbl, now := ambiguousTable(ctx)
	defer h.Close()
	c := firstAmbiguous(ctx, h, tbl, now)
	fmt.Println(migrate.DeleteCell(ctx, tbl, c))
	r, _ := tbl.ReadRow(ctx, c.Row)
	fmt.Println("cells left in", c.Row+":", len(r["f"]))
	fmt.Println(errors.Is(migrate.DeleteCell(ctx, tbl, migrate.CellRef{Family: "f", Column: "visit"}), migrate.ErrInvalidCell))
	// Output:
	// <nil>
	// cells left in user#2: 0
	// true
}

// A shard's run as the JSON report bttl migrate -json prints.
func ExampleMigrator_ShardReport() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	m, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithExamples(0))
	rep, err := m.Run(ctx, scan.WithShard(1, 2), scan.WithShardKeys("user#"))
	if err != nil {
		panic(err)
	}
	sr := m.ShardReport(rep)
	fmt.Println("shard", sr.Shard, "piece", sr.Piece, "complete:", sr.Complete)
	fmt.Printf("%+v\n", sr.Total)
	// Output:
	// shard 1/2 piece ["user#", end) complete: true
	// {Rows:1 Cells:2 Moved:1 MovedBefore:0 OnTarget:0 ExpiredDeleted:0 DeletedBefore:0 ExpiredLeft:1 Ambiguous:0 Changed:0 Collisions:0 TooLargeToPin:0 OutOfRange:0 NotRealTimes:0}
}

// shardReports runs the plan as two shards split at "user#" and returns
// their reports, as each process's bttl migrate -json would print them.
func shardReports(ctx context.Context, h *bttestharness.Harness, tbl *bigtable.Table, now time.Time, opts ...migrate.Option) []*migrate.ShardReport {
	var out []*migrate.ShardReport
	for i := 0; i < 2; i++ {
		m, err := migrate.New(tbl, "events", realToOneSecond(now), append([]migrate.Option{migrate.WithClock(h.Clock)}, opts...)...)
		if err != nil {
			panic(err)
		}
		rep, err := m.Run(ctx, scan.WithShard(i, 2), scan.WithShardKeys("user#"))
		if err != nil {
			panic(err)
		}
		out = append(out, m.ShardReport(rep))
	}
	return out
}

// Merge makes one job's result of its shards' reports; reports that do not
// make one job (here a shard missing) are refused.
func ExampleMerge() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	reports := shardReports(ctx, h, tbl, now)
	res, err := migrate.Merge(reports...)
	if err != nil {
		panic(err)
	}
	fmt.Println("shards:", res.Shards, "done:", res.Complete, "moved:", res.Total.MovedByJob(), "expired, kept:", res.Total.ExpiredLeft)
	_, err = migrate.Merge(reports[1])
	fmt.Println(errors.Is(err, migrate.ErrMerge))
	// Output:
	// shards: 2 done: true moved: 2 expired, kept: 1
	// true
}

// metricLines prints the lines of Prometheus text holding name's samples.
func metricLines(text []byte, name string) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), name+"{") {
			fmt.Println(sc.Text())
		}
	}
}

// A shard's figures as Prometheus gauges, shard label "i/n".
func ExampleShardReport_Series() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	var buf bytes.Buffer
	reports := shardReports(ctx, h, tbl, now)
	if err := migrate.WriteMetrics(&buf, reports[0].Series(), reports[1].Series()); err != nil {
		panic(err)
	}
	metricLines(buf.Bytes(), migrate.MetricRows)
	// Output:
	// bttl_migrate_rows{family="f",shard="0/2",table="events",target="f"} 1
	// bttl_migrate_rows{family="f",shard="1/2",table="events",target="f"} 1
}

// The merged job's figures, shard label "all": the series to alert on.
func ExampleJobResult_Series() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	res, err := migrate.Merge(shardReports(ctx, h, tbl, now)...)
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	if err := migrate.WriteMetrics(&buf, res.Series()); err != nil {
		panic(err)
	}
	metricLines(buf.Bytes(), migrate.MetricComplete)
	metricLines(buf.Bytes(), migrate.MetricUnmoved)
	// Output:
	// bttl_migrate_complete{family="f",shard="all",table="events",target="f"} 1
	// bttl_migrate_unmoved_cells{family="f",shard="all",table="events",target="f"} 0
}

// WriteMetrics writes the text exposition format; two series of one
// shard are refused.
func ExampleWriteMetrics() {
	s := migrate.MetricsSeries{Table: "events", Family: "f", Shard: "all", Now: "2026-01-02T10:00:00Z", Complete: true,
		Total: migrate.Counts{Rows: 2, Cells: 3, Moved: 2, ExpiredLeft: 1}}
	var buf bytes.Buffer
	if err := migrate.WriteMetrics(&buf, s); err != nil {
		panic(err)
	}
	metricLines(buf.Bytes(), migrate.MetricCells)
	fmt.Println(errors.Is(migrate.WriteMetrics(&buf, s, s), migrate.ErrMetrics))
	// Output:
	// bttl_migrate_cells{family="f",outcome="ambiguous",shard="all",table="events",target="f"} 0
	// bttl_migrate_cells{family="f",outcome="changed",shard="all",table="events",target="f"} 0
	// bttl_migrate_cells{family="f",outcome="collisions",shard="all",table="events",target="f"} 0
	// bttl_migrate_cells{family="f",outcome="expired_deleted",shard="all",table="events",target="f"} 0
	// bttl_migrate_cells{family="f",outcome="expired_left",shard="all",table="events",target="f"} 1
	// bttl_migrate_cells{family="f",outcome="moved",shard="all",table="events",target="f"} 2
	// bttl_migrate_cells{family="f",outcome="not_real_times",shard="all",table="events",target="f"} 0
	// bttl_migrate_cells{family="f",outcome="on_target",shard="all",table="events",target="f"} 0
	// bttl_migrate_cells{family="f",outcome="out_of_range",shard="all",table="events",target="f"} 0
	// bttl_migrate_cells{family="f",outcome="too_large_to_pin",shard="all",table="events",target="f"} 0
	// true
}

// WriteMetricsFile replaces the file whole, for node_exporter's textfile
// collector, which may read it at any time.
func ExampleWriteMetricsFile() {
	dir, _ := os.MkdirTemp("", "migrate")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "bttl_migrate.prom")
	s := migrate.MetricsSeries{Table: "events", Family: "f", Shard: "0/1", Now: "2026-01-02T10:00:00Z",
		Total: migrate.Counts{Rows: 2, Cells: 3, Changed: 1}}
	if err := migrate.WriteMetricsFile(path, s); err != nil {
		panic(err)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	metricLines(text, migrate.MetricUnmoved)
	metricLines(text, migrate.MetricTimestamp)
	// Output:
	// bttl_migrate_unmoved_cells{family="f",shard="0/1",table="events",target="f"} 1
	// bttl_migrate_timestamp_seconds{family="f",shard="0/1",table="events",target="f"} 1.767348e+09
}

// CountsOf is a run's Stats as the reports' JSON counts.
func ExampleCountsOf() {
	c := migrate.CountsOf(migrate.Stats{Rows: 2, Cells: 3, Moved: 2, ExpiredLeft: 1})
	b, _ := json.Marshal(c)
	fmt.Println(string(b))
	// Output:
	// {"rows":2,"cells":3,"moved":2,"moved_before":0,"on_target":0,"expired_deleted":0,"deleted_before":0,"expired_left":1,"ambiguous":0,"changed":0,"collisions":0,"too_large_to_pin":0,"out_of_range":0,"not_real_times":0}
}

// MovedByJob counts the cells earlier runs of the job moved in ranges
// this run did not read again (MovedBefore) with this run's.
func ExampleCounts_MovedByJob() {
	c := migrate.Counts{Moved: 10, MovedBefore: 90}
	fmt.Println(c.MovedByJob())
	// Output:
	// 100
}

func ExampleCounts_DeletedByJob() {
	c := migrate.Counts{ExpiredDeleted: 1, DeletedBefore: 4}
	fmt.Println(c.DeletedByJob())
	// Output:
	// 5
}

// Unmoved counts what keeps the job from being done.
func ExampleCounts_Unmoved() {
	c := migrate.Counts{Moved: 10, Ambiguous: 1, Changed: 1, ExpiredLeft: 3}
	fmt.Println(c.Unmoved())
	// Output:
	// 2
}

// Job is the plan as checkpoints and reports record it: two runs are of
// one job when their Jobs are equal.
func ExampleMigrator_Job() {
	now := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	m, _ := migrate.New(nil, "events", realToOneSecond(now))
	job := m.Job()
	fmt.Println(job.Migrate)
	fmt.Println(job.TTL, job.FirstSwitch, job.WrittenBefore)
	// Output:
	// family "f": real timestamps -> one-second, in place
	// [prefix=user#,column=session,ttl=168h0m0s ttl=720h0m0s] 2026-01-02T08:00:00Z 2026-01-02T09:00:00Z
}

// A second run of a migration with other TTL rules would give the cells
// the first one moved a second life: refused, from the first run's
// report (or checkpoint), before anything is written.
func ExampleMigrator_CheckEarlierRuns() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	first := shardReports(ctx, h, tbl, now)[0]
	rec, _ := json.Marshal(first)

	other := realToOneSecond(now)
	other.TTL = migrate.TTLRules{{TTL: 90 * 24 * time.Hour}}
	m, _ := migrate.New(tbl, "events", other, migrate.WithClock(h.Clock))
	err := m.CheckEarlierRuns(map[string][]byte{"reports/shard-0": rec})
	var tc *migrate.TTLChangeError
	fmt.Println(errors.Is(err, migrate.ErrTTLChanged), errors.As(err, &tc) && tc.Moved == 1, tc.Now)

	same, _ := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock))
	fmt.Println(same.CheckEarlierRuns(map[string][]byte{"reports/shard-0": rec}))
	// Output:
	// true true [ttl=2160h0m0s]
	// <nil>
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

// showCells prints row's cells: family:column@timestamp relative to base, in
// milliseconds.
func showCells(ctx context.Context, tbl *bigtable.Table, row string, base bigtable.Timestamp) {
	r, err := tbl.ReadRow(ctx, row)
	if err != nil {
		panic(err)
	}
	var cells []string
	for _, items := range r {
		for _, it := range items {
			cells = append(cells, fmt.Sprintf("%s@%+d=%s", it.Column, (it.Timestamp-base)/1000, it.Value))
		}
	}
	sort.Strings(cells)
	fmt.Println(strings.Join(cells, " "))
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

// A writer overwriting a copied source cell: the Set also deletes the
// copy holding the old value (the next copy run copies the new one).
func ExampleMirror_Set() {
	ctx := context.Background()
	h, tbl, p := copyTable(ctx)
	defer h.Close()
	base := at(h, 0)
	copyOnce(ctx, h, tbl, p, "user#1", base)
	showCells(ctx, tbl, "user#1", base)

	mirror, _ := migrate.NewMirror(p)
	mut := bigtable.NewMutation()
	mirror.Set(mut, "user#1", "home", base, []byte("one"))
	if err := tbl.Apply(ctx, "user#1", mut); err != nil {
		panic(err)
	}
	showCells(ctx, tbl, "user#1", base)
	// Output:
	// clicks24h:cart@+86400000=2 clicks24h:home@+86400000=1 clicks:cart@+0=2 clicks:home@+0=1
	// clicks24h:cart@+86400000=2 clicks:cart@+0=2 clicks:home@+0=one
}

// Deleting one source cell deletes its copy in the same row mutation.
func ExampleMirror_DeleteTimestampRange() {
	ctx := context.Background()
	h, tbl, p := copyTable(ctx)
	defer h.Close()
	base := at(h, 0)
	copyOnce(ctx, h, tbl, p, "user#1", base)
	mirror, _ := migrate.NewMirror(p)
	mut := bigtable.NewMutation()
	mirror.DeleteTimestampRange(mut, "user#1", "cart", base, base+1000)
	if err := tbl.Apply(ctx, "user#1", mut); err != nil {
		panic(err)
	}
	showCells(ctx, tbl, "user#1", base)
	// Output:
	// clicks24h:home@+86400000=1 clicks:home@+0=1
}

func ExampleMirror_DeleteCellsInColumn() {
	ctx := context.Background()
	h, tbl, p := copyTable(ctx)
	defer h.Close()
	base := at(h, 0)
	copyOnce(ctx, h, tbl, p, "user#1", base)
	mirror, _ := migrate.NewMirror(p)
	mut := bigtable.NewMutation()
	mirror.DeleteCellsInColumn(mut, "home")
	if err := tbl.Apply(ctx, "user#1", mut); err != nil {
		panic(err)
	}
	showCells(ctx, tbl, "user#1", base)
	// Output:
	// clicks24h:cart@+86400000=2 clicks:cart@+0=2
}

func ExampleMirror_DeleteCellsInFamily() {
	ctx := context.Background()
	h, tbl, p := copyTable(ctx)
	defer h.Close()
	base := at(h, 0)
	copyOnce(ctx, h, tbl, p, "user#1", base)
	mirror, _ := migrate.NewMirror(p)
	mut := bigtable.NewMutation()
	mirror.DeleteCellsInFamily(mut)
	mut.Set("clicks", "note", base, []byte("kept")) // one mutation: the new cell stays
	if err := tbl.Apply(ctx, "user#1", mut); err != nil {
		panic(err)
	}
	showCells(ctx, tbl, "user#1", base)
	// Output:
	// clicks:note@+0=kept
}

// A writer already switched to the target overwrites a copied cell: its
// source goes too, or the next copy run would count a collision.
func ExampleMirror_SetTarget() {
	ctx := context.Background()
	h, tbl, p := copyTable(ctx)
	defer h.Close()
	base := at(h, 0)
	copyOnce(ctx, h, tbl, p, "user#1", base)
	mirror, _ := migrate.NewMirror(p)
	r, _ := tbl.ReadRow(ctx, "user#1", bigtable.RowFilter(bigtable.FamilyFilter("clicks24h")))
	copied := r["clicks24h"][0] // the copy of cart
	mut := bigtable.NewMutation()
	mirror.SetTarget(mut, "user#1", "cart", copied.Timestamp, []byte("two"))
	if err := tbl.Apply(ctx, "user#1", mut); err != nil {
		panic(err)
	}
	showCells(ctx, tbl, "user#1", base)
	// Output:
	// clicks24h:cart@+86400000=two clicks24h:home@+86400000=1 clicks:home@+0=1
}

// A writer already switched to the target deletes a copied cell: its
// source goes too, or the next copy run would copy it back.
func ExampleMirror_DeleteTargetTimestampRange() {
	ctx := context.Background()
	h, tbl, p := copyTable(ctx)
	defer h.Close()
	base := at(h, 0)
	copyOnce(ctx, h, tbl, p, "user#1", base)
	mirror, _ := migrate.NewMirror(p)
	r, _ := tbl.ReadRow(ctx, "user#1", bigtable.RowFilter(bigtable.FamilyFilter("clicks24h")))
	copied := r["clicks24h"][0]
	mut := bigtable.NewMutation()
	mirror.DeleteTargetTimestampRange(mut, "user#1", strings.TrimPrefix(copied.Column, "clicks24h:"), copied.Timestamp, copied.Timestamp+1000)
	if err := tbl.Apply(ctx, "user#1", mut); err != nil {
		panic(err)
	}
	showCells(ctx, tbl, "user#1", base)
	// Output:
	// clicks24h:home@+86400000=1 clicks:home@+0=1
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

// Clean is what bttl migrate -check-copy exits 0 on.
func ExampleCopyCheck_Clean() {
	fmt.Println((&migrate.CopyCheck{TargetCells: 3, Matched: 3}).Clean())
	fmt.Println((&migrate.CopyCheck{TargetCells: 3, Matched: 2, OnlyInTarget: 1}).Clean())
	// Output:
	// true
	// false
}
