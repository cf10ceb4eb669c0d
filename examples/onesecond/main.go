// Command onesecond shows per-cell expiry on a one-second family: the GC
// rule is max age 1s and each cell's timestamp is the instant it expires, so
// every cell can have its own lifetime (sessions, cache entries, one-time
// codes). It also shows what the guardrails say to writes that would expire
// at once, and what happens to such a write made with the raw client.
//
//	go run ./examples/onesecond
//
// With BIGTABLE_EMULATOR_HOST set it uses that emulator.
package main

import (
	"context"
	"errors"
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
		fmt.Fprintln(os.Stderr, "onesecond:", err)
		os.Exit(1)
	}
}

const (
	table  = "sessions"
	family = "session"
	row    = "user#42"
)

func run(ctx context.Context, out io.Writer) error {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		return err
	}
	defer h.Close()

	schema := ttlclient.Schema{family: strategy.OneSecond()}
	tbl, err := h.Table(ctx, table, schema)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "family %q: %s, GC rule max age %s\n\n", family, schema[family], schema[family].MaxAge())

	t0 := h.Clock.Now()
	m := ttlclient.NewMutation()
	m.SetTTL(family, "otp", 30*time.Second, []byte("417302"))
	m.SetTTL(family, "token", 20*time.Minute, []byte("tok-abc"))
	m.SetTTL(family, "cart", 24*time.Hour, []byte("3 items"))
	// An explicit timestamp on a one-second family is the expiry instant.
	m.Set(family, "banner", bigtable.Time(t0.Add(time.Hour)), []byte("sale ends at t0+1h"))
	if err := tbl.Apply(ctx, row, m); err != nil {
		return err
	}
	stored, err := h.Stored(ctx, table, row)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "stored timestamps are expiry instants:")
	for _, it := range stored[family] {
		fmt.Fprintf(out, "  %-16s expires at t0+%s\n", it.Column, it.Timestamp.Time().Sub(t0))
	}

	fmt.Fprintln(out, "\nwhat a read through bttl returns:")
	for _, at := range []time.Duration{0, 31 * time.Second, 21 * time.Minute, 61 * time.Minute, 25 * time.Hour} {
		h.Clock.Set(t0.Add(at))
		r, err := tbl.ReadRow(ctx, row)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  at t0+%-8s %d live: %v\n", at, len(r[family]), columns(r))
	}
	h.Clock.Set(t0)

	fmt.Fprintln(out, "\nguardrails (refused before any RPC, nothing written):")
	serverTime := ttlclient.NewMutation()
	serverTime.Set(family, "token", bigtable.ServerTime, []byte("oops"))
	err = tbl.Apply(ctx, row, serverTime)
	fmt.Fprintf(out, "  server-timestamp write: refused=%t (ErrServerTimestamp): %v\n",
		errors.Is(err, strategy.ErrServerTimestamp), err)

	realTime := ttlclient.NewMutation()
	realTime.Set(family, "token", bigtable.Time(t0), []byte("oops"))
	err = tbl.Apply(ctx, row, realTime)
	fmt.Fprintf(out, "  real-timestamp write:   refused=%t (ErrAlreadyExpired): %v\n",
		errors.Is(err, strategy.ErrAlreadyExpired), err)

	var cellErr *ttlclient.CellError
	if errors.As(err, &cellErr) {
		fmt.Fprintf(out, "  the error names the cell: table %q, row %q, family %q, column %q\n",
			cellErr.Table, cellErr.Row, cellErr.Family, cellErr.Column)
	}

	// A family with a default TTL accepts writes without one.
	withDefault := strategy.OneSecond(strategy.WithDefaultTTL(15 * time.Minute))
	fmt.Fprintf(out, "  (with strategy.WithDefaultTTL(%s), a write without a TTL gets that TTL instead)\n", withDefault.DefaultTTL())

	// The same server-timestamp write through the raw client is accepted by
	// Bigtable, and its cell is expired on arrival: GC deletes it within
	// about a second.
	raw := bigtable.NewMutation()
	raw.Set(family, "raw-token", bigtable.ServerTime, []byte("lost"))
	if err := tbl.Raw().Apply(ctx, row, raw); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nthe raw client, same server-timestamp write:")
	h.Clock.Set(time.Now()) // the server stamped the cell with its own clock: compare on real time
	fmt.Fprintf(out, "  read through bttl right after the write: raw-token visible=%t (it expired on arrival)\n", hasColumn(mustRead(ctx, tbl, row), "raw-token"))
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	for time.Now().Before(deadline) {
		s, err := h.Stored(ctx, table, row)
		if err != nil {
			return err
		}
		if !hasColumn(s, "raw-token") {
			fmt.Fprintln(out, "  physically stored: collected by the server's GC within seconds: the write is lost")
			return nil
		}
		time.Sleep(200 * time.Millisecond) // waiting on the server's own GC, which runs on real time
	}
	fmt.Fprintln(out, "  physically stored: still there after 20s; the server's GC has not run yet (it will delete it)")
	return nil
}

func mustRead(ctx context.Context, tbl *ttlclient.Table, row string) bigtable.Row {
	r, err := tbl.ReadRow(ctx, row)
	if err != nil {
		return nil
	}
	return r
}

func columns(r bigtable.Row) []string {
	var cols []string
	for _, it := range r[family] {
		cols = append(cols, it.Column[len(family)+1:])
	}
	return cols
}

func hasColumn(r bigtable.Row, col string) bool {
	for _, it := range r[family] {
		if it.Column == family+":"+col {
			return true
		}
	}
	return false
}
