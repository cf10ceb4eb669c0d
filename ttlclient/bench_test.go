package ttlclient_test

// Benchmarks of the raw *bigtable.Table against ttlclient.Table on the same
// in-process bttest server, same data, same process. Each pair is a pair of
// sub-benchmarks impl=raw and impl=ttl run one after the other, so benchstat
// can compare them and -count interleaves them. They do not run without
// -bench. See BENCHMARKS.md and scripts/bench.sh.

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/benchloop"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

const (
	benchFam   = "f"
	benchCells = 10
)

// benchStrategy is one strategy under benchmark: its policy, how the library
// is asked to stamp a cell, and the timestamp a raw caller would write for
// the same cell.
type benchStrategy struct {
	name   string
	policy strategy.Policy
	opt    cellOpt
	ttl    time.Duration // the TTL opt gives, on an age family
	rawTS  func(now time.Time) bigtable.Timestamp
}

func benchStrategies() []benchStrategy {
	return []benchStrategy{
		{
			name:   "one-second",
			policy: strategy.OneSecond(),
			opt:    withTTL(time.Hour),
			ttl:    time.Hour,
			rawTS:  func(now time.Time) bigtable.Timestamp { return bigtable.Time(now.Add(time.Hour)) },
		},
		{
			name:   "default-expiry",
			policy: strategy.DefaultExpiry(time.Hour),
			opt:    withTTL(30 * time.Minute),
			ttl:    30 * time.Minute,
			rawTS:  func(now time.Time) bigtable.Timestamp { return bigtable.Time(now.Add(-30 * time.Minute)) },
		},
		{
			name:   "sequence",
			policy: strategy.Sequence(3),
			opt:    withSeq(7),
			rawTS:  func(time.Time) bigtable.Timestamp { return 7000 },
		},
	}
}

var (
	benchColumns = func() []string {
		cols := make([]string, benchCells)
		for i := range cols {
			cols[i] = fmt.Sprintf("col%02d", i)
		}
		return cols
	}()
	benchValue = []byte("0123456789abcdef0123456789abcdef") // 32 bytes
)

// benchEnv is one table per strategy on one server: the raw table and the
// library's table are handles on the same table.
type benchEnv struct {
	h   *bttestharness.Harness
	raw *bigtable.Table
	ttl *ttlclient.Table
	s   benchStrategy
	fb  *filters.Builder
	ctx context.Context
}

func newBenchEnv(b *testing.B, s benchStrategy) *benchEnv {
	b.Helper()
	// The scale benchmarks send more than gRPC's default 4 MiB per call.
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{
		ServerOptions: []grpc.ServerOption{grpc.MaxRecvMsgSize(256 << 20)},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close() })
	tbl := h.MustTable(b, "bench", strategy.Schema{benchFam: s.policy})
	fb, err := filters.New(strategy.Schema{benchFam: s.policy})
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{h: h, raw: h.Raw.Open("bench"), ttl: tbl, s: s, fb: fb, ctx: context.Background()}
}

func (e *benchEnv) rawMutation() *bigtable.Mutation {
	ts := e.s.rawTS(e.h.Clock.Now())
	m := bigtable.NewMutation()
	for _, c := range benchColumns {
		m.Set(benchFam, c, ts, benchValue)
	}
	return m
}

// rawTTLFilter is the filter the library sends for a read now, made by the
// public filters package as a raw caller managing TTLs would (one Builder
// per table): the impl=rawfilter reads separate the wrapper's own cost from
// the cost of filtering on the server.
func (e *benchEnv) rawTTLFilter() bigtable.Filter {
	return e.fb.TTL(bigtable.Time(e.h.Clock.Now()))
}

func (e *benchEnv) ttlMutation() *ttlclient.Mutation {
	return ttlMutation(e.s)
}

func ttlMutation(s benchStrategy) *ttlclient.Mutation {
	m := ttlclient.NewMutation()
	for _, c := range benchColumns {
		setCell(m, benchFam, c, bigtable.ServerTime, benchValue, s.opt)
	}
	return m
}

