package ttlclient_test

// Interleaved benchmarks on both servers (the in-process bttest server and
// the gcloud emulator cbtemulator), with three readers of the same table:
// the raw client unfiltered (impl raw), the raw client sending the filter a
// user writes by hand from Bigtable's filter docs (naive), and the library
// (ttl). Every iteration runs all three, rotating which goes first, so load
// from other processes hits them alike. See BENCHMARKS.md.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/internal/benchloop"
	"github.com/bttl/bttl/internal/testenv"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// benchSchema is a schema under benchmark and how one row of it is written:
// benchCells cells spread over its families.
type benchSchema struct {
	name   string
	schema strategy.Schema
	cells  []benchCell
}

type benchCell struct {
	family, column string
	opt            cellOpt
	ttl            time.Duration // the TTL opt gives, on an age family
	unmanaged      bool          // written at rawTS, with no option
	rawTS          func(now time.Time) bigtable.Timestamp
}

func benchSchemas() []benchSchema {
	var out []benchSchema
	four := benchSchema{name: "4-family", schema: fourFamilySchema()}
	spread := []struct {
		fam string
		n   int
	}{{famOne, 3}, {famDef, 3}, {famSeq, 2}, {famPlain, 2}}
	for _, s := range spread {
		for i := 0; i < s.n; i++ {
			c := benchCell{family: s.fam, column: fmt.Sprintf("col%02d", i)}
			switch s.fam {
			case famOne:
				c.opt, c.ttl = withTTL(time.Hour), time.Hour
				c.rawTS = func(now time.Time) bigtable.Timestamp { return bigtable.Time(now.Add(time.Hour)) }
			case famDef:
				c.opt, c.ttl = withTTL(30*time.Minute), 30*time.Minute
				c.rawTS = func(now time.Time) bigtable.Timestamp { return bigtable.Time(now.Add(-30 * time.Minute)) }
			case famSeq:
				c.opt = withSeq(7)
				c.rawTS = func(time.Time) bigtable.Timestamp { return 7000 }
			default:
				c.unmanaged = true
				c.rawTS = func(now time.Time) bigtable.Timestamp { return bigtable.Time(now) }
			}
			four.cells = append(four.cells, c)
		}
	}
	out = append(out, four)
	for _, s := range benchStrategies() {
		bs := benchSchema{name: s.name, schema: strategy.Schema{benchFam: s.policy}}
		for _, col := range benchColumns {
			bs.cells = append(bs.cells, benchCell{family: benchFam, column: col, opt: s.opt, ttl: s.ttl, rawTS: s.rawTS})
		}
		out = append(out, bs)
	}
	return out
}

// naiveFilter is the TTL filter a user writes by hand from Bigtable's docs
// for schema at now: per managed family Chain(FamilyFilter("^fam$"),
// TimestampRange or CellsPerColumn), a FamilyFilter per unmanaged family,
// interleaved when there is more than one.
func naiveFilter(schema strategy.Schema, now bigtable.Timestamp) bigtable.Filter {
	var subs []bigtable.Filter
	for _, fam := range sortedFamilies(schema) {
		p := schema[fam]
		sel := bigtable.FamilyFilter("^" + fam + "$")
		switch {
		case !p.Managed():
			subs = append(subs, sel)
		case p.Kind() == strategy.KindSequence:
			subs = append(subs, bigtable.ChainFilters(sel, bigtable.LatestNFilter(p.Versions())))
		default:
			subs = append(subs, bigtable.ChainFilters(sel, bigtable.TimestampRangeFilterMicros(p.LiveFrom(now), 0)))
		}
	}
	if len(subs) == 1 {
		return subs[0]
	}
	return bigtable.InterleaveFilters(subs...)
}

