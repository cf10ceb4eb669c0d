package wireguard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// A plain *bigtable.Client with the guard refuses a server-timestamp write
// to a one-second family before it is sent.
func ExampleGuard_ClientOptions() {
	ctx := context.Background()
	// This example dials the endpoint itself (ExampleGuard_Verify shows
	// BIGTABLE_EMULATOR_HOST).
	if prev, ok := os.LookupEnv("BIGTABLE_EMULATOR_HOST"); ok {
		os.Unsetenv("BIGTABLE_EMULATOR_HOST")
		defer os.Setenv("BIGTABLE_EMULATOR_HOST", prev)
	}
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "sessions", schema); err != nil {
		panic(err)
	}

	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": schema}, wireguard.WithReadFilter())
	if err != nil {
		panic(err)
	}
	opts := append([]option.ClientOption{
		// The emulator; in production, only guard.ClientOptions().
		option.WithEndpoint(h.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}, guard.ClientOptions()...)
	client, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{DisableSession: true, MetricsProvider: bigtable.NoopMetricsProvider{}}, opts...)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	m := bigtable.NewMutation()
	m.Set("session", "token", bigtable.ServerTime, []byte("abc"))
	err = client.Open("sessions").Apply(ctx, "user#1", m)
	fmt.Println(status.Code(err) == codes.FailedPrecondition)
	// Output: true
}

// Verify tells whether a client's requests go through the guard, writing
// nothing. Under BIGTABLE_EMULATOR_HOST, ClientOptions install the guard
// too; a client made without them is reported inactive.
func ExampleGuard_Verify() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx) // an in-process emulator
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "sessions", schema); err != nil {
		panic(err)
	}
	prev, had := os.LookupEnv("BIGTABLE_EMULATOR_HOST")
	os.Setenv("BIGTABLE_EMULATOR_HOST", h.Addr)
	defer func() {
		if had {
			os.Setenv("BIGTABLE_EMULATOR_HOST", prev)
		} else {
			os.Unsetenv("BIGTABLE_EMULATOR_HOST")
		}
	}()

	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": schema})
	if err != nil {
		panic(err)
	}
	cfg := bigtable.ClientConfig{DisableSession: true, MetricsProvider: bigtable.NoopMetricsProvider{}}
	guarded, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, cfg, guard.ClientOptions()...)
	if err != nil {
		panic(err)
	}
	defer guarded.Close()
	fmt.Println(guard.Verify(ctx, guarded, "sessions"))

	plain, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, cfg)
	if err != nil {
		panic(err)
	}
	defer plain.Close()
	err = guard.Verify(ctx, plain, "sessions")
	fmt.Println(errors.Is(err, wireguard.ErrGuardInactive))
	// Output:
	// <nil>
	// true
}

// Table IDs, as given to Client.Open, name the guarded tables: a request for
// that table in any instance the client reaches is checked.
func ExampleNew() {
	guard, err := wireguard.New(map[string]strategy.Schema{
		"sessions": {"session": strategy.OneSecond(), "meta": strategy.Unmanaged()},
		"docs":     {"body": strategy.Sequence(3)},
	})
	fmt.Println(guard != nil, err)

	// A full resource name is not a table ID.
	_, err = wireguard.New(map[string]strategy.Schema{"projects/p/instances/i/tables/sessions": {}})
	fmt.Println(errors.Is(err, strategy.ErrInvalidPolicy))
	// Output:
	// true <nil>
	// true
}

// To share a connection, dial it yourself with the guard's dial options
// and hand it to the client: a client given a connection ignores
// option.WithGRPCDialOption, so ClientOptions would not reach it.
func ExampleGuard_DialOptions() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx) // an in-process emulator
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "sessions", schema); err != nil {
		panic(err)
	}

	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": schema})
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient(h.Addr, append(guard.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...) // the emulator speaks plaintext
	if err != nil {
		panic(err)
	}
	client, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{DisableSession: true, MetricsProvider: bigtable.NoopMetricsProvider{}},
		option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	defer client.Close()

	m := bigtable.NewMutation()
	m.Set("session", "token", bigtable.ServerTime, []byte("abc"))
	err = client.Open("sessions").Apply(ctx, "user#1", m)
	fmt.Println(status.Code(err))
	// Output: FailedPrecondition
}

// The clock the guard checks timestamps against: in a one-second family a
// cell's timestamp is its expiry instant, so a write whose instant has
// passed by the guard's clock is refused as expired on arrival. Tests give
// the guard a manual clock; production keeps the default, the system clock.
func ExampleWithClock() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "sessions", schema); err != nil {
		panic(err)
	}
	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": schema}, wireguard.WithClock(h.Clock))
	if err != nil {
		panic(err)
	}
	client := dial(ctx, h.Addr, guard.DialOptions()...)
	defer client.Close()
	tbl := client.Open("sessions")

	expiry := bigtable.Time(h.Clock.Now().Add(time.Minute)) // a minute from now
	m := bigtable.NewMutation()
	m.Set("session", "token", expiry, []byte("abc"))
	fmt.Println("now:", rule(tbl.Apply(ctx, "user#1", m)))

	h.Clock.Advance(time.Hour) // the same write an hour later
	fmt.Println("an hour later:", rule(tbl.Apply(ctx, "user#1", m)))
	// Output:
	// now: ok
	// an hour later: expired-on-arrival
}

