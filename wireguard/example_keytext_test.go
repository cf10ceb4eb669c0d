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
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "sessions", schema); err != nil {
		panic(err)
	}
	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": schema}, wireguard.WithKeyRedaction([]byte("log tag key")))
	if err != nil {
		panic(err)
	}
	client := dial(ctx, h.Addr, guard.DialOptions()...)
	defer client.Close()

	m := bigtable.NewMutation()
	m.Set("session", "ada@example.com", bigtable.ServerTime, []byte("abc"))
	err = client.Open("sessions").Apply(ctx, "user:ada@example.com", m)
	msg := status.Convert(err).Message()
	fmt.Println(msg[:strings.Index(msg, "]: ")+1]) // before the rule's explanation
	// Output:
	// bttl wire guard refused MutateRow: rule server-timestamp: table "sessions", family "session", column [redacted 15 bytes hmac:d1d89a3af67b], row [redacted 20 bytes hmac:b81cdfa74712]
}
