package ttlclient_test

// What turning the client's session data plane off costs (issue 34):
// the raw client with sessions on, the raw client with them off
// (ClientConfig.DisableSession) and ttlclient (which turns them off: its
// interceptor cannot rewrite a session's virtual calls), interleaved in
// one process against one bttest server that serves sessions
// (bttest_harness/sessionserver). See docs/design.md#session-cost.

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/sessionserver"
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/benchloop"
	"github.com/bttl/bttl/ttlclient"
)

// sessionSides are the sides of BenchmarkSessions: on, off, ttl.
var sessionSides = []string{"on", "off", "ttl"}

// BenchmarkSessions: Apply (one row of 10 cells, the 4-family schema) and
// ReadRow (that row) by the raw client with sessions on (side on), with
// them off (off) and by ttlclient (ttl), interleaved. The raw sides read
// with the TTL filter of package filters, built per call at the table's
// clock, so all three send a filter of the same kind (the hand-written
// one, naiveFilter, selects families by regex, which bttest compiles
// again for every cell: it would outweigh the plane). Every client dials the server itself (a
// client given a connection builds no session plane), ttlclient through
// NewClientWithConfig as its users do. Before timing, each side's calls
// are checked to take the plane named; after, on-virtual/op is the
// virtual calls the server served per on call (1: every one on a
// session) and classic/op the classic ones per off and ttl call.
func BenchmarkSessions(b *testing.B) {
	// Under BIGTABLE_EMULATOR_HOST a client takes a connection and builds
	// no session plane, and the harness would not start the server below.
	b.Setenv("BIGTABLE_EMULATOR_HOST", "")
	ctx := context.Background()
	sess, err := sessionserver.New(sessionserver.Config{SessionLoad: 1})
	if err != nil {
		b.Fatal(err)
	}
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true, ServerOptions: sess.ServerOptions()})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	s := benchSchemas()[0] // 4-family, 10 cells
	table := "bench-sessions"
	if err := h.CreateTable(ctx, table, s.schema); err != nil {
		b.Fatal(err)
	}
	dial := []option.ClientOption{
		option.WithEndpoint(h.Addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
	noMetrics := bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}
	on, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, noMetrics, dial...)
	if err != nil {
		b.Fatal(err)
	}
	defer on.Close()
	offCfg := noMetrics
	offCfg.DisableSession = true
	off, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, offCfg, dial...)
	if err != nil {
		b.Fatal(err)
	}
	defer off.Close()
	ttl, err := ttlclient.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		ttlclient.ClientConfig{ClientConfig: noMetrics, Options: []ttlclient.ClientOption{ttlclient.WithClock(h.Clock)}}, dial...)
	if err != nil {
		b.Fatal(err)
	}
	defer ttl.Close()
	ttlTbl, err := ttl.Open(ctx, table, s.schema)
	if err != nil {
		b.Fatal(err)
	}
	e := &serverEnv{h: h, s: s, raw: on.Open(table), ttl: ttlTbl, ctx: ctx}
	offTbl := off.Open(table)
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := sess.AwaitSessions(waitCtx, func(ctx context.Context) error {
		_, err := e.raw.ReadRow(ctx, "probe")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	const key = "row"
	apply := map[string]func(){
		"on":  func() { must(e.raw.Apply(ctx, key, e.rawMutation())) },
		"off": func() { must(offTbl.Apply(ctx, key, e.rawMutation())) },
		"ttl": func() { must(ttlTbl.Apply(ctx, key, e.ttlMutation(len(s.cells)))) },
	}
	read := func(tbl interface {
		ReadRow(context.Context, string, ...bigtable.ReadOption) (bigtable.Row, error)
	}, opts ...bigtable.ReadOption) func() {
		return func() {
			row, err := tbl.ReadRow(ctx, key, opts...)
			must(err)
			if len(row) == 0 {
				b.Fatal("row not read")
			}
		}
	}
	// As ttlclient builds it for a table whose families are the schema's.
	ttlFilter, err := filters.New(s.schema, filters.WithFamilies(sortedFamilies(s.schema)))
	if err != nil {
		b.Fatal(err)
	}
	filter := func() bigtable.ReadOption { return bigtable.RowFilter(ttlFilter.TTL(bigtable.Time(h.Clock.Now()))) }
	readRow := map[string]func(){
		"on":  func() { read(e.raw, filter())() },
		"off": func() { read(offTbl, filter())() },
		"ttl": read(ttlTbl),
	}
	for _, op := range []struct {
		name  string
		impls map[string]func()
	}{{"Apply", apply}, {"ReadRow", readRow}} {
		checkPlanes(b, sess, op.impls)
		b.Run("op="+op.name, func(b *testing.B) {
			before := sess.Stats()
			r := benchloop.Run(b, sessionSides, op.impls)
			d := sess.Stats()
			virtual := d.VirtualReadRows + d.VirtualMutateRows - before.VirtualReadRows - before.VirtualMutateRows
			classic := d.ReadRows + d.MutateRow - before.ReadRows - before.MutateRow
			r.ReportEach(b, sessionSides)
			r.ReportRatio(b, "off", "on")
			r.ReportRatio(b, "ttl", "on")
			r.ReportRatio(b, "ttl", "off")
			b.ReportMetric(float64(virtual)/float64(r.N), "on-virtual/op")
			b.ReportMetric(float64(classic)/float64(2*r.N), "classic/op")
		})
	}
}

// checkPlanes runs each side once and fails b unless side on's call took
// a session and the others' the classic RPCs.
func checkPlanes(b *testing.B, sess *sessionserver.Server, impls map[string]func()) {
	b.Helper()
	for _, side := range sessionSides {
		before := sess.Stats()
		impls[side]()
		after := sess.Stats()
		virtual := after.VirtualReadRows + after.VirtualMutateRows - before.VirtualReadRows - before.VirtualMutateRows
		classic := after.ReadRows + after.MutateRow - before.ReadRows - before.MutateRow
		if want := side == "on"; (virtual == 1 && classic == 0) != want || (virtual == 0 && classic == 1) == want {
			b.Fatalf("side %s: %d virtual and %d classic calls", side, virtual, classic)
		}
	}
}
