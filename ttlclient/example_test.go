package ttlclient_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// exSchema is the table the examples use: one family per strategy.
var exSchema = ttlclient.Schema{
	"session": strategy.OneSecond(),
	"clicks":  strategy.DefaultExpiry(48 * time.Hour),
	"doc":     strategy.Sequence(2),
	"meta":    strategy.Unmanaged(),
}

// exTable starts an in-process emulator with table "events" on exSchema.
// The table's clock is h.Clock, a manual clock.
func exTable(ctx context.Context) (*bttestharness.Harness, *ttlclient.Table) {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	tbl, err := h.Table(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	return h, tbl
}

// exCells lists a row's cells as family:column=value, sorted.
func exCells(r bigtable.Row) string {
	var out []string
	for _, items := range r {
		for _, it := range items {
			out = append(out, it.Column+"="+string(it.Value))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, " ")
}

// exDialOptions connect a client to the emulator at addr.
func exDialOptions(addr string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

func ExampleNewClient() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx) // stands in for Cloud Bigtable
	defer h.Close()
	if err := h.CreateTable(ctx, "events", exSchema); err != nil {
		panic(err)
	}

	// In production: ttlclient.NewClient(ctx, project, instance).
	client, err := ttlclient.NewClient(ctx, bttestharness.Project, bttestharness.Instance, exDialOptions(h.Addr)...)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	tbl, err := client.Open(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	m := ttlclient.NewMutation()
	m.Set("clicks", "home", bigtable.ServerTime, []byte("1"))
	fmt.Println(tbl.Apply(ctx, "user#1", m))
	// Output: <nil>
}

func ExampleNewClientWithConfig() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	if err := h.CreateTable(ctx, "events", exSchema); err != nil {
		panic(err)
	}

	// The bigtable client's config, as bigtable.NewClientWithConfig takes
	// it, and bttl's options for the client: every table's defaults (the
	// logger) and the bounds of the pools its tables share.
	cfg := ttlclient.ClientConfig{
		ClientConfig: bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}},
		Options: []ttlclient.ClientOption{
			ttlclient.WithLogger(slog.New(slog.DiscardHandler)),
			ttlclient.WithIdleRefreshConcurrency(8),
		},
	}
	client, err := ttlclient.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, cfg, exDialOptions(h.Addr)...)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	// A pool's bound is the client's only: a table's does not compile.
	tbl, err := client.Open(ctx, "events", exSchema)
	fmt.Println(tbl.Name(), err)
	// Output:
	// events <nil>
}

func ExampleWrap() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	if err := h.CreateTable(ctx, "events", exSchema); err != nil {
		panic(err)
	}

	// An existing *bigtable.Client (here the harness's) keeps its options
	// and its owner: closing the wrapper leaves it open. The admin client
	// lets Open verify the table's GC rules.
	var raw *bigtable.Client = h.Raw
	client := ttlclient.Wrap(raw, ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance))
	tbl, err := client.Open(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	fmt.Println(tbl.Name(), client.Raw() == raw, client.Close())
	// Output: events true <nil>
}

func ExampleWithClock() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	if err := h.CreateTable(ctx, "events", exSchema); err != nil {
		panic(err)
	}

	clock := bttestharness.NewManualClock(time.Now())
	tbl, _ := ttlclient.Wrap(h.Raw, ttlclient.WithClock(clock),
		ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance)).Open(ctx, "events", exSchema)
	m := ttlclient.NewMutation()
	m.SetTTL("session", "token", time.Minute, []byte("abc"))
	_ = tbl.Apply(ctx, "user#1", m)

	r, _ := tbl.ReadRow(ctx, "user#1")
	fmt.Println("now:        ", exCells(r))
	clock.Advance(time.Minute) // no sleeping: time is the clock's
	r, _ = tbl.ReadRow(ctx, "user#1")
	fmt.Println("a minute on:", exCells(r))
	// Output:
	// now:         session:token=abc
	// a minute on: (none)
}

func ExampleClient_Open() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	_ = h.CreateTable(ctx, "events", exSchema)

	_, err := h.Client.Open(ctx, "events", ttlclient.Schema{"doc": strategy.Sequence(0)})
	fmt.Println(errors.Is(err, strategy.ErrInvalidPolicy))
	tbl, err := h.Client.Open(ctx, "events", exSchema)
	fmt.Println(tbl.Name(), err)
	// Output:
	// true
	// events <nil>
}