func sortedFamilies(schema strategy.Schema) []string {
	out := make([]string, 0, len(schema))
	for f := range schema {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// forEachServer runs f on a fresh in-process bttest server, then on a fresh
// cbtemulator (skipped, saying so, when its binary is missing).
func forEachServer(b *testing.B, f func(b *testing.B, h *bttestharness.Harness)) {
	b.Run("server=bttest", func(b *testing.B) {
		h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{
			NoGC:          true,
			ServerOptions: []grpc.ServerOption{grpc.MaxRecvMsgSize(256 << 20)},
		})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		f(b, h)
	})
	b.Run("server=cbtemulator", func(b *testing.B) {
		emu, err := bttestharness.StartEmulator(context.Background())
		if errors.Is(err, bttestharness.ErrNoEmulator) {
			testenv.Missing(b, testenv.CBTEmulator, err)
		}
		if err != nil {
			b.Fatal(err)
		}
		defer emu.Kill()
		h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: emu.Addr, NoGC: true})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		f(b, h)
	})
}

// serverEnv is one table of a schema on one server: the raw handle and the
// library's, on the same table.
type serverEnv struct {
	h   *bttestharness.Harness
	s   benchSchema
	raw *bigtable.Table
	ttl *ttlclient.Table
	ctx context.Context
}

func newServerEnv(b *testing.B, h *bttestharness.Harness, s benchSchema) *serverEnv {
	b.Helper()
	table := "bench-" + s.name
	tbl, err := h.Table(context.Background(), table, s.schema)
	if err != nil {
		b.Fatal(err)
	}
	return &serverEnv{h: h, s: s, raw: h.Raw.Open(table), ttl: tbl, ctx: context.Background()}
}

func (e *serverEnv) ttlMutation(cells int) *ttlclient.Mutation {
	m := ttlclient.NewMutation()
	now := e.h.Clock.Now()
	for _, c := range e.s.cells[:cells] {
		if c.unmanaged {
			m.Set(c.family, c.column, c.rawTS(now), benchValue)
		} else {
			setCell(m, c.family, c.column, bigtable.ServerTime, benchValue, c.opt)
		}
	}
	return m
}

// apiMutation is ttlMutation's cells as code written for the plain client
// writes them through Table.API(): a *bigtable.Mutation whose managed
// cells get Table.Timestamp (one call per family and mutation) or seq*1000.
func (e *serverEnv) apiMutation(b *testing.B) *bigtable.Mutation {
	m := bigtable.NewMutation()
	now := e.h.Clock.Now()
	var (
		fam string
		ts  bigtable.Timestamp
	)
	for _, c := range e.s.cells {
		if c.family != fam {
			fam = c.family
			switch p := e.s.schema[c.family]; {
			case c.unmanaged:
				ts = c.rawTS(now)
			case p.Kind() == strategy.KindSequence:
				ts = c.rawTS(now) // seq*1000
			default:
				var err error
				if ts, err = e.ttl.Timestamp(c.family, c.ttl); err != nil {
					b.Fatal(err)
				}
			}
		}
		m.Set(c.family, c.column, ts, benchValue)
	}
	return m
}

func (e *serverEnv) rawMutation() *bigtable.Mutation {
	m := bigtable.NewMutation()
	now := e.h.Clock.Now()
	for _, c := range e.s.cells {
		m.Set(c.family, c.column, c.rawTS(now), benchValue)
	}
	return m
}

// load writes n rows of cells cells through the library.
func (e *serverEnv) load(b *testing.B, prefix string, n, cells int) {
	b.Helper()
	const batch = 1000
	for start := 0; start < n; start += batch {
		end := min(start+batch, n)
		keys := make([]string, 0, end-start)
		muts := make([]*ttlclient.Mutation, 0, end-start)
		for i := start; i < end; i++ {
			keys = append(keys, rowKey(prefix, i))
			muts = append(muts, e.ttlMutation(cells))
		}
		if errs, err := e.ttl.ApplyBulk(e.ctx, keys, muts); err != nil || errs != nil {
			b.Fatalf("load: %v %v", err, errs)
		}
	}
}

