package ttlclient_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// exLifecycleTable starts an emulator with table "sessions": a one-second
// family recording write times, a default-expiry family and a sequence
// family.
func exLifecycleTable(ctx context.Context) (*bttestharness.Harness, *ttlclient.Table) {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	tbl, err := h.Table(ctx, "sessions", ttlclient.Schema{
		"s":    strategy.OneSecond(strategy.WithWriteTime(), strategy.WithMaxTTL(30*24*time.Hour, strategy.RefuseLonger)),
		"hits": strategy.DefaultExpiry(time.Hour),
		"doc":  strategy.Sequence(1),
	})
	if err != nil {
		panic(err)
	}
	return h, tbl
}

// exCell reads the newest live cell of family:column through tbl.
func exCell(ctx context.Context, tbl *ttlclient.Table, row, family, column string) bigtable.ReadItem {
	r, err := tbl.ReadRow(ctx, row, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"), bigtable.LatestNFilter(1))))
	if err != nil || len(r[family]) == 0 {
		panic(fmt.Sprint("no cell: ", err))
	}
	return r[family][0]
}

func exSet(ctx context.Context, tbl *ttlclient.Table, row, family, column, value string, ttl time.Duration) {
	m := ttlclient.NewMutation()
	m.SetTTL(family, column, ttl, []byte(value))
	if err := tbl.Apply(ctx, row, m); err != nil {
		panic(err)
	}
}

func ExampleTable_Expiry() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	h.Clock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	exSet(ctx, tbl, "u1", "hits", "n", "1", 3*time.Hour) // longer than D = 1h

	exp, err := tbl.Expiry(exCell(ctx, tbl, "u1", "hits", "n"))
	fmt.Println(exp.UTC().Format(time.RFC3339), err)

	m := ttlclient.NewMutation()
	m.SetVersion("doc", "body", 1, []byte("v1"))
	_ = tbl.Apply(ctx, "u1", m)
	_, err = tbl.Expiry(exCell(ctx, tbl, "u1", "doc", "body"))
	fmt.Println(errors.Is(err, ttlclient.ErrNotApplicable))
	// Output:
	// 2030-01-01T03:00:00Z <nil>
	// true
}

func ExampleTable_RemainingTTL() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "s", "token", "abc", 30*time.Minute)
	h.Clock.Advance(10 * time.Minute)

	left, _ := tbl.RemainingTTL(exCell(ctx, tbl, "u1", "s", "token"))
	fmt.Println(left) // like Redis PTTL
	// Output: 20m0s
}

func ExampleTable_Expire() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "s", "token", "abc", 30*time.Minute)

	// "Remember me": the session now lives 14 days.
	applied, err := tbl.Expire(ctx, "u1", "s", "token", 14*24*time.Hour)
	fmt.Println(applied, err)
	left, _ := tbl.RemainingTTL(exCell(ctx, tbl, "u1", "s", "token"))
	fmt.Println(left)

	// Over the family's cap: refused before any RPC.
	_, err = tbl.Expire(ctx, "u1", "s", "token", 365*24*time.Hour)
	fmt.Println(errors.Is(err, strategy.ErrTTLTooLong))
	// Output:
	// true <nil>
	// 336h0m0s
	// true
}

func ExampleExpireCellAt() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "s", "token", "old", time.Minute)
	old := exCell(ctx, tbl, "u1", "s", "token")
	exSet(ctx, tbl, "u1", "s", "token", "new", 2*time.Minute)

	// Extend the cell read earlier, not the column's newest.
	applied, _ := tbl.Expire(ctx, "u1", "s", "token", time.Hour, ttlclient.ExpireCellAt(old.Timestamp))
	fmt.Println(applied, string(exCell(ctx, tbl, "u1", "s", "token").Value))
	// Output: true old
}

func ExampleTable_ExpireColumn() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "hits", "n", "1", 10*time.Minute)
	exSet(ctx, tbl, "u1", "hits", "n", "2", 20*time.Minute)

	moved, err := tbl.ExpireColumn(ctx, "u1", "hits", "n", 2*time.Hour)
	fmt.Println(moved, err)
	// Output: 2 <nil>
}

func ExampleTable_ExpireRow() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	exSet(ctx, tbl, "u1", "s", "token", "abc", 30*time.Minute)
	exSet(ctx, tbl, "u1", "hits", "n", "1", 30*time.Minute)

	// Logout: every cell of the session expires in a millisecond.
	moved, err := tbl.ExpireRow(ctx, "u1", time.Millisecond)
	fmt.Println(moved, err)
	h.Clock.Advance(time.Millisecond)
	r, _ := tbl.ReadRow(ctx, "u1")
	fmt.Println(len(r))
	// Output:
	// 2 <nil>
	// 0
}

func ExampleTable_WriteTime() {
	ctx := context.Background()
	h, tbl := exLifecycleTable(ctx)
	defer h.Close()
	h.Clock.Set(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	exSet(ctx, tbl, "u1", "s", "token", "abc", time.Hour)
	h.Clock.Advance(5 * time.Minute)
	if _, err := tbl.Expire(ctx, "u1", "s", "token", time.Hour); err != nil {
		panic(err)
	}

	// Like Cassandra's WRITETIME: the real write time, kept by Expire.
	wt, err := tbl.WriteTime(ctx, exCell(ctx, tbl, "u1", "s", "token"))
	fmt.Println(wt.UTC().Format(time.RFC3339), err)
	// Output: 2030-01-01T12:00:00Z <nil>
}

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
