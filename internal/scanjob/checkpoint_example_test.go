package scanjob_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"cloud.google.com/go/bigtable"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// A range whose work is not all done returns its result wrapped with
// ErrUnfinished: the checkpoint records it, and the next run, reading the
// range again, is given it as prior. Here rows user#09xx are busy on the
// first attempt; the work done on the others no longer shows when the
// range is read again (as a migration's moved cells), so the second run
// carries the first one's count over.
func ExampleRunResumedRanges() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	dir, _ := os.MkdirTemp("", "scan")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.checkpoint")

	var mu sync.Mutex
	handled := map[string]bool{} // the work: done once per row
	type result struct{ Handled, Busy int }
	run := func(busy string) *scan.Summary {
		sum, err := scan.RunResumedRanges(ctx, tbl, "events", func(_ scan.Range, prior json.RawMessage) (scan.RowFunc, func() (json.RawMessage, error)) {
			var res result
			if prior != nil {
				if err := json.Unmarshal(prior, &res); err != nil {
					panic(err)
				}
				res.Busy = 0
			}
			return func(_ context.Context, r bigtable.Row) error {
					mu.Lock()
					defer mu.Unlock()
					switch {
					case handled[r.Key()]:
					case busy != "" && strings.HasPrefix(r.Key(), busy):
						res.Busy++
					default:
						handled[r.Key()] = true
						res.Handled++
					}
					return nil
				}, func() (json.RawMessage, error) {
					b, err := json.Marshal(res)
					if err != nil || res.Busy == 0 {
						return b, err
					}
					return b, fmt.Errorf("%w: %d row(s) busy", scan.ErrUnfinished, res.Busy)
				}
		}, scan.WithCheckpoint(path, "handle rows"))
		if err != nil {
			panic(err)
		}
		return sum
	}
	for _, busy := range []string{"user#09", ""} {
		sum := run(busy)
		var total result
		for _, r := range sum.Ranges {
			var res result
			if err := json.Unmarshal(r.Result, &res); err != nil {
				panic(err)
			}
			total.Handled, total.Busy = total.Handled+res.Handled, total.Busy+res.Busy
		}
		fmt.Printf("complete: %v, %+v\n", sum.Complete(), total)
	}
	// Output:
	// complete: false, {Handled:900 Busy:100}
	// complete: true, {Handled:1000 Busy:0}
}

// ParseCheckpoint reads what a checkpoint says (the table, the shard, how
// many of its ranges are finished), as bttl checkpoint list shows it;
// anything else is refused with ErrCheckpoint.
func ExampleParseCheckpoint() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	dir, _ := os.MkdirTemp("", "scan")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.checkpoint")
	if _, err := scan.Run(ctx, tbl, "events", func(context.Context, bigtable.Row) error { return nil },
		scan.WithCheckpoint(path, "count rows"), scan.WithShard(0, 2)); err != nil {
		panic(err)
	}

	rec, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	info, err := scan.ParseCheckpoint(rec)
	if err != nil {
		panic(err)
	}
	fmt.Printf("table %s, shard %s, piece %s, job %s, every range done: %v\n", info.Table, info.Shard, info.Piece, info.Job, info.Done == info.Ranges)
	_, err = scan.ParseCheckpoint([]byte(`{"rows": 3}`))
	fmt.Println(errors.Is(err, scan.ErrCheckpoint))
	// Output:
	// table events, shard 0/2, piece ["", "\x80\x00\x00\x00"), job "count rows", every range done: true
	// true
}

// RemoveBigtableRecord removes a listed record only if nothing claimed or
// wrote its row since it was listed: a run that took the checkpoint over
// meanwhile keeps it, and a fresh listing is needed to remove it.
func ExampleRemoveBigtableRecord() {
	ctx := context.Background()
	h, tbl := exampleTable(ctx)
	defer h.Close()
	count := func() {
		if _, err := scan.Run(ctx, tbl, "events", func(context.Context, bigtable.Row) error { return nil },
			scan.WithCheckpoint("bigtable://state", "job"), scan.WithBigtableCheckpoints(h.Raw, h.Admin)); err != nil {
			panic(err)
		}
	}
	list := func() []scan.StoredRecord {
		recs, err := scan.ListBigtableRecords(ctx, h.Raw, "state", "events#")
		if err != nil {
			panic(err)
		}
		return recs
	}
	count()
	stale := list()
	count() // a run with the same checkpoint writes its row again
	removed, err := scan.RemoveBigtableRecord(ctx, h.Raw, "state", stale[0])
	fmt.Println("stale listing removed:", removed, err)
	removed, err = scan.RemoveBigtableRecord(ctx, h.Raw, "state", list()[0])
	fmt.Println("fresh listing removed:", removed, err)
	fmt.Println("records left:", len(list()))
	// Output:
	// stale listing removed: false <nil>
	// fresh listing removed: true <nil>
	// records left: 0
}
