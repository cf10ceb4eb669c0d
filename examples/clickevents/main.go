// Command clickevents is the scenario of Bigtable's garbage-collection docs,
// done per cell: click events for ten customers in one table, where most
// customers' events expire after two days, one customer's after one hour and
// another's after three days. One column family, one GC rule (max age 48h),
// the default-expiry strategy.
//
//	go run ./examples/clickevents
//
// It moves the library's clock (not the server's) to t0, t0+1h, t0+2d and
// t0+3d and prints, per customer, how many events a read through bttl
// returns beside how many are still physically stored: expired events stay
// stored until Bigtable's asynchronous GC collects them, but reads never
// return them. With BIGTABLE_EMULATOR_HOST set it uses that emulator.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
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
		fmt.Fprintln(os.Stderr, "clickevents:", err)
		os.Exit(1)
	}
}

const (
	table          = "clickevents"
	family         = "events"
	defaultTTL     = 48 * time.Hour // D: the family's GC rule is max age 48h
	eventsPerCust  = 3
	numCustomers   = 10
	shortCustomer  = "customer-03" // events expire after 1 hour
	longCustomer   = "customer-07" // events expire after 3 days
	shortTTL       = time.Hour
	longTTL        = 72 * time.Hour
	rowKeySeparate = "#"
)

// ttlOf is each customer's retention: the only per-customer code there is.
func ttlOf(customer string) time.Duration {
	switch customer {
	case shortCustomer:
		return shortTTL
	case longCustomer:
		return longTTL
	}
	return defaultTTL
}

func run(ctx context.Context, out io.Writer) error {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		return err
	}
	defer h.Close()

	schema := ttlclient.Schema{family: strategy.DefaultExpiry(defaultTTL)}
	tbl, err := h.Table(ctx, table, schema)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "table %q, family %q: %s, GC rule %s\n", table, family, schema[family], schema[family].GCPolicy())

	// One row per event, keyed customer#event, as the GC docs' example does.
	var keys []string
	var muts []*ttlclient.Mutation
	customers := make([]string, numCustomers)
	for c := range customers {
		customers[c] = fmt.Sprintf("customer-%02d", c)
		for e := 0; e < eventsPerCust; e++ {
			m := ttlclient.NewMutation()
			page := []byte(fmt.Sprintf("/page/%d", e))
			if ttl := ttlOf(customers[c]); ttl != defaultTTL {
				m.SetTTL(family, "url", ttl, page)
			} else {
				m.Set(family, "url", bigtable.ServerTime, page) // the family's default, 48h
			}
			keys = append(keys, fmt.Sprintf("%s%sevent-%d", customers[c], rowKeySeparate, e))
			muts = append(muts, m)
		}
	}
	errs, err := tbl.ApplyBulk(ctx, keys, muts)
	if err != nil {
		return err
	}
	for i, e := range errs {
		if e != nil {
			return fmt.Errorf("row %s: %w", keys[i], e)
		}
	}
	fmt.Fprintf(out, "wrote %d events for %d customers; %s keeps them %s, %s %s, everyone else %s\n",
		len(keys), numCustomers, shortCustomer, short(shortTTL), longCustomer, short(longTTL), short(defaultTTL))

	// Why one GC rule serves three TTLs: the timestamp is now + ttl - D, so
	// max age D removes each cell exactly ttl after it was written.
	t0 := h.Clock.Now()
	for _, c := range []string{shortCustomer, "customer-00", longCustomer} {
		r, err := tbl.Raw().ReadRow(ctx, c+rowKeySeparate+"event-0")
		if err != nil {
			return err
		}
		ts := r[family][0].Timestamp.Time()
		fmt.Fprintf(out, "  %s: stored timestamp t0%+.0fh, collectable at timestamp + %s = t0+%s\n",
			c, ts.Sub(t0).Hours(), short(defaultTTL), short(ts.Add(defaultTTL).Sub(t0)))
	}
	fmt.Fprintln(out)

	steps := []struct {
		label string
		at    time.Duration
	}{{"t0", 0}, {"t0+1h", time.Hour}, {"t0+2d", 48 * time.Hour}, {"t0+3d", 72 * time.Hour}}

	// counts[step][customer] = {read, stored}
	type count struct{ read, stored int }
	counts := make([]map[string]count, len(steps))
	for i, s := range steps {
		h.Clock.Set(t0.Add(s.at))
		read, err := perCustomer(ctx, func(f func(bigtable.Row) bool) error {
			return tbl.ReadRows(ctx, bigtable.InfiniteRange(""), f)
		})
		if err != nil {
			return err
		}
		// The raw client reads without any filter: what is physically there.
		stored, err := perCustomer(ctx, func(f func(bigtable.Row) bool) error {
			return tbl.Raw().ReadRows(ctx, bigtable.InfiniteRange(""), f)
		})
		if err != nil {
			return err
		}
		counts[i] = map[string]count{}
		for _, c := range customers {
			counts[i][c] = count{read[c], stored[c]}
		}
	}

	fmt.Fprintln(out, "events per customer, read through bttl / physically stored:")
	fmt.Fprintf(out, "  %-12s %-4s", "customer", "ttl")
	for _, s := range steps {
		fmt.Fprintf(out, " %7s", s.label)
	}
	fmt.Fprintln(out)
	for _, c := range customers {
		fmt.Fprintf(out, "  %-12s %-4s", c, short(ttlOf(c)))
		for i := range steps {
			fmt.Fprintf(out, " %7s", fmt.Sprintf("%d/%d", counts[i][c].read, counts[i][c].stored))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
	at1h, at2d, at3d := counts[1], counts[2], counts[3]
	fmt.Fprintf(out, "at t0+1h: %s's 1h events: %d readable, %d still stored until GC\n",
		shortCustomer, at1h[shortCustomer].read, at1h[shortCustomer].stored)
	fmt.Fprintf(out, "at t0+2d: %s's 3-day events: %d readable; customer-00's 2-day events: %d readable\n",
		longCustomer, at2d[longCustomer].read, at2d["customer-00"].read)
	fmt.Fprintf(out, "at t0+3d: %s's 3-day events: %d readable\n", longCustomer, at3d[longCustomer].read)
	fmt.Fprintln(out, "\nOnly bttl's clock moved, not the server's: nothing has been collected, yet")
	fmt.Fprintln(out, "reads return exactly what a complete GC would keep. Bigtable's GC removes the")
	fmt.Fprintln(out, "expired cells later (up to a week later in production).")
	return nil
}

// perCustomer counts the cells of each customer's rows that read returns.
func perCustomer(ctx context.Context, read func(func(bigtable.Row) bool) error) (map[string]int, error) {
	n := map[string]int{}
	err := read(func(r bigtable.Row) bool {
		customer, _, _ := strings.Cut(r.Key(), rowKeySeparate)
		for _, items := range r {
			n[customer] += len(items)
		}
		return true
	})
	return n, err
}

// short prints 48h0m0s as 48h.
func short(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimSuffix(d.String(), "0s"), "0m")
}
