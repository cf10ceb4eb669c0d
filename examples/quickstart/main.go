// Command quickstart shows bttl's three TTL strategies on the embedded
// Bigtable emulator: it writes cells with different TTLs, then prints what a
// read through the library returns and what is physically stored, now and
// after the clock passes the TTLs (before the server's GC has run).
//
//	go run ./examples/quickstart
//
// With BIGTABLE_EMULATOR_HOST set it uses that emulator instead.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

func main() {
	log.SetOutput(io.Discard) // the emulator logs every GC pass
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		return err
	}
	defer h.Close()

	schema := ttlclient.Schema{
		"session": strategy.OneSecond(),                   // timestamp = expiry instant
		"clicks":  strategy.DefaultExpiry(48 * time.Hour), // most cells live 2 days
		"doc":     strategy.Sequence(2),                   // keep the 2 latest versions
		"meta":    strategy.Unmanaged(),                   // no TTL
	}
	tbl, err := h.Table(ctx, "quickstart", schema)
	if err != nil {
		return err
	}

	m := ttlclient.NewMutation()
	m.SetTTL("session", "token", 30*time.Minute, []byte("abc"))
	m.Set("clicks", "home", bigtable.ServerTime, []byte("1 click"))  // default 48h
	m.SetTTL("clicks", "promo", time.Hour, []byte("2 clicks"))       // shorter
	m.SetTTL("clicks", "checkout", 72*time.Hour, []byte("3 clicks")) // longer
	for v := int64(1); v <= 3; v++ {
		m.SetVersion("doc", "body", v, []byte(fmt.Sprintf("revision %d", v)))
	}
	m.Set("meta", "owner", 1000, []byte("ada"))
	if err := tbl.Apply(ctx, "user#1", m); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote row user#1: a session token (TTL 30m), three click counters (TTL 1h, the family's 48h, 72h), three doc revisions (2 kept), an unmanaged owner\n")

	// A write that would expire the moment it lands is refused, not sent:
	// the guardrail at work, which is what the demo expects.
	bad := ttlclient.NewMutation()
	bad.Set("session", "token", bigtable.ServerTime, []byte("oops"))
	if err := tbl.Apply(ctx, "user#1", bad); err != nil {
		fmt.Fprintf(out, "guardrail, as expected: a server-timestamp write to the one-second family is refused before it is sent (%v)\n", err)
	} else {
		return fmt.Errorf("a server-timestamp write to a one-second family was accepted")
	}

	start := h.Clock.Now()
	for _, step := range []time.Duration{0, 2 * time.Hour, 49 * time.Hour, 73 * time.Hour} {
		h.Clock.Set(start.Add(step))
		read, err := tbl.ReadRow(ctx, "user#1")
		if err != nil {
			return err
		}
		stored, err := h.Stored(ctx, tbl.Name(), "user#1")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\nat t0+%s\n", step)
		fmt.Fprintf(out, "  read through bttl (%d cells): %s\n", count(read), describe(read))
		fmt.Fprintf(out, "  physically stored (%d cells): %s\n", count(stored), describe(stored))
	}
	fmt.Fprintln(out, "\nExpired cells stay stored until Bigtable's GC collects them; reads through bttl never return them.")
	return nil
}

func count(r bigtable.Row) int {
	n := 0
	for _, items := range r {
		n += len(items)
	}
	return n
}

func describe(r bigtable.Row) string {
	var parts []string
	for _, items := range r {
		for _, it := range items {
			parts = append(parts, fmt.Sprintf("%s=%q", it.Column, it.Value))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, " ")
}
