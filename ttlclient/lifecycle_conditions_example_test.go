package ttlclient_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bttl/bttl/ttlclient"
)

// A session refresh that only ever extends: a background refresh racing a
// logout cannot lengthen what the logout shortened, and the logout
// (OnlyIfEarlier) cannot lengthen a session either.
func ExampleExpireCondition() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "s", "token", "abc", 30*time.Minute)

	var r ttlclient.ExpireResult
	_, _ = tbl.Expire(ctx, "u1", "s", "token", 10*time.Minute, ttlclient.OnlyIfLater, ttlclient.ExpireResultTo(&r))
	fmt.Println("refresh to 10m:", r)
	_, _ = tbl.Expire(ctx, "u1", "s", "token", time.Hour, ttlclient.OnlyIfLater, ttlclient.ExpireResultTo(&r))
	fmt.Println("refresh to 1h:", r)
	_, _ = tbl.Expire(ctx, "u1", "s", "token", time.Second, ttlclient.OnlyIfEarlier, ttlclient.ExpireResultTo(&r))
	fmt.Println("logout:", r)
	left, _ := tbl.RemainingTTL(exCell(ctx, tbl, "u1", "s", "token"))
	fmt.Println(left)
	// Output:
	// refresh to 10m: not-met
	// refresh to 1h: set
	// logout: set
	// 1s
}

func ExampleExpireResultTo() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	var r ttlclient.ExpireResult
	applied, err := tbl.Expire(ctx, "nobody", "s", "token", time.Hour, ttlclient.ExpireResultTo(&r))
	fmt.Println(applied, r, err)
	// Output:
	// false no-cell <nil>
}

func ExampleTable_ExpireAt() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	h.Clock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	exSet(ctx, tbl, "u1", "hits", "n", "1", 10*time.Minute)

	r, err := tbl.ExpireAt(ctx, "u1", "hits", "n", time.Date(2030, 1, 1, 18, 0, 0, 0, time.UTC))
	exp, _ := tbl.Expiry(exCell(ctx, tbl, "u1", "hits", "n"))
	fmt.Println(r, err, exp.UTC().Format(time.RFC3339))

	// An instant already past deletes the cell, as Redis EXPIREAT does.
	r, err = tbl.ExpireAt(ctx, "u1", "hits", "n", time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
	fmt.Println(r, err)
	// Output:
	// set <nil> 2030-01-01T18:00:00Z
	// deleted <nil>
}

func ExampleTable_Persist() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "hits", "n", "1", 10*time.Minute)

	r, err := tbl.Persist(ctx, "u1", "hits", "n")
	fmt.Println(r, err)
	r, _ = tbl.Persist(ctx, "u1", "hits", "n")
	fmt.Println("again:", r) // no TTL left to remove
	_, err = tbl.RemainingTTL(exCell(ctx, tbl, "u1", "hits", "n"))
	fmt.Println("remaining TTL over 292 years:", err != nil)

	// "s" caps TTLs at 30 days and refuses longer ones: no forever there.
	exSet(ctx, tbl, "u1", "s", "token", "abc", time.Hour)
	_, err = tbl.Persist(ctx, "u1", "s", "token")
	fmt.Println(errors.Is(err, ttlclient.ErrCannotPersist))
	// Output:
	// set <nil>
	// again: not-met
	// remaining TTL over 292 years: true
	// true
}

func ExampleTable_SetKeepTTL() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "s", "cart", "2 items", 30*time.Minute)
	h.Clock.Advance(10 * time.Minute)

	// Refresh the cached value without extending its life.
	r, err := tbl.SetKeepTTL(ctx, "u1", "s", "cart", []byte("3 items"))
	c := exCell(ctx, tbl, "u1", "s", "cart")
	left, _ := tbl.RemainingTTL(c)
	fmt.Println(r, err, string(c.Value), left)

	r, err = tbl.SetKeepTTL(ctx, "u2", "s", "cart", []byte("1 item"))
	fmt.Println(r, err) // no live cell: nothing written
	// Output:
	// set <nil> 3 items 20m0s
	// no-cell <nil>
}

func ExampleTable_MaxWriteTime() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	h.Clock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	exSet(ctx, tbl, "u1", "s", "token", "abc", time.Hour)
	h.Clock.Advance(5 * time.Minute)
	exSet(ctx, tbl, "u1", "s", "cart", "2 items", time.Hour)

	wt, err := tbl.MaxWriteTime(ctx, "u1", "s")
	fmt.Println(wt.Format(time.RFC3339), err)
	wt, err = tbl.MaxWriteTime(ctx, "u1", "s", "token")
	fmt.Println(wt.Format(time.RFC3339), err)
	// Output:
	// 2030-01-01T00:05:00Z <nil>
	// 2030-01-01T00:00:00Z <nil>
}

// Read a session and extend it in one step, without time-to-idle's
// asynchronous refresh.
func ExampleTable_ReadRowAndExpire() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "s", "token", "abc", 5*time.Minute)

	row, r, err := tbl.ReadRowAndExpire(ctx, "u1", nil, time.Hour)
	fmt.Println(string(row["s"][0].Value), r, err)
	left, _ := tbl.RemainingTTL(exCell(ctx, tbl, "u1", "s", "token"))
	fmt.Println(left)
	// Output:
	// abc set <nil>
	// 1h0m0s
}

func ExampleTable_ReadRowAndPersist() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "hits", "n", "1", 10*time.Minute)

	row, r, err := tbl.ReadRowAndPersist(ctx, "u1", nil)
	fmt.Println(string(row["hits"][0].Value), r, err)
	_, err = tbl.RemainingTTL(exCell(ctx, tbl, "u1", "hits", "n"))
	fmt.Println("remaining TTL over 292 years:", err != nil)
	// Output:
	// 1 set <nil>
	// remaining TTL over 292 years: true
}