func ExampleClient_Raw() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	// Raw is the wrapped client, for calls bttl does not cover. Writes
	// through it bypass every guardrail.
	fmt.Println(h.Client.Raw() == h.Raw)
	// Output: true
}

func ExampleClient_Close() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	client, err := ttlclient.NewClient(ctx, bttestharness.Project, bttestharness.Instance, exDialOptions(h.Addr)...)
	if err != nil {
		panic(err)
	}
	// A client from NewClient owns its connection: Close releases it.
	fmt.Println(client.Close())
	// Output: <nil>
}

func ExampleTable_Apply() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	m := ttlclient.NewMutation()
	m.Set("clicks", "home", bigtable.ServerTime, []byte("1")) // 48h, the default
	m.SetTTL("clicks", "promo", time.Hour, []byte("2"))       // 1h
	m.SetTTL("session", "token", time.Minute, []byte("abc"))  // 1m
	m.Set("meta", "owner", bigtable.Now(), []byte("ada"))     // untouched
	if err := tbl.Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}
	h.Clock.Advance(2 * time.Hour)
	r, _ := tbl.ReadRow(ctx, "user#1")
	fmt.Println(exCells(r))

	// A write that would expire on arrival is refused; nothing is sent.
	bad := ttlclient.NewMutation()
	bad.Set("session", "token", bigtable.ServerTime, []byte("oops"))
	fmt.Println(errors.Is(tbl.Apply(ctx, "user#1", bad), strategy.ErrServerTimestamp))
	// Output:
	// clicks:home=1 meta:owner=ada
	// true
}

func ExampleTable_ApplyBulk() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	good := ttlclient.NewMutation()
	good.Set("clicks", "home", bigtable.ServerTime, []byte("1"))
	bad := ttlclient.NewMutation()
	bad.SetVersion("doc", "body", 0, []byte("v0"))

	// A refused row does not stop the others: its error is at its index.
	errs, err := tbl.ApplyBulk(ctx, []string{"a", "b"}, []*ttlclient.Mutation{good, bad})
	fmt.Println(err, errs[0], errors.Is(errs[1], strategy.ErrInvalidSequence))
	r, _ := tbl.ReadRow(ctx, "a")
	fmt.Println(exCells(r))
	// Output:
	// <nil> <nil> true
	// clicks:home=1
}

func ExampleTable_ReadRow() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	m := ttlclient.NewMutation()
	for v := int64(1); v <= 3; v++ {
		m.SetVersion("doc", "body", v, []byte(fmt.Sprintf("v%d", v)))
	}
	_ = tbl.Apply(ctx, "doc#1", m)

	// The TTL filter runs first: the caller's value filter cannot match
	// v1, the version beyond the 2 a sequence(2) family keeps.
	r, _ := tbl.ReadRow(ctx, "doc#1", bigtable.RowFilter(bigtable.ValueFilter("v1")))
	fmt.Println("v1:", exCells(r))
	r, _ = tbl.ReadRow(ctx, "doc#1")
	fmt.Println("all:", exCells(r))
	// Output:
	// v1: (none)
	// all: doc:body=v2 doc:body=v3
}

func ExampleTable_ReadRows() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	for i, ttl := range []time.Duration{time.Hour, 72 * time.Hour} {
		m := ttlclient.NewMutation()
		m.SetTTL("clicks", "page", ttl, []byte("x"))
		_ = tbl.Apply(ctx, fmt.Sprintf("customer-%d", i), m)
	}
	h.Clock.Advance(49 * time.Hour)
	_ = tbl.ReadRows(ctx, bigtable.PrefixRange("customer-"), func(r bigtable.Row) bool {
		fmt.Println(r.Key(), exCells(r))
		return true
	})
	// Output: customer-1 clicks:page=x
}

func ExampleTable_SampleRowKeys() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	keys, err := tbl.SampleRowKeys(ctx)
	fmt.Println(len(keys) >= 0, err)
	// Output: true <nil>
}

func ExampleTable_ApplyReadModifyWrite() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	// Counters live in unmanaged families: the server picks the timestamp.
	inc := ttlclient.NewReadModifyWrite()
	inc.Increment("meta", "views", 1)
	_, _ = tbl.ApplyReadModifyWrite(ctx, "page#1", inc)
	r, _ := tbl.ApplyReadModifyWrite(ctx, "page#1", inc)
	fmt.Println(binary.BigEndian.Uint64(r["meta"][0].Value))

	bad := ttlclient.NewReadModifyWrite()
	bad.Increment("clicks", "views", 1)
	_, err := tbl.ApplyReadModifyWrite(ctx, "page#1", bad)
	fmt.Println(errors.Is(err, ttlclient.ErrServerAssignedTimestamp))
	// Output:
	// 2
	// true
}

