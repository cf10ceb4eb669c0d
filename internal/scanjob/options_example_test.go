package scanjob_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// countRows scans events with opts and returns the rows delivered.
func countRows(opts ...scan.Option) int64 {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	var rows atomic.Int64
	_, err := scan.Run(ctx, tbl, "events", func(context.Context, bigtable.Row) error {
		rows.Add(1)
		return nil
	}, opts...)
	if err != nil {
		panic(err)
	}
	return rows.Load()
}

// A library built on scan adds its own parameters to the checkpoint's job
// (here a version of its counting), whatever job its caller gave: a run
// with other parameters is refused.
func ExampleWithJob() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	dir, _ := os.MkdirTemp("", "scan")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.checkpoint")
	count := func(version int, opts ...scan.Option) error {
		_, err := scan.Run(ctx, tbl, "events", func(context.Context, bigtable.Row) error { return nil },
			append(opts, scan.WithJob(map[string]int{"counting": version}))...)
		return err
	}
	fmt.Println(count(1, scan.WithCheckpoint(path, "job 1")))
	fmt.Println(errors.Is(count(2, scan.WithCheckpoint(path, "job 1")), scan.ErrCheckpoint))
	// Output:
	// <nil>
	// true
}

func ExampleWithReadOptions() {
	// LimitRows applies per range: one row from each. The scan starts at
	// the first row, so every range holds one: the ranges are cut at
	// SampleRowKeys' points, which are row keys. (From "" the first range
	// would end at a random point of the emulator's sample, once in a
	// hundred runs the first row, and hold none.)
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	sum, err := scan.Run(ctx, tbl, "events", func(context.Context, bigtable.Row) error { return nil },
		scan.WithRange("user#0000", ""), scan.WithReadOptions(bigtable.LimitRows(1)))
	if err != nil {
		panic(err)
	}
	fmt.Println(sum.Rows == int64(len(sum.Ranges)))
	// Output: true
}

func ExampleCoalesce() {
	fmt.Println(scan.Coalesce([]scan.Range{{Start: "m", End: ""}, {Start: "a", End: "f"}, {Start: "f", End: "k"}}))
	// Output: [["a", "k") ["m", end)]
}

func ExampleRange_RowSet() {
	r := scan.Range{Start: "a", End: "b"}
	fmt.Println(r.RowSet())
	// Output: ["a","b")
}

func ExampleRange_Contains() {
	r := scan.Range{Start: "a", End: "b"}
	fmt.Println(r.Contains("a"), r.Contains("az"), r.Contains("b"), scan.Range{Start: "a"}.Contains("zzz"))
	// Output: true true false true
}

// Keys that are not valid UTF-8 are written in base64, which JSON keeps.
func ExampleRange_MarshalJSON() {
	b, _ := json.Marshal(scan.Range{Start: "user#1", End: "\xff"})
	fmt.Println(string(b))
	// Output: {"start":"user#1","end":{"base64":"/w=="}}
}

func ExampleRange_UnmarshalJSON() {
	var r scan.Range
	_ = json.Unmarshal([]byte(`{"start":"a","end":{"base64":"/w=="}}`), &r)
	fmt.Printf("%q %q\n", r.Start, r.End)
	// Output: "a" "\xff"
}

func ExampleSummary_Complete() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	sum, _ := scan.Run(ctx, tbl, "events", func(context.Context, bigtable.Row) error { return nil }, scan.WithLimit(5))
	fmt.Println(sum.Complete(), sum.Limited)
	// Output: false true
}

func ExampleSummary_Covered() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	sum, _ := scan.Run(ctx, tbl, "events", func(context.Context, bigtable.Row) error { return nil },
		scan.WithRange("user#0100", "user#0900"))
	fmt.Println(sum.Covered())
	// Output: [["user#0100", "user#0900")]
}

// Checkpoints kept in a table of the instance (created by the first run):
// a second run, say a job's task restarted on another machine with no
// local files, finds every range finished and reads nothing again.
func ExampleWithBigtableCheckpoints() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	run := func() *scan.Summary {
		sum, err := scan.Run(ctx, tbl, "events", func(context.Context, bigtable.Row) error { return nil },
			scan.WithCheckpoint("bigtable://bttl_checkpoints", "job 1"), scan.WithBigtableCheckpoints(h.Raw, h.Admin))
		if err != nil {
			panic(err)
		}
		return sum
	}
	first, second := run(), run()
	fmt.Println("first run read:", first.Rows, "second run read:", second.Rows, "complete:", second.Complete())
	// Output: first run read: 1000 second run read: 0 complete: true
}

// A record of one's own (a shard's report, say) kept in a row of a table
// of the instance, created when missing: Open claims the row, Save writes
// it while the claim holds, and ReadBigtableRecords reads a prefix's rows.
func ExampleNewBigtableStore() {
	ctx := context.Background()
	h, _ := exampleTable(ctx)
	defer h.Close()
	for i, report := range []string{`{"rows": 600}`, `{"rows": 400}`} {
		st, err := scan.NewBigtableStore(ctx, h.Raw, h.Admin, "bttl_reports", fmt.Sprintf("audit/job1/%d/2", i))
		if err != nil {
			panic(err)
		}
		if _, err := st.Open(ctx); err != nil {
			panic(err)
		}
		if err := st.Save(ctx, []byte(report)); err != nil {
			panic(err)
		}
	}
	recs, err := scan.ReadBigtableRecords(ctx, h.Raw, "bttl_reports", "audit/job1/")
	if err != nil {
		panic(err)
	}
	fmt.Println(string(recs["audit/job1/0/2"]), string(recs["audit/job1/1/2"]))
	// Output: {"rows": 600} {"rows": 400}
}

