package sessionserver_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/bttest_harness/sessionserver"
)

// A raw client with sessions on writes and reads through sessions on a
// bttest server; the server counts the virtual calls.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// startBackend: sessionserver.New(cfg), then
	// bttest.NewServer("127.0.0.1:0", sess.ServerOptions()...) and a table.
	b, err := startBackend(ctx, sessionserver.Config{SessionLoad: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer b.srv.Close()
	client, err := b.client(ctx, false) // dials b.srv.Addr itself
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	tbl := client.Open("events")
	// The client moves traffic once its first configuration poll is back.
	if err := b.sess.AwaitSessions(ctx, func(ctx context.Context) error {
		_, err := tbl.ReadRow(ctx, "probe")
		return err
	}); err != nil {
		log.Fatal(err)
	}

	before := b.sess.Stats()
	m := bigtable.NewMutation()
	m.Set("a", "x", 1000, []byte("hello"))
	if err := tbl.Apply(ctx, "row", m); err != nil {
		log.Fatal(err)
	}
	row, err := tbl.ReadRow(ctx, "row")
	if err != nil {
		log.Fatal(err)
	}
	after := b.sess.Stats()
	fmt.Printf("%s\n", row["a"][0].Value)
	fmt.Println("virtual MutateRow:", after.VirtualMutateRows-before.VirtualMutateRows,
		"virtual ReadRow:", after.VirtualReadRows-before.VirtualReadRows)
	fmt.Println("classic MutateRow:", after.MutateRow-before.MutateRow,
		"classic ReadRows:", after.ReadRows-before.ReadRows)
	// Output:
	// hello
	// virtual MutateRow: 1 virtual ReadRow: 1
	// classic MutateRow: 0 classic ReadRows: 0
}

// New refuses a session load outside [0, 1].
func ExampleNew() {
	_, err := sessionserver.New(sessionserver.Config{SessionLoad: 2})
	fmt.Println(err)
	// Output:
	// sessionserver: session load 2 not within [0, 1]
}