func ExampleTable_Name() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	fmt.Println(tbl.Name())
	// Output: events
}

func ExampleTable_Raw() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	m := ttlclient.NewMutation()
	m.SetTTL("session", "token", time.Minute, []byte("abc"))
	_ = tbl.Apply(ctx, "user#1", m)
	h.Clock.Advance(time.Hour)

	// The raw table reads without the TTL filter: the expired cell is still
	// stored until Bigtable's GC collects it.
	filtered, _ := tbl.ReadRow(ctx, "user#1")
	stored, _ := tbl.Raw().ReadRow(ctx, "user#1")
	fmt.Println("through bttl:", exCells(filtered))
	fmt.Println("stored:      ", exCells(stored))
	// Output:
	// through bttl: (none)
	// stored:       session:token=abc
}

func ExampleTable_Policy() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	p, ok := tbl.Policy("clicks")
	fmt.Println(p, ok)
	_, ok = tbl.Policy("nope")
	fmt.Println(ok)
	// Output:
	// default-expiry(D=48h0m0s) true
	// false
}

func ExampleNewMutation() {
	m := ttlclient.NewMutation()
	m.Set("clicks", "home", bigtable.ServerTime, []byte("1"))
	fmt.Printf("%T\n", m)
	// Output: *ttlclient.Mutation
}

func ExampleNewCondMutation() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	lock := ttlclient.NewMutation()
	lock.SetTTL("session", "lock", time.Minute, []byte("held"))
	_ = tbl.Apply(ctx, "job#1", lock)
	h.Clock.Advance(2 * time.Minute) // the lock expired, GC has not run

	// An expired cell never satisfies a condition: the false branch runs.
	taken := ttlclient.NewMutation()
	taken.Set("meta", "outcome", 0, []byte("lock busy"))
	acquired := ttlclient.NewMutation()
	acquired.Set("meta", "outcome", 0, []byte("lock acquired"))
	cond := ttlclient.NewCondMutation(bigtable.ColumnFilter("lock"), taken, acquired)
	_ = tbl.Apply(ctx, "job#1", cond)
	r, _ := tbl.ReadRow(ctx, "job#1", bigtable.RowFilter(bigtable.FamilyFilter("meta")))
	fmt.Println(exCells(r))
	// Output: meta:outcome=lock acquired
}

func ExampleMutation_SetTTL() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	m := ttlclient.NewMutation()
	m.SetTTL("clicks", "short", time.Hour, []byte("1h"))
	m.SetTTL("clicks", "long", 72*time.Hour, []byte("72h"))
	_ = tbl.Apply(ctx, "user#1", m)
	h.Clock.Advance(50 * time.Hour)
	r, _ := tbl.ReadRow(ctx, "user#1")
	fmt.Println(exCells(r))

	zero := ttlclient.NewMutation()
	zero.SetTTL("clicks", "x", 0, nil)
	fmt.Println(errors.Is(tbl.Apply(ctx, "user#1", zero), strategy.ErrInvalidTTL))
	// Output:
	// clicks:long=72h
	// true
}

func ExampleMutation_SetVersion() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	m := ttlclient.NewMutation()
	m.SetVersion("doc", "body", 7, []byte("rev 7"))
	_ = tbl.Apply(ctx, "doc#1", m)
	stored, _ := tbl.Raw().ReadRow(ctx, "doc#1")
	fmt.Println(stored["doc"][0].Timestamp) // seq * 1000
	// Output: 7000
}

func ExampleNewReadModifyWrite() {
	rmw := ttlclient.NewReadModifyWrite()
	rmw.Increment("meta", "count", 1)
	fmt.Printf("%T\n", rmw)
	// Output: *ttlclient.ReadModifyWrite
}

func ExampleReadModifyWrite_AppendValue() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	rmw := ttlclient.NewReadModifyWrite()
	rmw.AppendValue("meta", "log", []byte("a"))
	_, _ = tbl.ApplyReadModifyWrite(ctx, "r", rmw)
	r, _ := tbl.ApplyReadModifyWrite(ctx, "r", rmw)
	fmt.Println(string(r["meta"][0].Value))
	// Output: aa
}

func ExampleReadModifyWrite_Increment() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	rmw := ttlclient.NewReadModifyWrite()
	rmw.Increment("meta", "n", 5)
	r, _ := tbl.ApplyReadModifyWrite(ctx, "r", rmw)
	fmt.Println(binary.BigEndian.Uint64(r["meta"][0].Value))
	// Output: 5
}

