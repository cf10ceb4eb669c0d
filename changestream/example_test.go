package changestream_test

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// A consumer of table "events" on the change-stream test server, its
// tokens in memory, printing each change until the first one.
func Example() {
	ctx := context.Background()
	srv, err := changestreams.Start(ctx, changestreams.Config{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	admin, err := bigtable.NewAdminClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	if err := admin.CreateTable(ctx, "events"); err != nil {
		panic(err)
	}
	if err := admin.CreateColumnFamily(ctx, "events", "f"); err != nil {
		panic(err)
	}

	start := time.Now()
	c, err := changestream.NewConsumer(conn, changestreams.DefaultProject, changestreams.DefaultInstance, "events",
		changestream.NewMemoryStore(), changestream.WithStartTime(start))
	if err != nil {
		panic(err)
	}
	client, err := bigtable.NewClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	m := bigtable.NewMutation()
	m.Set("f", "greeting", 1000, []byte("hello"))
	if err := client.Open("events").Apply(ctx, "row-1", m); err != nil {
		panic(err)
	}

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = c.Run(rctx, func(ctx context.Context, ch changestream.Change) error {
		sc := ch.Mutations[0].GetSetCell()
		fmt.Printf("%s %s %s:%s=%s\n", ch.Type, ch.RowKey, sc.GetFamilyName(), sc.GetColumnQualifier(), sc.GetValue())
		cancel()
		return nil
	})
	// Output: USER row-1 f:greeting=hello
}
