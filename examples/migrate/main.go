// Command migrate adopts the default-expiry strategy on a table that already
// holds data written by the raw client with real timestamps, and shows what
// changes, what is kept and why it is safe; and why the one-second strategy
// cannot be adopted the same way.
//
//	go run ./examples/migrate
//
// Why it is safe: under default expiry with default TTL D, a cell lives
// until timestamp + D, and a cell that should live D is written at its real
// write time. So every cell already in the table, and every cell a not yet
// migrated writer keeps writing with a real or server timestamp, means
// exactly "written then, with the default TTL". Adopting the strategy is
// setting the GC rule max age D; the only cells that go are those older than
// D, which is the retention being adopted. Under one-second expiry a
// timestamp is the expiry instant, so every real timestamp (<= now) has
// already expired: adopting it would delete the whole family.
//
// On a real table, `bttl audit` (cmd/bttl) reports per family what an
// adoption would keep before you make it, and `bttl plan` / `bttl apply` set
// the GC rule; `bttl apply` refuses a one-second adoption over real
// timestamps unless forced.
//
// With BIGTABLE_EMULATOR_HOST set it uses that emulator.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

func main() {
	log.SetOutput(io.Discard) // the emulator logs every GC pass
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

const (
	table  = "pageviews"
	family = "views"
	row    = "site#example.com"
	d      = 48 * time.Hour // the default TTL being adopted
)

func run(ctx context.Context, out io.Writer) error {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		return err
	}
	defer h.Close()

	// Before: a family with no GC rule, written by legacy code with the raw
	// client and real timestamps.
	if err := h.CreateTable(ctx, table, strategy.Schema{family: strategy.Unmanaged()}); err != nil {
		return err
	}
	t0 := h.Clock.Now()
	ages := map[string]time.Duration{
		"viewed-1h-ago": time.Hour, "viewed-30h-ago": 30 * time.Hour, "viewed-47h-ago": 47 * time.Hour,
		"viewed-60h-ago": 60 * time.Hour, "viewed-10d-ago": 10 * 24 * time.Hour,
	}
	legacy := bigtable.NewMutation()
	for col, age := range ages {
		legacy.Set(family, col, bigtable.Time(t0.Add(-age)), []byte("1"))
	}
	raw := h.Raw.Open(table)
	if err := raw.Apply(ctx, row, legacy); err != nil {
		return err
	}
	before, err := raw.ReadRow(ctx, row)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "before: family %q has no GC rule and %d cells written with real timestamps\n\n", family, len(before[family]))

	// What each strategy would make of the existing cells, from the
	// strategy math alone (this is what a pre-adoption audit checks).
	adopted := strategy.DefaultExpiry(d)
	oneSecond := strategy.OneSecond()
	now := bigtable.Time(t0)
	keptDefault, keptOneSecond := 0, 0
	fmt.Fprintf(out, "  %-16s %-38s %s\n", "cell", "under default expiry, D = 48h", "under one-second expiry")
	for _, it := range before[family] {
		dv := "expired: older than D, GC removes it"
		if adopted.IsLive(it.Timestamp, now) {
			keptDefault++
			dv = "kept until t0+" + adopted.Expiry(it.Timestamp).Time().Sub(t0).String()
		}
		ov := "expired on adoption"
		if oneSecond.IsLive(it.Timestamp, now) {
			keptOneSecond++
			ov = "kept"
		}
		fmt.Fprintf(out, "  %-16s %-38s %s\n", it.Column[len(family)+1:], dv, ov)
	}
	fmt.Fprintf(out, "default-expiry adoption keeps %d of %d pre-existing cells\n", keptDefault, len(before[family]))
	fmt.Fprintf(out, "one-second adoption would keep %d of %d: a real timestamp is read as an expiry instant already past\n\n", keptOneSecond, len(before[family]))

	// Adopt: set the GC rule the strategy needs, then open the table through
	// bttl. Nothing is rewritten.
	if err := h.Admin.SetGCPolicy(ctx, table, family, adopted.GCPolicy()); err != nil {
		return err
	}
	tbl, err := h.Client.Open(ctx, table, ttlclient.Schema{family: adopted})
	if err != nil {
		return err
	}
	r, err := tbl.ReadRow(ctx, row)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "after adoption, read through bttl: %d of %d pre-existing cells: %v\n", len(r[family]), len(before[family]), columns(r))

	// New code writes through bttl with per-cell TTLs; legacy writers not
	// migrated yet keep writing real and server timestamps, and their cells
	// simply get the default TTL.
	m := ttlclient.NewMutation()
	m.Set(family, "new-default", bigtable.ServerTime, []byte("1"))
	m.SetTTL(family, "new-ttl-1h", time.Hour, []byte("1"))
	if err := tbl.Apply(ctx, row, m); err != nil {
		return err
	}
	old := bigtable.NewMutation()
	old.Set(family, "legacy-servertime", bigtable.ServerTime, []byte("1"))
	if err := raw.Apply(ctx, row, old); err != nil {
		return err
	}

	for _, at := range []time.Duration{0, 2 * time.Hour, 49 * time.Hour} {
		h.Clock.Set(t0.Add(at))
		r, err := tbl.ReadRow(ctx, row)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  at t0+%-7s read through bttl: %v\n", at, columns(r))
	}

	// The server's GC runs on real time: it removes the cells really older
	// than D, as it would for any max-age rule. Reads through bttl stopped
	// returning them at once.
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := h.Stored(ctx, table, row)
		if err != nil {
			return err
		}
		if len(s[family]) == keptDefault+3 { // the kept cells and the three new ones
			fmt.Fprintf(out, "\nthe server's GC has removed the %d cells older than D; %d cells remain stored\n",
				len(before[family])-keptDefault, len(s[family]))
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(out, "\nthe server's GC has not run yet: %d cells stored\n", len(s[family]))
			break
		}
		time.Sleep(200 * time.Millisecond) // waiting on the server's own GC
	}
	fmt.Fprintln(out, "\nsafe: no pre-existing cell changed meaning; only the retention D was applied.")
	fmt.Fprintln(out, "On a real table, run `bttl audit` first and set the rule with `bttl apply` (cmd/bttl).")
	return nil
}

func columns(r bigtable.Row) []string {
	var cols []string
	for _, it := range r[family] {
		cols = append(cols, it.Column[len(family)+1:])
	}
	return cols
}
