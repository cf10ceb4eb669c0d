package ttlclient_test

import (
	"context"
	"fmt"
	"time"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// exSessions opens table "sessions" whose family "s" keeps a session alive
// for 30 minutes after its last read (time-to-idle).
// exSessions starts a harness whose client has clientOpts and opens a
// sessions table on it.
func exSessions(ctx context.Context, clientOpts ...ttlclient.ClientOption) (*bttestharness.Harness, *ttlclient.Table) {
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{ClientOptions: clientOpts})
	if err != nil {
		panic(err)
	}
	schema := ttlclient.Schema{"s": strategy.OneSecond(strategy.WithIdleTTL(30*time.Minute, strategy.DefaultIdleDebounce))}
	tbl, err := h.Table(ctx, "sessions", schema)
	if err != nil {
		panic(err)
	}
	return h, tbl
}

// exExpiresIn is how long the newest cell of s:user has left, as read
// through the table.
func exExpiresIn(ctx context.Context, h *bttestharness.Harness, tbl *ttlclient.Table) time.Duration {
	r, err := h.Stored(ctx, tbl.Name(), "sid#1")
	if err != nil || len(r["s"]) == 0 {
		return 0
	}
	p, _ := tbl.Policy("s")
	return time.UnixMicro(int64(p.Expiry(r["s"][0].Timestamp))).Sub(h.Clock.Now())
}

func ExampleClient_FlushIdleRefreshes() {
	ctx := context.Background()
	h, tbl := exSessions(ctx)
	defer h.Close()
	m := ttlclient.NewMutation()
	m.SetTTL("s", "user", 30*time.Minute, []byte("ada"))
	if err := tbl.Apply(ctx, "sid#1", m); err != nil {
		panic(err)
	}
	h.Clock.Advance(20 * time.Minute)
	fmt.Println("before the read:", exExpiresIn(ctx, h, tbl))
	if _, err := tbl.ReadRow(ctx, "sid#1"); err != nil { // queues a refresh
		panic(err)
	}
	// The refresh runs off the read's path; wait for it (before Close, say).
	if err := h.Client.FlushIdleRefreshes(ctx); err != nil {
		panic(err)
	}
	fmt.Println("after the read: ", exExpiresIn(ctx, h, tbl))
	// Output:
	// before the read: 10m0s
	// after the read:  30m0s
}

func ExampleWithIdleRefreshConcurrency() {
	ctx := context.Background()
	// At most 2 refreshes at once for the reads of all the client's tables.
	h, tbl := exSessions(ctx, ttlclient.WithIdleRefreshConcurrency(2))
	defer h.Close()
	fmt.Println(tbl.Name())
	// Output: sessions
}

func ExampleWithIdleRefreshQueue() {
	ctx := context.Background()
	// Up to 10,000 refreshes waiting; beyond that they are dropped (and
	// counted, IdleDropped), never waited for.
	h, tbl := exSessions(ctx, ttlclient.WithIdleRefreshQueue(10_000))
	defer h.Close()
	fmt.Println(tbl.Name())
	// Output: sessions
}
