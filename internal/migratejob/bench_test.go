package migratejob_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/internal/testenv"
	"github.com/bttl/bttl/strategy"
)

// BenchmarkMigratePace times, in each iteration and side by side on one
// server, a migration of real timestamps to one-second expiry (30 days)
// and the raw rewrite it is measured against: the plain client reading the
// same cells with the same scan (workers) and writing each row back by
// ApplyBulk (100 rows per call) as a Set at the new timestamp and a delete
// of the old cell, unconditionally. A third side, row, is the raw rewrite
// sent one row per RPC (an unconditional MutateRow per row, as many in
// flight per worker as migrate keeps): what one request per row costs
// without a condition, the floor of any conditional move (CheckAndMutateRow
// takes one row). Each side gets its own freshly loaded table of rows of
// 10 cells; the order of the sides rotates. Metrics per op: each side's
// wall time (raw-s, migrate-s, row-s), this process's CPU time
// (raw-cpu-s, ...: on bttest that includes the in-process server), on
// cbtemulator the emulator's CPU time too (raw-server-cpu-s, ...), and the
// ratios to raw (wall-x, cpu-x, total-cpu-x: client and server) and of
// migrate to row (migrate/row-wall, migrate/row-cpu). benchstat summarises
// -count runs. BTTL_MIGRATE_BENCH_CELLS (default 100000) and
// BTTL_MIGRATE_BENCH_WORKERS (default 1,4) pick the cases,
// BTTL_MIGRATE_BENCH_INFLIGHT the rows in flight per worker of migrate and
// row (default migrate.DefaultInflight).
//
//	go test ./migrate/ -run '^$' -bench '^BenchmarkMigratePace$' -benchtime 1x -count 5 -timeout 60m
func BenchmarkMigratePace(b *testing.B) {
	for _, server := range []string{"bttest", "cbtemulator"} {
		b.Run("server="+server, func(b *testing.B) {
			var h *bttestharness.Harness
			var serverCPU func() time.Duration // the emulator's CPU; nil on bttest, whose CPU is this process's
			if server == "bttest" {
				h = bttestharness.New(b)
			} else {
				if _, err := bttestharness.FindEmulator(); err != nil {
					testenv.Missing(b, testenv.CBTEmulator, err)
				}
				var e *bttestharness.Emulator
				h, e = bttestharness.NewOnEmulator(b, bttestharness.Config{})
				serverCPU = func() time.Duration {
					d, err := e.CPUTime()
					if err != nil {
						b.Fatal(err)
					}
					return d
				}
			}
			for _, cells := range benchInts(b, "BTTL_MIGRATE_BENCH_CELLS", "100000") {
				for _, workers := range benchInts(b, "BTTL_MIGRATE_BENCH_WORKERS", "1,4") {
					b.Run(fmt.Sprintf("cells=%d/workers=%d", cells, workers), func(b *testing.B) {
						benchPace(b, h, serverCPU, cells, workers)
					})
				}
			}
		})
	}
}

// benchInts is the comma-separated integers in the environment variable
// name, or def.
func benchInts(b *testing.B, name, def string) []int {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("%s=%q: %v", name, v, err)
		}
		out = append(out, n)
	}
	return out
}

var benchTables int

// The sides of benchPace.
const (
	sideRaw = iota
	sideMigrate
	sideRow
	sides
)