// With WithReadFilter, legacy reads through a plain *bigtable.Client stop
// seeing cells that have expired but that Bigtable's GC has not collected
// yet.
func ExampleWithReadFilter() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "sessions", schema); err != nil {
		panic(err)
	}
	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": schema},
		wireguard.WithReadFilter(), wireguard.WithClock(h.Clock))
	if err != nil {
		panic(err)
	}
	client := dial(ctx, h.Addr, guard.DialOptions()...)
	defer client.Close()
	tbl := client.Open("sessions")

	m := bigtable.NewMutation()
	m.Set("session", "short", bigtable.Time(h.Clock.Now().Add(time.Minute)), []byte("1 minute"))
	m.Set("session", "long", bigtable.Time(h.Clock.Now().Add(24*time.Hour)), []byte("1 day"))
	if err := tbl.Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}

	h.Clock.Advance(time.Hour) // "short" has expired; GC has not run
	row, err := tbl.ReadRow(ctx, "user#1")
	if err != nil {
		panic(err)
	}
	stored, err := h.Stored(ctx, "sessions", "user#1")
	if err != nil {
		panic(err)
	}
	fmt.Println("read:  ", len(row["session"]), "cell,", row["session"][0].Column)
	fmt.Println("stored:", len(stored["session"]), "cells")
	// Output:
	// read:   1 cell, session:long
	// stored: 2 cells
}

// To chain the guard with interceptors of your own, install its
// interceptors yourself instead of DialOptions. An interceptor after the
// guard sees only the calls it let through: here, of two MutateRow calls,
// the one with a server timestamp never leaves the client.
func ExampleGuard_UnaryClientInterceptor() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"session": strategy.OneSecond(), "meta": strategy.Unmanaged()}
	if err := h.CreateTable(ctx, "sessions", schema); err != nil {
		panic(err)
	}
	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": schema})
	if err != nil {
		panic(err)
	}

	sent := 0
	countMutateRow := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/google.bigtable.v2.Bigtable/MutateRow" {
			sent++
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	client := dial(ctx, h.Addr,
		grpc.WithChainUnaryInterceptor(guard.UnaryClientInterceptor(), countMutateRow),
		grpc.WithChainStreamInterceptor(guard.StreamClientInterceptor()))
	defer client.Close()
	tbl := client.Open("sessions")

	bad := bigtable.NewMutation()
	bad.Set("session", "token", bigtable.ServerTime, []byte("abc"))
	good := bigtable.NewMutation()
	good.Set("meta", "owner", bigtable.ServerTime, []byte("ada")) // unmanaged: any timestamp
	fmt.Println(rule(tbl.Apply(ctx, "user#1", bad)))
	fmt.Println(rule(tbl.Apply(ctx, "user#1", good)))
	fmt.Println("MutateRow calls sent:", sent)
	// Output:
	// server-timestamp
	// ok
	// MutateRow calls sent: 1
}

// The stream interceptor checks MutateRows (ApplyBulk) and, with
// WithReadFilter, rewrites ReadRows. One bad entry refuses the whole
// request: the valid entry is not written either.
func ExampleGuard_StreamClientInterceptor() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"doc": strategy.Sequence(3)}
	if err := h.CreateTable(ctx, "docs", schema); err != nil {
		panic(err)
	}
	guard, err := wireguard.New(map[string]strategy.Schema{"docs": schema})
	if err != nil {
		panic(err)
	}
	client := dial(ctx, h.Addr,
		grpc.WithChainUnaryInterceptor(guard.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(guard.StreamClientInterceptor()))
	defer client.Close()

	good := bigtable.NewMutation()
	good.Set("doc", "body", 2000, []byte("version 2")) // sequence 2: seq*1000
	bad := bigtable.NewMutation()
	bad.Set("doc", "body", 0, []byte("version 0")) // sequences start at 1
	_, err = client.Open("docs").ApplyBulk(ctx, []string{"a", "b"}, []*bigtable.Mutation{good, bad})
	fmt.Println(rule(err))
	stored, err := h.Stored(ctx, "docs", "a")
	if err != nil {
		panic(err)
	}
	fmt.Println("row a stored:", stored != nil)
	// Output:
	// invalid-sequence
	// row a stored: false
}

// dial returns a plain *bigtable.Client on the emulator at addr, its
// connection dialled with opts.
func dial(ctx context.Context, addr string, opts ...grpc.DialOption) *bigtable.Client {
	conn, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		panic(err)
	}
	client, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{DisableSession: true, MetricsProvider: bigtable.NoopMetricsProvider{}},
		option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	return client
}