// load writes n rows of cells cells each through the library, keys
// rowKey(prefix, i).
func (e *benchEnv) load(b *testing.B, prefix string, n, cells int) {
	b.Helper()
	const batch = 1000
	for start := 0; start < n; start += batch {
		end := min(start+batch, n)
		keys := make([]string, 0, end-start)
		muts := make([]*ttlclient.Mutation, 0, end-start)
		for i := start; i < end; i++ {
			m := ttlclient.NewMutation()
			for _, c := range benchColumns[:cells] {
				setCell(m, benchFam, c, bigtable.ServerTime, benchValue, e.s.opt)
			}
			keys = append(keys, rowKey(prefix, i))
			muts = append(muts, m)
		}
		errs, err := e.ttl.ApplyBulk(e.ctx, keys, muts)
		if err != nil || errs != nil {
			b.Fatalf("load: %v %v", err, errs)
		}
	}
}

func forEachStrategy(b *testing.B, f func(b *testing.B, s benchStrategy)) {
	for _, s := range benchStrategies() {
		b.Run("strategy="+s.name, func(b *testing.B) { f(b, s) })
	}
}

// BenchmarkApply: one row, 10 cells. The mutation is built inside the loop
// on both sides, as a caller would.
func BenchmarkApply(b *testing.B) {
	forEachStrategy(b, func(b *testing.B, s benchStrategy) {
		e := newBenchEnv(b, s)
		b.Run("impl=raw", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := e.raw.Apply(e.ctx, rowKey("apply", i%1000), e.rawMutation()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("impl=ttl", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := e.ttl.Apply(e.ctx, rowKey("apply", i%1000), e.ttlMutation()); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkApplyBulk: 100 rows x 10 cells per call.
func BenchmarkApplyBulk(b *testing.B) {
	forEachStrategy(b, func(b *testing.B, s benchStrategy) {
		e := newBenchEnv(b, s)
		const rows = 100
		keys := make([]string, rows)
		for i := range keys {
			keys[i] = rowKey("bulk", i)
		}
		b.Run("impl=raw", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				muts := make([]*bigtable.Mutation, rows)
				for i := range muts {
					muts[i] = e.rawMutation()
				}
				if errs, err := e.raw.ApplyBulk(e.ctx, keys, muts); err != nil || errs != nil {
					b.Fatal(err, errs)
				}
			}
		})
		b.Run("impl=ttl", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				muts := make([]*ttlclient.Mutation, rows)
				for i := range muts {
					muts[i] = e.ttlMutation()
				}
				if errs, err := e.ttl.ApplyBulk(e.ctx, keys, muts); err != nil || errs != nil {
					b.Fatal(err, errs)
				}
			}
		})
	})
}

// BenchmarkReadRow: one row of 10 live cells.
func BenchmarkReadRow(b *testing.B) {
	forEachStrategy(b, func(b *testing.B, s benchStrategy) {
		e := newBenchEnv(b, s)
		e.load(b, "read", 1, benchCells)
		key := rowKey("read", 0)
		check := func(b *testing.B, r bigtable.Row, err error) {
			if err != nil || len(r[benchFam]) != benchCells {
				b.Fatalf("read %d cells, err %v", len(r[benchFam]), err)
			}
		}
		b.Run("impl=raw", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := e.raw.ReadRow(e.ctx, key)
				check(b, r, err)
			}
		})
		b.Run("impl=rawfilter", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := e.raw.ReadRow(e.ctx, key, bigtable.RowFilter(e.rawTTLFilter()))
				check(b, r, err)
			}
		})
		b.Run("impl=ttl", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := e.ttl.ReadRow(e.ctx, key)
				check(b, r, err)
			}
		})
	})
}

// BenchmarkReadRows: a scan of 1,000 rows of 10 live cells.
func BenchmarkReadRows(b *testing.B) {
	forEachStrategy(b, func(b *testing.B, s benchStrategy) {
		e := newBenchEnv(b, s)
		const rows = 1000
		e.load(b, "scan", rows, benchCells)
		benchScan(b, e, "scan", rows, benchCells, true)
	})
}

