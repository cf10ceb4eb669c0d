package wireguard_test

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// With WithKeyRedaction the guard's refusal, which goes back to the
// caller and into its logs, shows neither row key nor qualifier: only
// their lengths and keyed tags, the same a ttlclient refusal shows under
// the same hash key.
func ExampleWithKeyRedaction() {
	ctx := context.Background()
	// In production, a secret shared by the processes whose logs are
	// matched (the same for ttlclient.WithKeyRedaction).
	h, client := exSessions(ctx, wireguard.WithKeyRedaction([]byte("log tag key")))
	defer h.Close()
	defer client.Close()

	m := bigtable.NewMutation()
	m.Set("session", "ada@example.com", bigtable.ServerTime, []byte("abc"))
	err := client.Open("sessions").Apply(ctx, "user:ada@example.com", m)
	msg := status.Convert(err).Message()
	fmt.Println(msg[:strings.Index(msg, "]: ")+1]) // before the rule's explanation
	// Output:
	// bttl: wire guard refused MutateRow: rule server-timestamp: table "sessions", family "session", column [redacted 15 bytes hmac:d1d89a3af67b], row [redacted 20 bytes hmac:b81cdfa74712]
}

// exSessions starts an in-process server with table "sessions" (family
// "session", one-second) and returns a client through a guard made with
// opts.
func exSessions(ctx context.Context, opts ...wireguard.Option) (*bttestharness.Harness, *bigtable.Client) {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	schema := strategy.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "sessions", schema); err != nil {
		panic(err)
	}
	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": schema}, opts...)
	if err != nil {
		panic(err)
	}
	return h, dial(ctx, h.Addr, guard.DialOptions()...)
}