func ExampleMutation_Set() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	// An explicit timestamp means what the family's convention says: on a
	// one-second family, the expiry instant.
	expiry := bigtable.Time(h.Clock.Now().Add(time.Hour))
	m := ttlclient.NewMutation()
	m.Set("session", "banner", expiry, []byte("sale"))
	fmt.Println(tbl.Apply(ctx, "site", m))

	past := ttlclient.NewMutation()
	past.Set("session", "banner", bigtable.Time(h.Clock.Now()), []byte("sale"))
	fmt.Println(errors.Is(tbl.Apply(ctx, "site", past), strategy.ErrAlreadyExpired))
	// Output:
	// <nil>
	// true
}

// exWrite applies m to row and prints what a read returns.
func exWrite(ctx context.Context, tbl *ttlclient.Table, row string, m *ttlclient.Mutation) {
	if err := tbl.Apply(ctx, row, m); err != nil {
		fmt.Println(err)
		return
	}
	r, _ := tbl.ReadRow(ctx, row)
	fmt.Println(exCells(r))
}

func exSeed(ctx context.Context, tbl *ttlclient.Table) {
	m := ttlclient.NewMutation()
	m.Set("clicks", "a", bigtable.ServerTime, []byte("1"))
	m.Set("clicks", "b", bigtable.ServerTime, []byte("2"))
	m.Set("meta", "owner", 1000, []byte("ada"))
	_ = tbl.Apply(ctx, "r", m)
}

func ExampleMutation_DeleteCellsInColumn() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	exSeed(ctx, tbl)
	m := ttlclient.NewMutation()
	m.DeleteCellsInColumn("clicks", "a")
	exWrite(ctx, tbl, "r", m)
	// Output: clicks:b=2 meta:owner=ada
}

func ExampleMutation_DeleteTimestampRange() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	exSeed(ctx, tbl)
	// Stored timestamps are the strategy's: on an unmanaged family, the
	// caller's own (1000 here).
	m := ttlclient.NewMutation()
	m.DeleteTimestampRange("meta", "owner", 0, 2000)
	exWrite(ctx, tbl, "r", m)
	// Output: clicks:a=1 clicks:b=2
}

func ExampleMutation_DeleteCellsInFamily() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	exSeed(ctx, tbl)
	m := ttlclient.NewMutation()
	m.DeleteCellsInFamily("clicks")
	exWrite(ctx, tbl, "r", m)
	// Output: meta:owner=ada
}

func ExampleMutation_DeleteRow() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	exSeed(ctx, tbl)
	m := ttlclient.NewMutation()
	m.DeleteRow()
	exWrite(ctx, tbl, "r", m)
	// Output: (none)
}

func ExampleMutation_AddIntToCell() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	// Aggregate cells merge on the server under a timestamp no strategy
	// controls: refused on managed families (before any RPC).
	m := ttlclient.NewMutation()
	m.AddIntToCell("clicks", "total", 0, 1)
	fmt.Println(errors.Is(tbl.Apply(ctx, "r", m), ttlclient.ErrServerAssignedTimestamp))
	// Output: true
}

func ExampleMutation_MergeBytesToCell() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	m := ttlclient.NewMutation()
	m.MergeBytesToCell("session", "hll", 0, []byte{1})
	fmt.Println(errors.Is(tbl.Apply(ctx, "r", m), ttlclient.ErrServerAssignedTimestamp))
	// Output: true
}

func ExampleCellError() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	m := ttlclient.NewMutation()
	m.Set("session", "token", bigtable.ServerTime, []byte("oops"))
	err := tbl.Apply(ctx, "user#1", m)

	var ce *ttlclient.CellError
	if errors.As(err, &ce) {
		fmt.Println(ce.Table, ce.Row, ce.Family, ce.Column, errors.Is(ce, strategy.ErrServerTimestamp))
	}
	// Output: events user#1 session token true
}

func ExampleWithAdminClient() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	_ = h.CreateTable(ctx, "events", exSchema)

	// A wrapped client has no admin client of its own: give it one, so Open
	// can check each family's GC rule.
	client := ttlclient.Wrap(h.Raw, ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance))
	_, err := client.Open(ctx, "events", exSchema)
	fmt.Println(err)

	_, err = ttlclient.Wrap(h.Raw).Open(ctx, "events", exSchema)
	fmt.Println(errors.Is(err, ttlclient.ErrNoAdminClient))
	// Output:
	// <nil>
	// true
}