func (e *serverEnv) naive() bigtable.ReadOption {
	return bigtable.RowFilter(naiveFilter(e.s.schema, bigtable.Time(e.h.Clock.Now())))
}

func countCells(n *int) func(bigtable.Row) bool {
	return func(r bigtable.Row) bool {
		for _, items := range r {
			*n += len(items)
		}
		return true
	}
}

// interleave runs the impls once per iteration, rotating which goes first,
// and reports each one's ns/op (and ns/cell when cells > 0), the ratios
// ttl/raw, ttl/naive and naive/raw (api/ttl and api/raw with an api impl:
// the TableAPI path), the GC cycles per iteration and, when cells > 0, the
// process's CPU time in the GC and in Go code per cell scanned (all impls
// together: the garbage of one is collected during another). Beside the
// wall times it reports each impl's process CPU time (name-cpu-ns/op, and
// the ratios ttl/raw-cpu and api/raw-cpu): on a machine loaded by other
// work, waiting for a core inflates wall times at random and CPU time much
// less. It counts the client's work and the GC's running during the call,
// and on bttest the in-process server's (the same work for every impl).
func interleave(b *testing.B, cells int, impls map[string]func()) {
	order := []string{"raw", "naive", "ttl", "api"}
	var names []string
	for _, n := range order {
		if impls[n] != nil {
			names = append(names, n)
		}
	}
	// GC cycles, and the process's CPU time in the GC and in Go code (the
	// in-process server's included): estimates by the runtime, whole
	// process, all impls together.
	gc := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/user:cpu-seconds"}}
	runtime.GC()
	metrics.Read(gc)
	gc0, gcCPU0, userCPU0 := gc[0].Value.Uint64(), gc[1].Value.Float64(), gc[2].Value.Float64()
	r := benchloop.Run(b, names, impls)
	metrics.Read(gc)
	spent, cpu, n := r.Wall, r.CPU, r.N
	for _, name := range names {
		b.ReportMetric(float64(spent[name].Nanoseconds())/float64(n), name+"-ns/op")
		if cells > 0 {
			b.ReportMetric(float64(spent[name].Nanoseconds())/float64(n)/float64(cells), name+"-ns/cell")
		}
	}
	for _, name := range names {
		b.ReportMetric(float64(cpu[name].Nanoseconds())/float64(n), name+"-cpu-ns/op")
	}
	b.ReportMetric(float64(spent["ttl"])/float64(spent["raw"]), "ttl/raw")
	b.ReportMetric(float64(cpu["ttl"])/float64(cpu["raw"]), "ttl/raw-cpu")
	if spent["naive"] > 0 {
		b.ReportMetric(float64(spent["ttl"])/float64(spent["naive"]), "ttl/naive")
		b.ReportMetric(float64(spent["naive"])/float64(spent["raw"]), "naive/raw")
	}
	if spent["api"] > 0 {
		b.ReportMetric(float64(spent["api"])/float64(spent["ttl"]), "api/ttl")
		b.ReportMetric(float64(spent["api"])/float64(spent["raw"]), "api/raw")
		b.ReportMetric(float64(cpu["api"])/float64(cpu["raw"]), "api/raw-cpu")
	}
	b.ReportMetric(float64(gc[0].Value.Uint64()-gc0)/float64(n), "gc/op")
	if cells > 0 {
		scanned := float64(n) * float64(len(names)) * float64(cells)
		b.ReportMetric((gc[1].Value.Float64()-gcCPU0)*1e9/scanned, "gc-cpu-ns/cell")
		b.ReportMetric((gc[2].Value.Float64()-userCPU0)*1e9/scanned, "user-cpu-ns/cell")
	}
}