// benchScan reads every row with prefix through both tables, checking the
// count, and with rawFilter also through the raw table with the TTL filter.
func benchScan(b *testing.B, e *benchEnv, prefix string, rows, cells int, rawFilter bool) {
	b.Helper()
	scan := func(b *testing.B, read func(context.Context, bigtable.RowSet, func(bigtable.Row) bool, ...bigtable.ReadOption) error) {
		b.ReportAllocs()
		peak := startPeakHeap()
		for b.Loop() {
			n := 0
			err := read(e.ctx, bigtable.PrefixRange(prefix), func(r bigtable.Row) bool {
				n += len(r[benchFam])
				return true
			})
			if err != nil || n != rows*cells {
				b.Fatalf("scanned %d cells, want %d, err %v", n, rows*cells, err)
			}
		}
		reportPerCell(b, rows*cells, peak)
	}
	b.Run("impl=raw", func(b *testing.B) { scan(b, e.raw.ReadRows) })
	if rawFilter {
		b.Run("impl=rawfilter", func(b *testing.B) {
			scan(b, func(ctx context.Context, rs bigtable.RowSet, f func(bigtable.Row) bool, opts ...bigtable.ReadOption) error {
				return e.raw.ReadRows(ctx, rs, f, append(opts, bigtable.RowFilter(e.rawTTLFilter()))...)
			})
		})
	}
	b.Run("impl=ttl", func(b *testing.B) { scan(b, e.ttl.ReadRows) })
}

// BenchmarkMutationBuild is the pure write cost, no I/O: building a 10-cell
// bigtable.Mutation, against building a ttlclient.Mutation with the same
// cells and rewriting it into the bigtable.Mutation Apply would send.
func BenchmarkMutationBuild(b *testing.B) {
	forEachStrategy(b, func(b *testing.B, s benchStrategy) {
		tbl := openOffline(b, strategy.Schema{benchFam: s.policy})
		now := time.Now()
		b.Run("impl=raw", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ts := s.rawTS(now)
				m := bigtable.NewMutation()
				for _, c := range benchColumns {
					m.Set(benchFam, c, ts, benchValue)
				}
				benchSinkMut = m
			}
		})
		b.Run("impl=ttl", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bm, err := tbl.Build("row", ttlMutation(s))
				if err != nil {
					b.Fatal(err)
				}
				benchSinkMut = bm
			}
		})
	})
}

// BenchmarkReadFilter is the pure read-filter cost, no I/O, for a 4-family
// schema (one per strategy plus an unmanaged one): a raw caller building
// the equivalent TTL filter for its read, against the options the library
// sends. The clock advances one millisecond per read with tick=1ms (every
// read needs a new time bound), and not at all with tick=0 (reads within one
// millisecond share a filter).
func BenchmarkReadFilter(b *testing.B) {
	schema := fourFamilySchema()
	for _, tick := range []time.Duration{0, time.Millisecond} {
		b.Run("tick="+tick.String(), func(b *testing.B) {
			clock := bttestharness.NewManualClock(time.Now())
			tbl := openOffline(b, schema, ttlclient.WithClock(clock))
			b.Run("impl=raw", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					clock.Advance(tick)
					benchSinkOpt = bigtable.RowFilter(handBuiltFilter(bigtable.Time(clock.Now())))
				}
			})
			b.Run("impl=ttl", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					clock.Advance(tick)
					benchSinkFilter = tbl.ReadFilter()
				}
			})
		})
	}
}

var (
	benchSinkMut    *bigtable.Mutation
	benchSinkOpt    bigtable.ReadOption
	benchSinkFilter *btpb.RowFilter
)

func fourFamilySchema() strategy.Schema {
	return strategy.Schema{
		famOne:   strategy.OneSecond(),
		famDef:   strategy.DefaultExpiry(defaultD),
		famSeq:   strategy.Sequence(3),
		famPlain: strategy.Unmanaged(),
	}
}

