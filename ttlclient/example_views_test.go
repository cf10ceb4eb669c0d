package ttlclient_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// exViewHarness starts an in-process emulator with table "events" on
// exSchema. Neither emulator serves views: its connection maps a request
// naming an authorized view onto the view's table, and one naming
// materialized view M onto table M (see viewShim). On Bigtable none of
// this is needed.
func exViewHarness(ctx context.Context) *bttestharness.Harness {
	shim := &viewShim{}
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{DialOptions: shim.dialOptions()})
	if err != nil {
		panic(err)
	}
	if err := h.CreateTable(ctx, "events", exSchema); err != nil {
		panic(err)
	}
	return h
}

// exViewSchema is materialized view "clicks_by_page": the "clicks" cells
// of the source table, copied with their timestamps, and a count.
var exViewSchema = ttlclient.Schema{
	"clicks": strategy.DefaultExpiry(48 * time.Hour),
	"total":  strategy.Unmanaged(),
}

// exMaterializedView opens materialized view "clicks_by_page", whose row
// "home" holds a click of user-1 and the count of clicks.
func exMaterializedView(ctx context.Context) (*bttestharness.Harness, *ttlclient.MaterializedView) {
	h := exViewHarness(ctx)
	// What the view holds (Bigtable computes it from the view's query).
	if err := h.CreateTable(ctx, "clicks_by_page", exViewSchema); err != nil {
		panic(err)
	}
	m := bigtable.NewMutation()
	m.Set("clicks", "user-1", bigtable.Time(h.Clock.Now()), []byte("1"))
	m.Set("total", "n", 0, []byte("1"))
	if err := h.Raw.Open("clicks_by_page").Apply(ctx, "home", m); err != nil {
		panic(err)
	}
	mv, err := h.Client.OpenMaterializedView("clicks_by_page", exViewSchema)
	if err != nil {
		panic(err)
	}
	return h, mv
}

func ExampleClient_OpenAuthorizedView() {
	ctx := context.Background()
	h := exViewHarness(ctx)
	defer h.Close()

	// The view's schema is its table's: writes and reads through it are
	// rewritten, guarded and filtered as the table's.
	view, err := h.Client.OpenAuthorizedView(ctx, "events", "mobile", exSchema)
	if err != nil {
		panic(err)
	}
	m := ttlclient.NewMutation()
	m.SetTTL("session", "token", time.Minute, []byte("abc"))
	if err := view.Apply(ctx, "user-1", m); err != nil {
		panic(err)
	}
	r, _ := view.ReadRow(ctx, "user-1")
	fmt.Println("now:       ", exCells(r))
	h.Clock.Advance(time.Minute)
	r, _ = view.ReadRow(ctx, "user-1")
	fmt.Println("1m later:  ", exCells(r))

	// Its bigtable.TableAPI form, for code written against the plain client.
	raw := bigtable.NewMutation()
	raw.Set("session", "token", bigtable.ServerTime, []byte("abc"))
	err = view.API().Apply(ctx, "user-1", raw)
	fmt.Println(errors.Is(err, strategy.ErrServerTimestamp))
	// Output:
	// now:        session:token=abc
	// 1m later:   (none)
	// true
}

func ExampleClient_OpenAuthorizedView_mismatch() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := exViewHarness(ctx)
	defer h.Close()

	// Open verifies the table's GC rules: a schema they do not match is
	// refused.
	wrong := ttlclient.Schema{"session": strategy.DefaultExpiry(time.Hour)}
	_, err := h.Client.OpenAuthorizedView(ctx, "events", "mobile", wrong)
	fmt.Println(errors.Is(err, gcrule.ErrMismatch))
	// Output:
	// true
}

func ExampleClient_OpenMaterializedView() {
	ctx := context.Background()
	h, mv := exMaterializedView(ctx)
	defer h.Close()

	r, _ := mv.ReadRow(ctx, "home")
	fmt.Println("now:       ", exCells(r))
	// The click expires; the view's count of clicks, an aggregate, keeps
	// counting it until GC collects it from the source table.
	h.Clock.Advance(48 * time.Hour)
	r, _ = mv.ReadRow(ctx, "home")
	fmt.Println("48h later: ", exCells(r))
	// Output:
	// now:        clicks:user-1=1 total:n=1
	// 48h later:  total:n=1
}

