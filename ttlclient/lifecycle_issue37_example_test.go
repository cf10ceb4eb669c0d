package ttlclient_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bttl/bttl/ttlclient"
)

// Per-cell results of a column-wide expire, as Redis HEXPIRE answers per
// field.
func ExampleExpireResultsTo() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "hits", "n", "1", 10*time.Minute)
	exSet(ctx, tbl, "u1", "hits", "n", "2", 20*time.Minute)

	var rs []ttlclient.ExpireCellResult
	moved, err := tbl.ExpireColumn(ctx, "u1", "hits", "n", 15*time.Minute, ttlclient.OnlyIfLater, ttlclient.ExpireResultsTo(&rs))
	fmt.Println(moved, err)
	for _, r := range rs {
		fmt.Println(r.Family, r.Column, r.Result)
	}
	// Output:
	// 0 <nil>
	// hits n not-met
	// hits n not-met
}

// Every version of a column to expire at midnight, the newest exactly
// then, the older ones keeping their spacing.
func ExampleTable_ExpireColumnAt() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	h.Clock.Set(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	exSet(ctx, tbl, "u1", "hits", "n", "1", 10*time.Minute)

	moved, err := tbl.ExpireColumnAt(ctx, "u1", "hits", "n", time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC))
	exp, _ := tbl.Expiry(exCell(ctx, tbl, "u1", "hits", "n"))
	fmt.Println(moved, err, exp.UTC().Format(time.RFC3339))
	// Output:
	// 1 <nil> 2030-01-02T00:00:00Z
}

// Log a user out everywhere: an instant already past deletes every live
// cell of the row's age families.
func ExampleTable_ExpireRowAt() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "s", "token", "abc", time.Hour)
	exSet(ctx, tbl, "u1", "hits", "n", "1", time.Hour)

	var rs []ttlclient.ExpireCellResult
	moved, err := tbl.ExpireRowAt(ctx, "u1", h.Clock.Now().Add(-time.Second), ttlclient.ExpireResultsTo(&rs))
	fmt.Println(moved, err)
	for _, r := range rs {
		fmt.Println(r.Family, r.Column, r.Result)
	}
	// Output:
	// 2 <nil>
	// hits n deleted
	// s token deleted
}

// Read a session and make it expire at the end of the day, in one step
// (GETEX ... EXAT).
func ExampleTable_ReadRowAndExpireAt() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	h.Clock.Set(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	exSet(ctx, tbl, "u1", "s", "token", "abc", 5*time.Minute)

	row, r, err := tbl.ReadRowAndExpireAt(ctx, "u1", nil, time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC))
	fmt.Println(string(row["s"][0].Value), r, err)
	exp, _ := tbl.Expiry(exCell(ctx, tbl, "u1", "s", "token"))
	fmt.Println(exp.UTC().Format(time.RFC3339))
	// Output:
	// abc set <nil>
	// 2030-01-02T00:00:00Z
}

// Create a session's fields only if none exists yet (HSETEX ... FNX EX),
// then refresh them only if all still exist (FXX).
func ExampleTable_SetColumns() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	fields := map[string][]byte{"user": []byte("ann"), "role": []byte("admin")}

	created, err := tbl.SetColumns(ctx, "sess1", "hits", fields, 30*time.Minute, ttlclient.SetIfNoneExist)
	fmt.Println("created:", created, err)
	again, err := tbl.SetColumns(ctx, "sess1", "hits", fields, 30*time.Minute, ttlclient.SetIfNoneExist)
	fmt.Println("created again:", again, err)
	fields["role"] = []byte("user")
	updated, err := tbl.SetColumns(ctx, "sess1", "hits", fields, time.Hour, ttlclient.SetIfAllExist)
	fmt.Println("updated:", updated, err, ttlclient.SetIfAllExist)
	// Output:
	// created: true <nil>
	// created again: false <nil>
	// updated: true <nil> FXX
}

// Update a session's fields without extending its life (HSETEX ... FXX
// KEEPTTL): each field keeps its own expiry.
func ExampleTable_SetColumnsKeepTTL() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "sess1", "hits", "user", "ann", 30*time.Minute)
	exSet(ctx, tbl, "sess1", "hits", "role", "admin", 30*time.Minute)

	r, err := tbl.SetColumnsKeepTTL(ctx, "sess1", "hits", map[string][]byte{"role": []byte("user")})
	fmt.Println(r, err)
	left, _ := tbl.RemainingTTL(exCell(ctx, tbl, "sess1", "hits", "role"))
	fmt.Println(string(exCell(ctx, tbl, "sess1", "hits", "role").Value), left)
	r, err = tbl.SetColumnsKeepTTL(ctx, "sess1", "hits", map[string][]byte{"role": []byte("x"), "gone": []byte("y")})
	fmt.Println(r, err)
	// Output:
	// set <nil>
	// user 30m0s
	// no-cell <nil>
}