// handBuiltFilter is the TTL filter of fourFamilySchema written by hand, as
// a raw caller managing TTLs itself would build it for each read.
func handBuiltFilter(now bigtable.Timestamp) bigtable.Filter {
	ms := now - now%1000
	return bigtable.InterleaveFilters(
		bigtable.ChainFilters(bigtable.ColumnRangeFilter("def", "", ""), bigtable.TimestampRangeFilterMicros(ms+1000-bigtable.Timestamp(defaultD/time.Microsecond), 0)),
		bigtable.ChainFilters(bigtable.ColumnRangeFilter("one", "", ""), bigtable.TimestampRangeFilterMicros(ms+1000, 0)),
		bigtable.ChainFilters(bigtable.ColumnRangeFilter("seq", "", ""), bigtable.LatestNFilter(3)),
		bigtable.FamilyFilter("^(?:[^dos].*|d(?:[^e].*|e(?:[^f].*|f.+)?)?|o(?:[^n].*|n(?:[^e].*|e.+)?)?|s(?:[^e].*|e(?:[^q].*|q.+)?)?)?$"),
	)
}

// openOffline opens a table on a client that never connects: the pure
// benchmarks do no I/O.
var (
	offlineOnce   sync.Once
	offlineClient *bigtable.Client
	offlineErr    error
)

func openOffline(tb testing.TB, schema strategy.Schema, opts ...ttlclient.ClientOption) *ttlclient.Table {
	tb.Helper()
	offlineOnce.Do(func() {
		h, err := bttestharness.Start(context.Background())
		if err != nil {
			offlineErr = err
			return
		}
		offlineClient = h.Raw // kept open for the process: pure paths never call it
	})
	if offlineErr != nil {
		tb.Fatal(offlineErr)
	}
	// No table exists: skip the GC-rule check Open would make.
	// Its warning about that would land in the middle of benchmark lines.
	tbl, err := ttlclient.Wrap(offlineClient, opts...).Open(context.Background(), "offline", schema, ttlclient.WithoutVerify(), ttlclient.WithLogger(quietLogger()))
	if err != nil {
		tb.Fatal(err)
	}
	return tbl
}

func rowKey(prefix string, i int) string { return fmt.Sprintf("%s#%07d", prefix, i) }

// BenchmarkScaleApplyBulk: ApplyBulk of 1,000, 10,000 and 100,000 cells
// (rows of 10 cells), reporting ns/cell and the peak live heap.
func BenchmarkScaleApplyBulk(b *testing.B) {
	s := benchStrategies()[1] // default expiry
	e := newBenchEnv(b, s)
	for _, cells := range []int{1_000, 10_000, 100_000} {
		rows := cells / benchCells
		keys := make([]string, rows)
		for i := range keys {
			keys[i] = rowKey("scale", i)
		}
		b.Run(fmt.Sprintf("cells=%d", cells), func(b *testing.B) {
			b.Run("impl=raw", func(b *testing.B) {
				b.ReportAllocs()
				peak := startPeakHeap()
				for b.Loop() {
					muts := make([]*bigtable.Mutation, rows)
					for i := range muts {
						muts[i] = e.rawMutation()
					}
					if errs, err := e.raw.ApplyBulk(e.ctx, keys, muts); err != nil || errs != nil {
						b.Fatal(err, errs)
					}
				}
				reportPerCell(b, cells, peak)
			})
			b.Run("impl=ttl", func(b *testing.B) {
				b.ReportAllocs()
				peak := startPeakHeap()
				for b.Loop() {
					muts := make([]*ttlclient.Mutation, rows)
					for i := range muts {
						muts[i] = e.ttlMutation()
					}
					if errs, err := e.ttl.ApplyBulk(e.ctx, keys, muts); err != nil || errs != nil {
						b.Fatal(err, errs)
					}
				}
				reportPerCell(b, cells, peak)
			})
		})
	}
}