func ExampleMaterializedView() {
	ctx := context.Background()
	h, mv := exMaterializedView(ctx)
	defer h.Close()

	// A materialized view is read-only: a write is refused before any RPC.
	m := bigtable.NewMutation()
	m.Set("total", "n", 0, []byte("2"))
	err := mv.API().Apply(ctx, "home", m)
	fmt.Println(errors.Is(err, ttlclient.ErrReadOnlyView))
	// Output:
	// true
}

func ExampleMaterializedView_Name() {
	ctx := context.Background()
	h, mv := exMaterializedView(ctx)
	defer h.Close()
	fmt.Println(mv.Name())
	// Output:
	// clicks_by_page
}

func ExampleMaterializedView_ReadRow() {
	ctx := context.Background()
	h, mv := exMaterializedView(ctx)
	defer h.Close()

	// A caller's filter applies after the TTL filter.
	r, err := mv.ReadRow(ctx, "home", bigtable.RowFilter(bigtable.FamilyFilter("^clicks$")))
	if err != nil {
		panic(err)
	}
	fmt.Println(exCells(r))
	// Output:
	// clicks:user-1=1
}

func ExampleMaterializedView_ReadRows() {
	ctx := context.Background()
	h, mv := exMaterializedView(ctx)
	defer h.Close()

	err := mv.ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		fmt.Println(r.Key(), exCells(r))
		return true
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// home clicks:user-1=1 total:n=1
}

func ExampleMaterializedView_SampleRowKeys() {
	ctx := context.Background()
	h, mv := exMaterializedView(ctx)
	defer h.Close()

	_, err := mv.SampleRowKeys(ctx)
	fmt.Println(err)
	// Output:
	// <nil>
}

func ExampleMaterializedView_API() {
	ctx := context.Background()
	h, mv := exMaterializedView(ctx)
	defer h.Close()

	// The interface bigtable.Client.OpenMaterializedView returns: reads are
	// filtered, writes refused.
	var api bigtable.TableAPI = mv.API()
	r, _ := api.ReadRow(ctx, "home")
	fmt.Println(exCells(r))
	rmw := bigtable.NewReadModifyWrite()
	rmw.Increment("total", "n", 1)
	_, err := api.ApplyReadModifyWrite(ctx, "home", rmw)
	fmt.Println(errors.Is(err, ttlclient.ErrReadOnlyView))
	// Output:
	// clicks:user-1=1 total:n=1
	// true
}

func ExampleClient_PrepareStatement() {
	ctx := context.Background()
	h, _ := exTable(ctx) // "events" has managed families
	defer h.Close()
	if _, err := h.Table(ctx, "profiles", ttlclient.Schema{"p": strategy.Unmanaged()}); err != nil {
		panic(err)
	}

	// SQL has no row filter: a query reading managed families is refused,
	// naming them.
	_, err := h.Client.PrepareStatement(ctx, "SELECT * FROM events WHERE _key = @k",
		map[string]bigtable.SQLType{"k": bigtable.BytesSQLType{}})
	var se *ttlclient.SQLError
	if errors.As(err, &se) {
		fmt.Println(errors.Is(err, ttlclient.ErrUnfilteredSQL), se.Table, se.Families)
	}

	// A table of unmanaged families only is untouched: the query reaches the
	// server (the emulators do not run SQL; Bigtable would prepare it).
	_, err = h.Client.PrepareStatement(ctx, "SELECT _key, p FROM profiles", nil)
	fmt.Println(status.Code(err) == codes.Unimplemented)
	// Output:
	// true events [clicks doc session]
	// true
}

func ExampleWithSQLAllowed() {
	ctx := context.Background()
	h, _ := exTable(ctx)
	defer h.Close()

	// For one query: accept that it returns expired cells GC has not
	// collected yet. ttlclient.Wrap(raw, ttlclient.WithSQLAllowed()) accepts
	// it for every query of a client.
	_, err := h.Client.PrepareStatement(ctx, "SELECT * FROM events", nil, ttlclient.WithSQLAllowed())
	fmt.Println(errors.Is(err, ttlclient.ErrUnfilteredSQL), status.Code(err))
	// Output:
	// false Unimplemented
}
