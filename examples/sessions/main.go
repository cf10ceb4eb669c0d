// Command sessions keeps web sessions in Bigtable with time-to-idle: a
// session lives 30 minutes after its last use, as in a session store. It
// runs two hours of a manual clock, minute by minute, on the embedded
// emulator:
//
//   - alice uses her session every minute: it never expires, and the
//     debounce (a tenth of the idle TTL) bounds the refresh writes to one
//     per few reads;
//
//   - bob uses his for 20 minutes, then leaves: it expires 30 minutes after
//     its last refresh;
//
//   - carol ticks "remember me": Expire gives her session 30 days, which
//     reads never shorten;
//
//   - dave logs out after 15 minutes: Expire with a 1ms TTL ends his
//     session at once.
//
//     go run ./examples/sessions
//
// With BIGTABLE_EMULATOR_HOST set it uses that emulator instead.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

const (
	family = "s"
	column = "user"
	idle   = 30 * time.Minute
)

func main() {
	log.SetOutput(io.Discard) // the emulator logs every GC pass
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sessions:", err)
		os.Exit(1)
	}
}

type user struct {
	name     string
	activeTo time.Duration // uses the session every minute until then
	remember bool          // "remember me": Expire to 30 days at login
	logout   time.Duration // explicit logout then (0: never)

	reads, refreshes int
	lastTS           int64
	lastUse          time.Duration
	endedAt          time.Duration // when a read first found no session
	expired          bool          // reported
}

func run(ctx context.Context, out io.Writer) error {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	// One-second expiry: a cell's timestamp is its expiry instant. The
	// idle TTL keeps a read session alive; the debounce (default 0.1)
	// refreshes it only once it has less than 27 minutes left.
	schema := ttlclient.Schema{family: strategy.OneSecond(strategy.WithIdleTTL(idle, strategy.DefaultIdleDebounce))}
	tbl, err := h.Table(ctx, "web-sessions", schema)
	if err != nil {
		return err
	}
	users := []*user{
		{name: "alice", activeTo: 2 * time.Hour},
		{name: "bob", activeTo: 20 * time.Minute},
		{name: "carol", activeTo: 2 * time.Hour, remember: true},
		{name: "dave", activeTo: 2 * time.Hour, logout: 15 * time.Minute},
	}
	t0 := h.Clock.Now()
	for _, u := range users {
		m := ttlclient.NewMutation()
		m.SetTTL(family, column, idle, []byte(u.name))
		if err := tbl.Apply(ctx, "sid#"+u.name, m); err != nil {
			return err
		}
		if u.remember {
			applied, err := tbl.Expire(ctx, "sid#"+u.name, family, column, 30*24*time.Hour)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s ticks \"remember me\": Expire(30 days) applied=%t\n", u.name, applied)
		}
	}

	checkpoints := map[time.Duration]bool{10 * time.Minute: true, 20 * time.Minute: true, 30 * time.Minute: true,
		45 * time.Minute: true, 50 * time.Minute: true, time.Hour: true, 2 * time.Hour: true}
	for minute := time.Minute; minute <= 2*time.Hour; minute += time.Minute {
		h.Clock.Set(t0.Add(minute))
		for _, u := range users {
			if u.logout == minute {
				applied, err := tbl.Expire(ctx, "sid#"+u.name, family, column, time.Millisecond)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "at t0+%s %s logs out: Expire(1ms) applied=%t\n", short(minute), u.name, applied)
				continue
			}
			if minute > u.activeTo || u.endedAt != 0 {
				continue
			}
			// The web server reads the session on every request.
			r, err := tbl.ReadRow(ctx, "sid#"+u.name)
			if err != nil {
				return err
			}
			if len(r[family]) == 0 {
				u.endedAt = minute
				continue
			}
			u.reads++
			u.lastUse = minute
		}
		// Refreshes run off the requests' path; let them land before
		// looking at what is stored.
		if err := h.Client.FlushIdleRefreshes(ctx); err != nil {
			return err
		}
		line := fmt.Sprintf("at t0+%-7s", short(minute))
		for _, u := range users {
			left, ts, err := remaining(ctx, h, tbl, u.name)
			if err != nil {
				return err
			}
			if u.lastTS != 0 && ts != u.lastTS && minute <= u.activeTo && minute != u.logout {
				u.refreshes++
			}
			u.lastTS = ts
			state := short(left) + " left"
			if left <= 0 {
				state = "expired"
				if !u.expired {
					u.expired = true
					fmt.Fprintf(out, "at t0+%s %s's session has expired (last used at t0+%s)\n", short(minute), u.name, short(u.lastUse))
				}
			}
			line += fmt.Sprintf("  %s: %-14s", u.name, state)
		}
		if checkpoints[minute] {
			fmt.Fprintln(out, strings.TrimRight(line, " "))
		}
	}
	for _, u := range users {
		fmt.Fprintf(out, "%s: %d reads, %d refresh writes\n", u.name, u.reads, u.refreshes)
	}
	// A session read every minute is refreshed once it has less than
	// 27 minutes left, so every 4th minute: the debounce, a fraction of
	// the idle TTL, bounds the writes.
	debounce := time.Duration(float64(idle) * strategy.DefaultIdleDebounce)
	a := users[0]
	fmt.Fprintf(out, "debounce %s (a tenth of the %s idle TTL): %s's %d minutes of use cost %d refresh writes, at most %d\n",
		short(debounce), short(idle), a.name, a.reads, a.refreshes, int(a.activeTo/debounce)+1)
	return nil
}

// short is d without its trailing zero units: 1h0m0s is 1h0m, 3m0s is 3m.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// remaining is how long the stored session has left at the table's clock
// (tbl.RemainingTTL of the stored cell, read past the library so that
// looking does not count as use), and its timestamp.
func remaining(ctx context.Context, h *bttestharness.Harness, tbl *ttlclient.Table, name string) (time.Duration, int64, error) {
	r, err := h.Stored(ctx, tbl.Name(), "sid#"+name)
	if err != nil || len(r[family]) == 0 {
		return 0, 0, err
	}
	it := r[family][0] // newest first
	left, err := tbl.RemainingTTL(it)
	return left, int64(it.Timestamp), err
}
