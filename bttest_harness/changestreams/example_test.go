package changestreams_test

import (
	"context"
	"fmt"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"

	"github.com/bttl/bttl/bttest_harness/changestreams"
)

// A server whose tables start with two partitions, one of which then
// splits: streams reading it end with CloseStream naming the children.
func Example() {
	srv, err := changestreams.Start(context.Background(), changestreams.Config{SplitKeys: []string{"m"}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	if err := srv.Split("t", "f"); err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", srv.Partitions("t"))
	// Output: [["" "f"] ["f" "m"] ["m" ""]]
}

// A test making many calls dials the server in memory: the same server as
// Addr, without the loopback network.
func ExampleServer_Dial() {
	ctx := context.Background()
	srv, err := changestreams.Start(ctx, changestreams.Config{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	conn, err := srv.Dial()
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client, err := bigtable.NewClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	defer client.Close()
	admin, err := bigtable.NewAdminClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	defer admin.Close()
	if err := admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", Families: map[string]bigtable.GCPolicy{"f": bigtable.NoGcPolicy()}}); err != nil {
		panic(err)
	}
	m := bigtable.NewMutation()
	m.Set("f", "c", 1000, []byte("v"))
	if err := client.Open("t").Apply(ctx, "r", m); err != nil {
		panic(err)
	}
	fmt.Println(srv.Records("t"), "change recorded")
	// Output: 1 change recorded
}