// exLogger logs to stdout without times, so the example's output is stable.
func exLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func ExampleWithoutVerify() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	_ = h.CreateTable(ctx, "events", exSchema)

	// Without admin permission: skip the GC-rule check. Open says so.
	client := ttlclient.Wrap(h.Raw, ttlclient.WithoutVerify(), ttlclient.WithLogger(exLogger()))
	_, err := client.Open(ctx, "events", exSchema)
	fmt.Println(err)
	// Output:
	// level=WARN msg="bttl: GC rules not verified (WithoutVerify): a family whose rule does not match its strategy loses data or serves stale cells" table=events
	// <nil>
}

func ExampleWithLogger() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	_ = h.CreateTable(ctx, "events", exSchema)

	// The logger receives what Open reports, such as a skipped verification.
	quiet := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelError}))
	_, err := h.Client.Open(ctx, "events", exSchema, ttlclient.WithoutVerify(), ttlclient.WithLogger(quiet))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithVerifyTimeout() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	_ = h.CreateTable(ctx, "events", exSchema)

	tbl, err := h.Client.Open(ctx, "events", exSchema, ttlclient.WithVerifyTimeout(2*time.Second))
	fmt.Println(tbl.Name(), err)
	// Output: events <nil>
}

func ExampleClient_Verify() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	// The table's "doc" family keeps 2 versions; a schema asking for 5 does
	// not match, and neither Verify nor Open accepts it.
	_ = h.CreateTable(ctx, "events", exSchema)
	err := h.Client.Verify(ctx, "events", ttlclient.Schema{"doc": strategy.Sequence(5)})
	fmt.Println(errors.Is(err, gcrule.ErrMismatch))
	var mismatch *gcrule.MismatchError
	if errors.As(err, &mismatch) {
		fmt.Println(mismatch.Family, "|", mismatch.Kind, "| expected", mismatch.Expected, "| actual", mismatch.Actual)
	}
	fmt.Println(h.Client.Verify(ctx, "events", exSchema))
	// Output:
	// true
	// doc | wrong max versions | expected max_versions=5 | actual max_versions=2
	// <nil>
}

func ExampleClientOptions() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx) // stands in for Cloud Bigtable
	defer h.Close()
	if err := h.CreateTable(ctx, "events", exSchema); err != nil {
		panic(err)
	}

	// A bigtable client of your own, dialled with bttl's interceptor,
	// then wrapped: Table.API() and reads with options work on it.
	opts := append(exDialOptions(h.Addr), ttlclient.ClientOptions()...)
	raw, err := bigtable.NewClient(ctx, bttestharness.Project, bttestharness.Instance, opts...)
	if err != nil {
		panic(err)
	}
	defer raw.Close()
	client := ttlclient.Wrap(raw, ttlclient.WithoutVerify())
	tbl, err := client.Open(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	m := bigtable.NewMutation()
	m.Set("clicks", "home", bigtable.ServerTime, []byte("1")) // the family's default TTL
	fmt.Println(tbl.API().Apply(ctx, "user#1", m))

	// Without the interceptor, what needs it is refused before any request.
	plain, err := bigtable.NewClient(ctx, bttestharness.Project, bttestharness.Instance, exDialOptions(h.Addr)...)
	if err != nil {
		panic(err)
	}
	defer plain.Close()
	undialed, err := ttlclient.Wrap(plain, ttlclient.WithoutVerify()).Open(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	err = undialed.API().Apply(ctx, "user#1", m)
	fmt.Println(errors.Is(err, ttlclient.ErrNotDialed), status.Code(err))
	// Output:
	// <nil>
	// true FailedPrecondition
}

func ExampleDialOptions() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	if err := h.CreateTable(ctx, "events", exSchema); err != nil {
		panic(err)
	}

	// A connection of your own: dial it with bttl's interceptor.
	conn, err := grpc.NewClient(h.Addr, append(ttlclient.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		panic(err)
	}
	raw, err := bigtable.NewClient(ctx, bttestharness.Project, bttestharness.Instance, option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	defer raw.Close()
	tbl, err := ttlclient.Wrap(raw, ttlclient.WithoutVerify()).Open(ctx, "events", exSchema)
	if err != nil {
		panic(err)
	}
	// A read with options: the interceptor puts the TTL filter before the
	// caller's filter on the wire.
	_, err = tbl.ReadRow(ctx, "user#1", bigtable.RowFilter(bigtable.LatestNFilter(1)))
	fmt.Println(err)
	// Output: <nil>
}