// BenchmarkServers: ReadRow (one row of 10 cells), ReadRows (1,000 rows of
// 10 cells) and ApplyBulk (100 rows of 10 cells) on both servers, for the
// 4-family schema (one-second, default expiry, sequence, unmanaged) and each
// strategy alone; reads by raw, naive and ttl, writes by raw and ttl.
func BenchmarkServers(b *testing.B) {
	forEachServer(b, func(b *testing.B, h *bttestharness.Harness) {
		for _, s := range benchSchemas() {
			b.Run("schema="+s.name, func(b *testing.B) {
				e := newServerEnv(b, h, s)
				const scanRows, bulkRows = 1000, 100
				e.load(b, "read", 1, len(s.cells))
				e.load(b, "scan", scanRows, len(s.cells))
				row := rowKey("read", 0)
				mustRow := func(r bigtable.Row, err error) {
					n := 0
					for _, items := range r {
						n += len(items)
					}
					if err != nil || n != len(s.cells) {
						b.Fatalf("read %d cells, err %v", n, err)
					}
				}
				scan := func(opts ...bigtable.ReadOption) func() {
					return func() {
						n := 0
						err := e.raw.ReadRows(e.ctx, bigtable.PrefixRange("scan"), countCells(&n), opts...)
						if err != nil || n != scanRows*len(s.cells) {
							b.Fatalf("scanned %d cells, err %v", n, err)
						}
					}
				}
				b.Run("op=ReadRow", func(b *testing.B) {
					interleave(b, 0, map[string]func(){
						"raw":   func() { mustRow(e.raw.ReadRow(e.ctx, row)) },
						"naive": func() { mustRow(e.raw.ReadRow(e.ctx, row, e.naive())) },
						"ttl":   func() { mustRow(e.ttl.ReadRow(e.ctx, row)) },
					})
				})
				b.Run("op=ReadRows", func(b *testing.B) {
					interleave(b, scanRows*len(s.cells), map[string]func(){
						"raw":   scan(),
						"naive": func() { scan(e.naive())() },
						"ttl": func() {
							n := 0
							err := e.ttl.ReadRows(e.ctx, bigtable.PrefixRange("scan"), countCells(&n))
							if err != nil || n != scanRows*len(s.cells) {
								b.Fatalf("scanned %d cells, err %v", n, err)
							}
						},
					})
				})
				keys := make([]string, bulkRows)
				for i := range keys {
					keys[i] = rowKey("bulk", i)
				}
				b.Run("op=ApplyBulk", func(b *testing.B) {
					interleave(b, 0, map[string]func(){
						"raw": func() {
							muts := make([]*bigtable.Mutation, bulkRows)
							for i := range muts {
								muts[i] = e.rawMutation()
							}
							if errs, err := e.raw.ApplyBulk(e.ctx, keys, muts); err != nil || errs != nil {
								b.Fatal(err, errs)
							}
						},
						"ttl": func() {
							muts := make([]*ttlclient.Mutation, bulkRows)
							for i := range muts {
								muts[i] = e.ttlMutation(len(s.cells))
							}
							if errs, err := e.ttl.ApplyBulk(e.ctx, keys, muts); err != nil || errs != nil {
								b.Fatal(err, errs)
							}
						},
					})
				})
			})
		}
	})
}

// BenchmarkServersScale: ReadRows of 10,000 and 100,000 rows of one cell
// (default expiry alone), raw, naive and ttl interleaved, on both servers,
// reporting ns/cell and GC cycles per scan.
func BenchmarkServersScale(b *testing.B) {
	s := benchSchemas()[2] // default expiry
	if s.name != "default-expiry" {
		b.Fatal(s.name)
	}
	forEachServer(b, func(b *testing.B, h *bttestharness.Harness) {
		e := newServerEnv(b, h, s)
		loaded := 0
		for _, rows := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
				// One table, grown: the 100,000-row scan reads the 10,000
				// rows scanned before and 90,000 more. Loaded here, so a
				// size filtered out by -bench loads nothing.
				if loaded < rows {
					e.load2(b, loaded, rows)
					loaded = rows
				}
				scan := func(read func(context.Context, bigtable.RowSet, func(bigtable.Row) bool, ...bigtable.ReadOption) error, opts func() []bigtable.ReadOption) func() {
					return func() {
						n := 0
						if err := read(e.ctx, bigtable.PrefixRange("scale"), countCells(&n), opts()...); err != nil || n != rows {
							b.Fatalf("scanned %d cells, want %d, err %v", n, rows, err)
						}
					}
				}
				none := func() []bigtable.ReadOption { return nil }
				impls := map[string]func(){
					"raw":   scan(e.raw.ReadRows, none),
					"naive": scan(e.raw.ReadRows, func() []bigtable.ReadOption { return []bigtable.ReadOption{e.naive()} }),
					"ttl":   scan(e.ttl.ReadRows, none),
				}
				// One untimed scan each first: the first scan after a load
				// pays for the writes' garbage.
				for _, f := range impls {
					f()
				}
				interleave(b, rows, impls)
			})
		}
	})
}