// BenchmarkScaleReadRows: scans of 10,000 and 100,000 rows of one cell,
// reporting ns/cell and the peak live heap.
func BenchmarkScaleReadRows(b *testing.B) {
	s := benchStrategies()[1] // default expiry
	for _, rows := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			e := newBenchEnv(b, s)
			e.load(b, "scale", rows, 1)
			benchScan(b, e, "scale", rows, 1, false)
		})
	}
}

// peakHeap samples the live heap every millisecond while a benchmark runs.
type peakHeap struct {
	stop chan struct{}
	done chan struct{}
	max  atomic.Uint64
}

func startPeakHeap() *peakHeap {
	p := &peakHeap{stop: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > p.max.Load() {
			p.max.Store(v)
		}
	}
	read()
	go func() {
		defer close(p.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return p
}

func (p *peakHeap) end() uint64 {
	close(p.stop)
	<-p.done
	return p.max.Load()
}

// reportPerCell adds ns/cell and the peak live heap (whole process: server
// included) in MB.
func reportPerCell(b *testing.B, cells int, p *peakHeap) {
	peak := p.end()
	if b.N == 0 {
		return
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(cells), "ns/cell")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
}

// BenchmarkInterleaved measures the end-to-end ratios under load from other
// processes: each iteration runs the operation once through the raw table
// and once through the library (alternating which goes first), timing each,
// so both sides see the same machine within a millisecond. It reports
// raw-ns/op, ttl-ns/op and their ratio ttl/raw over the whole run.
func BenchmarkInterleaved(b *testing.B) {
	forEachStrategy(b, func(b *testing.B, s benchStrategy) {
		e := newBenchEnv(b, s)
		e.load(b, "read", 1, benchCells)
		const scanRows = 1000
		e.load(b, "scan", scanRows, benchCells)
		const bulkRows = 100
		bulkKeys := make([]string, bulkRows)
		for i := range bulkKeys {
			bulkKeys[i] = rowKey("bulk", i)
		}
		must := func(err error) {
			if err != nil {
				b.Fatal(err)
			}
		}
		mustBulk := func(errs []error, err error) {
			if err != nil || errs != nil {
				b.Fatal(err, errs)
			}
		}
		mustRow := func(r bigtable.Row, err error) {
			if err != nil || len(r[benchFam]) != benchCells {
				b.Fatalf("read %d cells, err %v", len(r[benchFam]), err)
			}
		}
		count := func(n *int) func(bigtable.Row) bool {
			return func(r bigtable.Row) bool { *n += len(r[benchFam]); return true }
		}
		mustScan := func(n int, err error) {
			if err != nil || n != scanRows*benchCells {
				b.Fatalf("scanned %d cells, err %v", n, err)
			}
		}
		ops := []struct {
			name     string
			raw, ttl func(i int)
		}{
			{"Apply",
				func(i int) { must(e.raw.Apply(e.ctx, rowKey("apply", i%1000), e.rawMutation())) },
				func(i int) { must(e.ttl.Apply(e.ctx, rowKey("apply", i%1000), e.ttlMutation())) }},
			{"ApplyBulk",
				func(int) {
					muts := make([]*bigtable.Mutation, bulkRows)
					for i := range muts {
						muts[i] = e.rawMutation()
					}
					mustBulk(e.raw.ApplyBulk(e.ctx, bulkKeys, muts))
				},
				func(int) {
					muts := make([]*ttlclient.Mutation, bulkRows)
					for i := range muts {
						muts[i] = e.ttlMutation()
					}
					mustBulk(e.ttl.ApplyBulk(e.ctx, bulkKeys, muts))
				}},
			{"ReadRow",
				func(int) { mustRow(e.raw.ReadRow(e.ctx, rowKey("read", 0))) },
				func(int) { mustRow(e.ttl.ReadRow(e.ctx, rowKey("read", 0))) }},
			{"ReadRows",
				func(int) {
					n := 0
					mustScan(n, e.raw.ReadRows(e.ctx, bigtable.PrefixRange("scan"), count(&n)))
				},
				func(int) {
					n := 0
					mustScan(n, e.ttl.ReadRows(e.ctx, bigtable.PrefixRange("scan"), count(&n)))
				}},
		}
		for _, op := range ops {
			b.Run("op="+op.name, func(b *testing.B) {
				var rawD, ttlD time.Duration
				n := 0
				for i := 0; b.Loop(); i++ {
					if i%2 == 0 {
						t0 := time.Now()
						op.raw(i)
						t1 := time.Now()
						op.ttl(i)
						rawD, ttlD = rawD+t1.Sub(t0), ttlD+time.Since(t1)
					} else {
						t0 := time.Now()
						op.ttl(i)
						t1 := time.Now()
						op.raw(i)
						ttlD, rawD = ttlD+t1.Sub(t0), rawD+time.Since(t1)
					}
					n++
				}
				b.ReportMetric(float64(rawD.Nanoseconds())/float64(n), "raw-ns/op")
				b.ReportMetric(float64(ttlD.Nanoseconds())/float64(n), "ttl-ns/op")
				b.ReportMetric(float64(ttlD)/float64(rawD), "ttl/raw")
			})
		}
	})
}

// BenchmarkInterleavedBuild is BenchmarkMutationBuild with the sides in one
// loop: blocks of 100 raw builds (raw) and 100 ttlclient.Mutation builds
// and rewrites (ttl) alternate, rotating which goes first, each block timed
// (wall and process CPU time) and its heap allocations counted, so load
// from other processes hits the sides alike. It reports per mutation raw-
// and ttl-ns/op, -cpu-ns/op, -allocs/op and -B/op, and the ratios ttl/raw
// and ttl/raw-cpu (on a loaded machine waiting for a core inflates wall
// times at random, CPU time much less). (The TableAPI path is rewritten on the
// wire, so it has no build without I/O: BenchmarkTableAPIBuild and
// BenchmarkServersWrites' api side measure it.)
func BenchmarkInterleavedBuild(b *testing.B) {
	forEachStrategy(b, func(b *testing.B, s benchStrategy) {
		tbl := openOffline(b, strategy.Schema{benchFam: s.policy})
		now := time.Now()
		raw := func() {
			ts := s.rawTS(now)
			m := bigtable.NewMutation()
			for _, c := range benchColumns {
				m.Set(benchFam, c, ts, benchValue)
			}
			benchSinkMut = m
		}
		lib := func() {
			bm, err := tbl.Build("row", ttlMutation(s))
			if err != nil {
				b.Fatal(err)
			}
			benchSinkMut = bm
		}
		sides := []struct {
			name  string
			build func()
		}{{"raw", raw}, {"ttl", lib}}
		const block = 100
		spent := make([]time.Duration, len(sides))
		cpu := make([]time.Duration, len(sides))
		allocs := make([]uint64, len(sides))
		bytes := make([]uint64, len(sides))
		var ms runtime.MemStats // exact counts, read outside the timed blocks
		n := 0
		for i := 0; b.Loop(); i++ {
			for k := range sides {
				j := (i + k) % len(sides)
				runtime.ReadMemStats(&ms)
				a0, by0, c0, t0 := ms.Mallocs, ms.TotalAlloc, benchloop.ProcessCPU(b), time.Now()
				for range block {
					sides[j].build()
				}
				spent[j] += time.Since(t0)
				cpu[j] += benchloop.ProcessCPU(b) - c0
				runtime.ReadMemStats(&ms)
				allocs[j] += ms.Mallocs - a0
				bytes[j] += ms.TotalAlloc - by0
			}
			n += block
		}
		for j, side := range sides {
			b.ReportMetric(float64(spent[j].Nanoseconds())/float64(n), side.name+"-ns/op")
			b.ReportMetric(float64(cpu[j].Nanoseconds())/float64(n), side.name+"-cpu-ns/op")
			b.ReportMetric(float64(allocs[j])/float64(n), side.name+"-allocs/op")
			b.ReportMetric(float64(bytes[j])/float64(n), side.name+"-B/op")
		}
		b.ReportMetric(float64(spent[1])/float64(spent[0]), "ttl/raw")
		b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "ttl/raw-cpu")
	})
}