func benchPace(b *testing.B, h *bttestharness.Harness, server func() time.Duration, cells, workers int) {
	ctx := context.Background()
	var wall, cpu, srv [sides]time.Duration
	inflight := benchInts(b, "BTTL_MIGRATE_BENCH_INFLIGHT", strconv.Itoa(migrate.DefaultInflight))[0]
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		now := h.Clock.Now()
		var tables [sides]string
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
		for k := 0; k < sides; k++ {
			side := (i + k) % sides
			tbl := h.Raw.Open(tables[side])
			var s0 time.Duration
			if server != nil {
				s0 = server()
			}
			c0, t0 := cpuTime(), time.Now()
			var err error
			var moved int64
			switch side {
			case sideRaw:
				moved, err = rawRewrite(ctx, tbl, tables[side], workers, 30*day)
			case sideRow:
				moved, err = rowRewrite(ctx, tbl, tables[side], workers, inflight, 30*day)
			default:
				var m *migrate.Migrator
				if m, err = migrate.New(tbl, tables[side], inPlace(now, 30*day), migrate.WithClock(h.Clock), migrate.WithInflight(inflight)); err == nil {
					var rep *migrate.Report
					rep, err = m.Run(ctx, scan.WithWorkers(workers))
					if rep != nil {
						moved = rep.Moved
					}
				}
			}
			wall[side] += time.Since(t0)
			cpu[side] += cpuTime() - c0
			if server != nil {
				srv[side] += server() - s0
			}
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
	for side, name := range [sides]string{"raw", "migrate", "row"} {
		b.ReportMetric(wall[side].Seconds()/n, name+"-s")
		b.ReportMetric(cpu[side].Seconds()/n, name+"-cpu-s")
		if server != nil {
			b.ReportMetric(srv[side].Seconds()/n, name+"-server-cpu-s")
		}
	}
	b.ReportMetric(wall[sideMigrate].Seconds()/wall[sideRaw].Seconds(), "wall-x")
	b.ReportMetric(cpu[sideMigrate].Seconds()/cpu[sideRaw].Seconds(), "cpu-x")
	b.ReportMetric((cpu[sideMigrate]+srv[sideMigrate]).Seconds()/(cpu[sideRaw]+srv[sideRaw]).Seconds(), "total-cpu-x")
	b.ReportMetric(wall[sideMigrate].Seconds()/wall[sideRow].Seconds(), "migrate/row-wall")
	b.ReportMetric(cpu[sideMigrate].Seconds()/cpu[sideRow].Seconds(), "migrate/row-cpu")
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
				keys, muts = append(keys, r.Key()), append(muts, rewrite(r, shift))
				n += int64(len(r["f"]))
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

// rewrite is the raw rewrite of r's family "f": each cell deleted and set
// again shift later, unconditionally.
func rewrite(r bigtable.Row, shift bigtable.Timestamp) *bigtable.Mutation {
	m := bigtable.NewMutation()
	for _, it := range r["f"] {
		q := it.Column[len("f:"):]
		m.DeleteTimestampRange("f", q, it.Timestamp, it.Timestamp+1000)
		m.Set("f", q, it.Timestamp+shift, it.Value)
	}
	return m
}

// rowRewrite is rawRewrite one row per RPC: each row's Set and delete
// sent by an unconditional Apply (MutateRow), up to inflight rows in
// flight per worker, as migrate keeps its conditional mutations.
func rowRewrite(ctx context.Context, tbl *bigtable.Table, table string, workers, inflight int, ttl time.Duration) (int64, error) {
	shift := bigtable.Timestamp(ttl / time.Microsecond)
	var moved atomic.Int64
	_, err := scan.RunRanges(ctx, tbl, table, func(scan.Range) (scan.RowFunc, func() (json.RawMessage, error)) {
		var (
			wg    sync.WaitGroup
			sem   = make(chan struct{}, inflight)
			mu    sync.Mutex
			first error
		)
		return func(ctx context.Context, r bigtable.Row) error {
				m, n := rewrite(r, shift), int64(len(r["f"]))
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					if err := tbl.Apply(ctx, r.Key(), m); err != nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
						return
					}
					moved.Add(n)
				}()
				return nil
			}, func() (json.RawMessage, error) {
				wg.Wait()
				mu.Lock()
				defer mu.Unlock()
				return nil, first
			}
	}, scan.WithWorkers(workers), scan.WithFilter(bigtable.FamilyFilter("^f$")))
	return moved.Load(), err
}
