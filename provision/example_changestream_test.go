package provision_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/provision"
	"github.com/bttl/bttl/strategy"
)

// WithChangeStream enables the table's change stream with a retention
// (what a schema file's change_stream_retention gives), or disables it
// with 0; disabling (or shortening) is refused unless forced, since
// Bigtable then drops the records it kept. The example runs on the
// change-stream test server, whose admin side keeps the setting (the
// emulators keep none).
func ExampleWithChangeStream() {
	ctx := context.Background()
	srv, err := changestreams.Start(ctx, changestreams.Config{Project: "p", Instance: "i"})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	ac, err := bigtable.NewAdminClient(ctx, "p", "i", option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	dc, err := bigtable.NewClient(ctx, "p", "i", option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	p := provision.New(gcrule.NewAdmin(ac, "p", "i"), dc, provision.WithOutput(os.Stdout))
	schema := strategy.Schema{"session": strategy.OneSecond()}

	if _, err := p.Apply(ctx, "sessions", schema, provision.WithChangeStream(7*24*time.Hour)); err != nil {
		panic(err)
	}
	_, err = p.Apply(ctx, "sessions", schema, provision.WithChangeStream(0))
	fmt.Println(errors.Is(err, provision.ErrChangeStreamLoss))
	// Output:
	// table "sessions":
	//   create table "sessions"
	//   create family "session" with max_age=1s (one-second)
	//   change stream: off -> retention 7d
	// true
}
