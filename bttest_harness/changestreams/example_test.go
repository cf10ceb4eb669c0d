package changestreams_test

import (
	"context"
	"fmt"

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