// load2 adds rows [from, to) of one cell under prefix "scale".
func (e *serverEnv) load2(b *testing.B, from, to int) {
	b.Helper()
	const batch = 1000
	for start := from; start < to; start += batch {
		end := min(start+batch, to)
		keys := make([]string, 0, end-start)
		muts := make([]*ttlclient.Mutation, 0, end-start)
		for i := start; i < end; i++ {
			keys = append(keys, rowKey("scale", i))
			muts = append(muts, e.ttlMutation(1))
		}
		if errs, err := e.ttl.ApplyBulk(e.ctx, keys, muts); err != nil || errs != nil {
			b.Fatalf("load: %v %v", err, errs)
		}
	}
}

// BenchmarkServersWrites: Apply (one row of 10 cells) and ApplyBulk (100
// rows of 10 cells) on both servers, for the 4-family schema and each
// strategy alone, through the raw client (raw), the library's Mutation
// (ttl) and the TableAPI path with the client's *bigtable.Mutation (api),
// interleaved. Each side builds its mutations inside the timed call, as a
// caller would.
func BenchmarkServersWrites(b *testing.B) {
	forEachServer(b, func(b *testing.B, h *bttestharness.Harness) {
		for _, s := range benchSchemas() {
			b.Run("schema="+s.name, func(b *testing.B) {
				e := newServerEnv(b, h, s)
				api := e.ttl.API()
				must := func(err error) {
					if err != nil {
						b.Fatal(err)
					}
				}
				b.Run("op=Apply", func(b *testing.B) {
					i := 0
					key := func() string { i++; return rowKey("apply", i%1000) }
					interleave(b, 0, map[string]func(){
						"raw": func() { must(e.raw.Apply(e.ctx, key(), e.rawMutation())) },
						"ttl": func() { must(e.ttl.Apply(e.ctx, key(), e.ttlMutation(len(s.cells)))) },
						"api": func() { must(api.Apply(e.ctx, key(), e.apiMutation(b))) },
					})
				})
				const bulkRows = 100
				keys := make([]string, bulkRows)
				for i := range keys {
					keys[i] = rowKey("bulk", i)
				}
				mustBulk := func(errs []error, err error) {
					if err != nil || errs != nil {
						b.Fatal(err, errs)
					}
				}
				b.Run("op=ApplyBulk", func(b *testing.B) {
					interleave(b, 0, map[string]func(){
						"raw": func() {
							muts := make([]*bigtable.Mutation, bulkRows)
							for i := range muts {
								muts[i] = e.rawMutation()
							}
							mustBulk(e.raw.ApplyBulk(e.ctx, keys, muts))
						},
						"ttl": func() {
							muts := make([]*ttlclient.Mutation, bulkRows)
							for i := range muts {
								muts[i] = e.ttlMutation(len(s.cells))
							}
							mustBulk(e.ttl.ApplyBulk(e.ctx, keys, muts))
						},
						"api": func() {
							muts := make([]*bigtable.Mutation, bulkRows)
							for i := range muts {
								muts[i] = e.apiMutation(b)
							}
							mustBulk(api.ApplyBulk(e.ctx, keys, muts))
						},
					})
				})
			})
		}
	})
}