// rule is the guard rule that refused a call ("ok" when none did). The
// refusal's status carries it in an errdetails.PreconditionFailure, but
// bigtable.Client (v1.58) rebuilds the status it returns without details,
// so behind a *bigtable.Client the rule is read from the message.
func rule(err error) string {
	if err == nil {
		return "ok"
	}
	msg := status.Convert(err).Message()
	if _, after, ok := strings.Cut(msg, "rule "); ok {
		name, _, _ := strings.Cut(after, ":")
		return name
	}
	return err.Error()
}

// A materialized view's name does not say which table it reads, so with
// WithReadFilter the guard filters reads of a view only by the schema
// declared for it, and refuses reads of undeclared views before they are
// sent.
func ExampleWithMaterializedView() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"session": strategy.OneSecond(), "meta": strategy.Unmanaged()}
	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": schema}, wireguard.WithReadFilter(),
		// "recent" keeps the table's families and timestamps: the table's
		// filter fits it. "owners" carries only unmanaged data.
		wireguard.WithMaterializedView("recent", schema),
		wireguard.WithMaterializedView("owners", strategy.Schema{"meta": strategy.Unmanaged()}))
	if err != nil {
		panic(err)
	}
	client := dial(ctx, h.Addr, guard.DialOptions()...)
	defer client.Close()

	all := func(bigtable.Row) bool { return true }
	// Neither emulator serves materialized views: declared views pass the
	// guard and reach the server, which answers NotFound.
	fmt.Println(status.Code(client.OpenMaterializedView("recent").ReadRows(ctx, bigtable.InfiniteRange(""), all)))
	fmt.Println(rule(client.OpenMaterializedView("daily").ReadRows(ctx, bigtable.InfiniteRange(""), all)))
	// Output:
	// NotFound
	// undeclared-materialized-view
}

// The guard cannot filter SQL: while it guards a managed family it refuses
// queries, unless WithSQLAllowed accepts that they may return expired
// cells.
func ExampleWithSQLAllowed() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schemas := map[string]strategy.Schema{"sessions": {"session": strategy.OneSecond()}}

	strict, err := wireguard.New(schemas)
	if err != nil {
		panic(err)
	}
	client := dial(ctx, h.Addr, strict.DialOptions()...)
	defer client.Close()
	_, err = client.PrepareStatement(ctx, "SELECT _key FROM sessions", nil)
	fmt.Println(rule(err))

	lenient, err := wireguard.New(schemas, wireguard.WithSQLAllowed())
	if err != nil {
		panic(err)
	}
	client2 := dial(ctx, h.Addr, lenient.DialOptions()...)
	defer client2.Close()
	_, err = client2.PrepareStatement(ctx, "SELECT _key FROM sessions", nil)
	fmt.Println(status.Code(err)) // the guard let it through; the emulator has no SQL
	// Output:
	// sql-query
	// Unimplemented
}

// A guarded table with many families and a few managed ones: every family
// the schema does not name passes as unmanaged.
func ExampleWithUnlistedFamilies() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	if err := h.CreateTable(ctx, "wide", strategy.Schema{"session": strategy.OneSecond(), "profile": strategy.Unmanaged()}); err != nil {
		panic(err)
	}
	schema := strategy.Schema{"session": strategy.OneSecond()}
	strict, _ := wireguard.New(map[string]strategy.Schema{"wide": schema})
	open, _ := wireguard.New(map[string]strategy.Schema{"wide": schema}, wireguard.WithUnlistedFamilies(strategy.Unmanaged()))

	m := bigtable.NewMutation()
	m.Set("profile", "name", 1000, []byte("Ada"))
	for _, g := range []*wireguard.Guard{strict, open} {
		client := dial(ctx, h.Addr, g.DialOptions()...)
		fmt.Println(rule(client.Open("wide").Apply(ctx, "user#1", m)))
		client.Close()
	}
	// Output:
	// unknown-family
	// ok
}

// refusalCounter is a wireguard.Recorder printing each refusal (package
// metrics's Recorder counts them into bttl_refusals_total instead).
type refusalCounter struct{}

func (refusalCounter) GuardRefused(table, family, reason string) {
	fmt.Printf("refused: table %q, family %q, reason %s\n", table, family, reason)
}

// WithRecorder counts every refusal, with bounded labels: never the row
// key or the column.
func ExampleWithRecorder() {
	ctx := context.Background()
	h, client := exSessions(ctx, wireguard.WithRecorder(refusalCounter{}))
	defer h.Close()
	defer client.Close()

	m := bigtable.NewMutation()
	m.Set("session", "token", bigtable.ServerTime, []byte("abc"))
	_ = client.Open("sessions").Apply(ctx, "user#1", m)
	// Output:
	// refused: table "sessions", family "session", reason server_timestamp
}
