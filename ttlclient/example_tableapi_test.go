package ttlclient_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
)

// recordClick is code written for the plain client: it builds a
// *bigtable.Mutation and knows only bigtable.TableAPI.
func recordClick(ctx context.Context, tbl bigtable.TableAPI, user, page string) error {
	m := bigtable.NewMutation()
	m.Set("clicks", page, bigtable.ServerTime, []byte("1"))
	return tbl.Apply(ctx, user, m)
}

func ExampleTable_API() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	// Only the constructor changes: the same function, given tbl.API()
	// instead of client.OpenTable("events"), writes through bttl. A server
	// timestamp on a managed family gets the family's default TTL (48h).
	api := tbl.API()
	if err := recordClick(ctx, api, "user-1", "home"); err != nil {
		panic(err)
	}
	r, _ := api.ReadRow(ctx, "user-1")
	fmt.Println("now:       ", exCells(r))
	h.Clock.Advance(48 * time.Hour)
	r, _ = api.ReadRow(ctx, "user-1")
	fmt.Println("48h later: ", exCells(r))

	// The guardrails apply: a one-second family has no default TTL.
	m := bigtable.NewMutation()
	m.Set("session", "token", bigtable.ServerTime, []byte("abc"))
	err := api.Apply(ctx, "user-1", m)
	fmt.Println(errors.Is(err, strategy.ErrServerTimestamp))
	// Output:
	// now:        clicks:home=1
	// 48h later:  (none)
	// true
}

func ExampleTable_Timestamp() {
	ctx := context.Background()
	h, tbl := exTable(ctx)
	defer h.Close()

	// A per-cell TTL for code that keeps building *bigtable.Mutation: the
	// timestamp that makes the cell live 15 minutes from the table's clock.
	// Code written for bttl says the same with ttlclient.WithTTL.
	ts, err := tbl.Timestamp("session", 15*time.Minute)
	if err != nil {
		panic(err)
	}
	m := bigtable.NewMutation()
	m.Set("session", "token", ts, []byte("abc"))
	if err := tbl.API().Apply(ctx, "user-1", m); err != nil {
		panic(err)
	}
	r, _ := tbl.ReadRow(ctx, "user-1")
	fmt.Println("now:        ", exCells(r))
	h.Clock.Advance(15 * time.Minute)
	r, _ = tbl.ReadRow(ctx, "user-1")
	fmt.Println("15 min on:  ", exCells(r))

	// A sequence family takes no TTL.
	_, err = tbl.Timestamp("doc", time.Hour)
	fmt.Println(errors.Is(err, strategy.ErrWrongCellOption))
	// Output:
	// now:         session:token=abc
	// 15 min on:   (none)
	// true
}

func ExampleClient_Open_timeout() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	_ = h.CreateTable(ctx, "events", exSchema)

	// The caller's context bounds the admin call that verifies GC rules,
	// as does the verify timeout.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tbl, err := h.Client.Open(ctx, "events", exSchema)
	fmt.Println(tbl.Name(), err)
	// Output: events <nil>
}
