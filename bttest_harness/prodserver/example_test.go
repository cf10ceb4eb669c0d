package prodserver_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/bttest_harness/prodserver"
)

// manualClock is a clock that moves only when told.
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time { return c.now }

// A replicated instance of two clusters: a write through cluster a is not
// on cluster b until the replicator applies it; a multi-cluster profile
// refuses single-row transactions.
func Example() {
	ctx := context.Background()
	clock := &manualClock{now: time.Now()}
	srv, err := prodserver.Start(ctx, prodserver.Config{
		Clusters: []prodserver.Cluster{{ID: "a"}, {ID: "b"}},
		Profiles: []prodserver.AppProfile{
			prodserver.SingleCluster("writer", "a", true),
			prodserver.SingleCluster("reader", "b", false),
			prodserver.MultiCluster("ha"),
		},
		Lag:   2 * time.Second,
		Clock: clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	open := func(profile string) *bigtable.Table {
		c, err := bigtable.NewClientWithConfig(ctx, "p", "i",
			bigtable.ClientConfig{AppProfile: profile, MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(conn))
		if err != nil {
			log.Fatal(err)
		}
		return c.Open("events")
	}
	// The admin API creates the table on both clusters.
	admin, err := bigtable.NewAdminClient(ctx, "p", "i", option.WithGRPCConn(conn))
	if err != nil {
		log.Fatal(err)
	}
	if err := admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", ColumnFamilies: map[string]bigtable.Family{"f": {}}}); err != nil {
		log.Fatal(err)
	}

	writer, reader := open("writer"), open("reader")
	m := bigtable.NewMutation()
	m.Set("f", "c", bigtable.ServerTime, []byte("v"))
	if err := writer.Apply(ctx, "row", m); err != nil {
		log.Fatal(err)
	}
	row, _ := reader.ReadRow(ctx, "row")
	fmt.Println("on b before the lag:", len(row["f"]))

	clock.now = clock.now.Add(2 * time.Second)
	if err := srv.ReplicateDue(ctx); err != nil {
		log.Fatal(err)
	}
	row, _ = reader.ReadRow(ctx, "row")
	fmt.Println("on b after the lag:", len(row["f"]))

	cond := bigtable.NewCondMutation(bigtable.PassAllFilter(), m, nil)
	err = open("ha").Apply(ctx, "row", cond)
	fmt.Println("transaction through a multi-cluster profile:", status.Code(err), status.Convert(err).Message())
	// Output:
	// on b before the lag: 0
	// on b after the lag: 1
	// transaction through a multi-cluster profile: FailedPrecondition Single-row transactions are not allowed by this app profile
}
