package migrate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/migrate"
	"github.com/bttl/bttl/scan"
	"github.com/bttl/bttl/strategy"
)

// BenchmarkMigratePace times, in each iteration and side by side on one
// server, a migration of real timestamps to one-second expiry (30 days)
// and the raw rewrite it is measured against: the plain client reading the
// same cells with the same scan (workers) and writing each row back by
// ApplyBulk (100 rows per call) as a Set at the new timestamp and a delete
// of the old cell, unconditionally. Each side gets its own freshly loaded
// table of rows of 10 cells; which side goes first alternates. Metrics
// per op: each side's wall time (raw-s, migrate-s) and this process's CPU
// time (raw-cpu-s, migrate-cpu-s: on bttest that includes the in-process
// server), and the ratios. benchstat summarises -count runs.
//
//	go test ./migrate/ -run '^$' -bench '^BenchmarkMigratePace$' -benchtime 1x -count 5 -timeout 60m
func BenchmarkMigratePace(b *testing.B) {
	for _, server := range []string{"bttest", "cbtemulator"} {
		b.Run("server="+server, func(b *testing.B) {
			var h *bttestharness.Harness
			if server == "bttest" {
				h = bttestharness.New(b)
			} else {
				if _, err := bttestharness.FindEmulator(); err != nil {
					if os.Getenv("CI") == "true" {
						b.Fatalf("cbtemulator: %v", err)
					}
					b.Skipf("cbtemulator: %v", err)
				}
				h, _ = bttestharness.NewOnEmulator(b, bttestharness.Config{})
			}
			for _, cells := range []int{20_000, 100_000} {
				for _, workers := range []int{1, 4} {
					b.Run(fmt.Sprintf("cells=%d/workers=%d", cells, workers), func(b *testing.B) {
						benchPace(b, h, cells, workers)
					})
				}
			}
		})
	}
}

var benchTables int

func benchPace(b *testing.B, h *bttestharness.Harness, cells, workers int) {
	ctx := context.Background()
	var wall, cpu [2]time.Duration // raw, migrate
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		now := h.Clock.Now()
		var tables [2]string
		for side := range tables {
			benchTables++
			tables[side] = fmt.Sprintf("pace%d", benchTables)
			if err := h.CreateTable(ctx, tables[side], strategy.Schema{"f": strategy.Unmanaged()}); err != nil {
				b.Fatal(err)
			}
			benchLoad(b, h.Raw.Open(tables[side]), cells/10, now)
		}
		h.Clock.Set(now.Add(time.Second))
		b.StartTimer()
		for k := 0; k < 2; k++ {
			side := (i + k) % 2
			tbl := h.Raw.Open(tables[side])
			c0, t0 := cpuTime(), time.Now()
			var err error
			var moved int64
			if side == 0 {
				moved, err = rawRewrite(ctx, tbl, tables[side], workers, 30*day)
			} else {
				var m *migrate.Migrator
				if m, err = migrate.New(tbl, tables[side], inPlace(now, 30*day), migrate.WithClock(h.Clock)); err == nil {
					var rep *migrate.Report
					rep, err = m.Run(ctx, scan.WithWorkers(workers))
					if rep != nil {
						moved = rep.Moved
					}
				}
			}
			wall[side] += time.Since(t0)
			cpu[side] += cpuTime() - c0
			if err != nil {
				b.Fatal(err)
			}
			if moved != int64(cells) {
				b.Fatalf("side %d moved %d of %d cells", side, moved, cells)
			}
		}
		b.StopTimer()
		for _, t := range tables {
			if err := h.Admin.DeleteTable(ctx, t); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(wall[0].Seconds()/n, "raw-s")
	b.ReportMetric(wall[1].Seconds()/n, "migrate-s")
	b.ReportMetric(wall[1].Seconds()/wall[0].Seconds(), "wall-x")
	b.ReportMetric(cpu[0].Seconds()/n, "raw-cpu-s")
	b.ReportMetric(cpu[1].Seconds()/n, "migrate-cpu-s")
	b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "cpu-x")
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchLoad writes rows rows of 10 cells with real timestamps before now,
// distinct per column, from 4 goroutines.
func benchLoad(b *testing.B, tbl *bigtable.Table, rows int, now time.Time) {
	ctx := context.Background()
	const batch = 500
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := g * batch; lo < rows; lo += 4 * batch {
				var keys []string
				var muts []*bigtable.Mutation
				for r := lo; r < min(lo+batch, rows); r++ {
					m := bigtable.NewMutation()
					for c := 0; c < 10; c++ {
						ts := bigtable.Time(now.Add(-time.Duration(1+(r*10+c)%864_000) * time.Second)).TruncateToMilliseconds()
						m.Set("f", fmt.Sprintf("c%02d", c), ts, []byte(fmt.Sprintf("row%07d/c%02d", r, c)))
					}
					keys = append(keys, fmt.Sprintf("row%07d", r))
					muts = append(muts, m)
				}
				rerrs, err := tbl.ApplyBulk(ctx, keys, muts)
				if err == nil {
					for _, e := range rerrs {
						if e != nil {
							err = e
							break
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// rawRewrite is the reference: the same scan, each row written back by
// ApplyBulk (100 rows per call, one call in flight per worker) as a Set
// at ts + ttl and a delete of the old millisecond, with no condition.
func rawRewrite(ctx context.Context, tbl *bigtable.Table, table string, workers int, ttl time.Duration) (int64, error) {
	shift := bigtable.Timestamp(ttl / time.Microsecond)
	var mu sync.Mutex
	var moved int64
	_, err := scan.RunRanges(ctx, tbl, table, func(scan.Range) (scan.RowFunc, func() (json.RawMessage, error)) {
		var keys []string
		var muts []*bigtable.Mutation
		n := int64(0)
		flush := func(ctx context.Context) error {
			if len(keys) == 0 {
				return nil
			}
			errs, err := tbl.ApplyBulk(ctx, keys, muts)
			if err == nil {
				for _, e := range errs {
					if e != nil {
						return e
					}
				}
			}
			keys, muts = keys[:0], muts[:0]
			return err
		}
		return func(ctx context.Context, r bigtable.Row) error {
				m := bigtable.NewMutation()
				for _, it := range r["f"] {
					q := it.Column[len("f:"):]
					m.DeleteTimestampRange("f", q, it.Timestamp, it.Timestamp+1000)
					m.Set("f", q, it.Timestamp+shift, it.Value)
					n++
				}
				keys, muts = append(keys, r.Key()), append(muts, m)
				if len(keys) == 100 {
					return flush(ctx)
				}
				return nil
			}, func() (json.RawMessage, error) {
				if err := flush(ctx); err != nil {
					return nil, err
				}
				mu.Lock()
				moved += n
				mu.Unlock()
				return nil, nil
			}
	}, scan.WithWorkers(workers), scan.WithFilter(bigtable.FamilyFilter("^f$")))
	return moved, err
}
