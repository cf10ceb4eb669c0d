package ttlclient_test

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// A refusal carries a gRPC status, so code written for the raw client's
// errors branches on it as on a server's.
func ExampleCellError_GRPCStatus() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()
	m := ttlclient.NewMutation()
	m.Set("nope", "c", 1000, []byte("v"))
	err := tbl.Apply(ctx, "row", m)

	st, _ := status.FromError(err)
	fmt.Println(st.Code())
	var ce *ttlclient.CellError
	fmt.Println(errors.Is(err, ttlclient.ErrUnknownFamily), errors.As(err, &ce))
	// Output:
	// FailedPrecondition
	// true true
}

func ExampleNoAdminError_GRPCStatus() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	_ = h.CreateTable(ctx, "events", exSchema)

	_, err := ttlclient.Wrap(h.Raw).Open(ctx, "events", exSchema)
	fmt.Println(status.Code(err))
	// Output: FailedPrecondition
}

func ExampleSQLError_GRPCStatus() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()

	_, err := h.Client.PrepareStatement(ctx, "SELECT * FROM unopened", nil)
	var se *ttlclient.SQLError
	fmt.Println(status.Code(err), errors.As(err, &se))
	// Output: FailedPrecondition true
}

// StatusCode is the code a refusal wrapping the sentinel carries.
func ExampleStatusCode() {
	fmt.Println(ttlclient.StatusCode(ttlclient.ErrEmptyRowKey))
	fmt.Println(ttlclient.StatusCode(strategy.ErrAlreadyExpired))
	fmt.Println(ttlclient.StatusCode(errors.New("not a refusal")))
	// Output:
	// InvalidArgument
	// FailedPrecondition
	// Unknown
}

// A table with many families and a few managed ones: the schema names the
// managed ones, and every other family passes through as unmanaged.
func ExampleWithUnlistedFamilies() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	_ = h.CreateTable(ctx, "wide", strategy.Schema{
		"session": strategy.OneSecond(),
		"profile": strategy.Unmanaged(), "prefs": strategy.Unmanaged(), // and many more
	})

	tbl, err := h.Client.Open(ctx, "wide", strategy.Schema{"session": strategy.OneSecond()},
		ttlclient.WithUnlistedFamilies(strategy.Unmanaged()))
	if err != nil {
		panic(err)
	}
	m := ttlclient.NewMutation()
	m.Set("profile", "name", 1000, []byte("Ada"))
	fmt.Println(tbl.Apply(ctx, "user#1", m))
	r, _ := tbl.ReadRow(ctx, "user#1", bigtable.RowFilter(bigtable.FamilyFilter("profile")))
	fmt.Println(string(r["profile"][0].Value))
	// Output:
	// <nil>
	// Ada
}