// ReadBigtableRecords: see NewBigtableStore. A row claimed but not yet
// written reads as nil.
func ExampleReadBigtableRecords() {
	ctx := context.Background()
	h, _ := exampleTable(ctx)
	defer h.Close()
	st, err := scan.NewBigtableStore(ctx, h.Raw, h.Admin, "bttl_reports", "audit/job2/0/1")
	if err != nil {
		panic(err)
	}
	if _, err := st.Open(ctx); err != nil {
		panic(err)
	}
	recs, err := scan.ReadBigtableRecords(ctx, h.Raw, "bttl_reports", "audit/job2/")
	if err != nil {
		panic(err)
	}
	fmt.Println(len(recs), recs["audit/job2/0/1"] == nil)
	// Output: 1 true
}

// The keys "user#..." all sort below 0x80, so the default even split of the
// key space gives shard 1 of 2 nothing: the scan says so.
func ExampleWithShardWarnings() {
	countRows(scan.WithShard(1, 2), scan.WithShardWarnings(func(w scan.ShardWarning) {
		if w.Empty {
			fmt.Printf("shard %s of %q held no rows: use SuggestShardKeys\n", w.Shard, w.Table)
		}
	}))
	// Output: shard 1/2 of "events" held no rows: use SuggestShardKeys
}

// A job that writes gives each range's result a witness of its writes
// and checks it on resume: a range whose witness is gone (the table was
// restored, or re-created) is read again. Here the witness is the range's
// first row, and the check finds it deleted in one range.
func ExampleWithResumeCheck() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("resume-%d.checkpoint", time.Now().UnixNano()))
	defer os.Remove(path)
	perRange := func(rg scan.Range) (scan.RowFunc, func() (json.RawMessage, error)) {
		var first atomic.Value
		return func(_ context.Context, r bigtable.Row) error {
				first.CompareAndSwap(nil, r.Key())
				return nil
			}, func() (json.RawMessage, error) {
				return json.Marshal(first.Load())
			}
	}
	opts := []scan.Option{scan.WithCheckpoint(path, "job"), scan.WithRanges(4)}
	if _, err := scan.RunRanges(ctx, tbl, "events", perRange, opts...); err != nil {
		panic(err)
	}
	gone := bigtable.NewMutation()
	gone.DeleteRow()
	if err := tbl.Apply(ctx, "user#0000", gone); err != nil {
		panic(err)
	}
	stillThere := func(ctx context.Context, _ scan.Range, result json.RawMessage) (bool, error) {
		var key string
		if err := json.Unmarshal(result, &key); err != nil {
			return false, nil
		}
		row, err := tbl.ReadRow(ctx, key)
		return len(row) > 0, err
	}
	sum, err := scan.RunRanges(ctx, tbl, "events", perRange, append(opts, scan.WithResumeCheck(stillThere))...)
	if err != nil {
		panic(err)
	}
	fmt.Println("ranges read again:", sum.Undone, "complete:", sum.Complete())
	// Output:
	// ranges read again: 1 complete: true
}

// Recorded reads what a checkpoint records without running the scan (and
// without claiming a Bigtable row): here, after a run stopped midway.
func ExampleRecorded() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("recorded-%d.checkpoint", time.Now().UnixNano()))
	defer os.Remove(path)
	opts := []scan.Option{scan.WithCheckpoint(path, "job"), scan.WithRanges(4)}
	none, err := scan.Recorded(ctx, "events", opts...)
	fmt.Println("before any run:", none == nil, err)
	stop := errors.New("stop")
	_, _ = scan.Run(ctx, tbl, "events", func(_ context.Context, r bigtable.Row) error {
		if r.Key() == "user#0900" {
			return stop
		}
		return nil
	}, append(opts, scan.WithWorkers(1))...)
	rec, err := scan.Recorded(ctx, "events", opts...)
	if err != nil {
		panic(err)
	}
	fmt.Println("recorded:", len(rec.Ranges) > 0, "complete:", rec.Complete())
	// Output:
	// before any run: true <nil>
	// recorded: true complete: false
}

// ListBigtableRecords and ParseCheckpoint show the checkpoints kept in a
// table of the instance (bttl checkpoint list); RemoveBigtableRecord
// removes one unless a run claimed it since.
func ExampleListBigtableRecords() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	_, err := scan.Run(ctx, tbl, "events", func(context.Context, bigtable.Row) error { return nil },
		scan.WithCheckpoint("bigtable://state", "job"), scan.WithBigtableCheckpoints(h.Raw, h.Admin))
	if err != nil {
		panic(err)
	}
	recs, err := scan.ListBigtableRecords(ctx, h.Raw, "state", "events#")
	if err != nil {
		panic(err)
	}
	for _, r := range recs {
		info, err := scan.ParseCheckpoint(r.Record)
		if err != nil {
			panic(err)
		}
		fmt.Println(info.Table, info.Shard, info.Done == info.Ranges, r.Written.Add(scan.RecordTTL).After(time.Now()))
		removed, err := scan.RemoveBigtableRecord(ctx, h.Raw, "state", r)
		fmt.Println("removed:", removed, err)
	}
	// Output:
	// events 0/1 true true
	// removed: true <nil>
}
