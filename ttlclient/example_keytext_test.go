package ttlclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bttl/bttl/ttlclient"
)

// With WithKeyRedaction a refusal's message shows neither row key nor
// qualifier, only their lengths and keyed tags; the fields keep them.
func ExampleWithKeyRedaction() {
	ctx := context.Background()
	h, _ := exTable(ctx)
	defer h.Close()
	// In production, a secret shared by the processes whose logs are
	// matched (the same for wireguard.WithKeyRedaction).
	tbl, err := h.Table(ctx, "events", exSchema, ttlclient.WithKeyRedaction([]byte("log tag key")))
	if err != nil {
		panic(err)
	}
	m := ttlclient.NewMutation()
	m.SetVersion("doc", "ada@example.com", -1, []byte("v"))
	err = tbl.Apply(ctx, "user:ada@example.com", m)
	msg := err.Error()
	fmt.Println(msg[strings.Index(msg, "(table"):]) // after the sentinel's text
	var ce *ttlclient.CellError
	if errors.As(err, &ce) {
		fmt.Println(ce.Row, ce.Column)
	}
	// Output:
	// (table "events", row [redacted 20 bytes hmac:b81cdfa74712], family "doc", column [redacted 15 bytes hmac:d1d89a3af67b], sequence -1)
	// user:ada@example.com ada@example.com
}
