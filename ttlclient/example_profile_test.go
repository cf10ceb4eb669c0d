package ttlclient_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// exampleProfiles starts a production-rules server with a multi-cluster
// profile "ha" and a transactional single-cluster profile "txn", and the
// table "sessions"; stop releases both.
func exampleProfiles(schema ttlclient.Schema) (addr string, stop func()) {
	ctx := context.Background()
	s, err := prodserver.Start(ctx, prodserver.Config{Profiles: []prodserver.AppProfile{
		prodserver.MultiCluster("ha"),
		prodserver.SingleCluster("txn", prodserver.DefaultCluster, true),
	}})
	if err != nil {
		log.Fatal(err)
	}
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{Addr: s.Addr})
	if err != nil {
		log.Fatal(err)
	}
	if err := h.CreateTable(ctx, "sessions", schema); err != nil {
		log.Fatal(err)
	}
	return s.Addr, func() { _ = h.Close(); _ = s.Close() }
}

// A client whose reads and writes go through a multi-cluster profile, and
// whose single-row transactions (Expire, time-to-idle refreshes) go
// through a transactional single-cluster profile: on Wrap, the second
// bigtable client is given with WithTransactionalClient.
func ExampleWithTransactionalClient() {
	schema := ttlclient.Schema{"s": strategy.DefaultExpiry(24 * time.Hour)}
	addr, stop := exampleProfiles(schema)
	defer stop()
	ctx := context.Background()
	conn, err := grpc.NewClient(addr, append(ttlclient.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	dial := func(profile string) *bigtable.Client {
		c, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
			bigtable.ClientConfig{AppProfile: profile, MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(conn))
		if err != nil {
			log.Fatal(err)
		}
		return c
	}
	ha, txn := dial("ha"), dial("txn")
	defer ha.Close()
	defer txn.Close()

	client := ttlclient.Wrap(ha, ttlclient.WithTransactionalClient(txn, "txn"), ttlclient.WithoutVerify())
	defer client.Close()
	tbl, err := client.Open(ctx, "sessions", schema)
	if err != nil {
		log.Fatal(err)
	}
	m := ttlclient.NewMutation()
	m.SetTTL("s", "user", time.Hour, []byte("alice"))
	if err := tbl.Apply(ctx, "session#1", m); err != nil {
		log.Fatal(err)
	}
	applied, err := tbl.Expire(ctx, "session#1", "s", "user", 2*time.Hour)
	fmt.Println("expire through txn:", applied, err)
	// Output:
	// expire through txn: true <nil>
}

// A single-row transaction through a profile that does not allow it is a
// *ProfileError: the profile, the call and the fix, with the server's
// gRPC code.
func ExampleProfileError_GRPCStatus() {
	schema := ttlclient.Schema{"s": strategy.DefaultExpiry(24 * time.Hour)}
	addr, stop := exampleProfiles(schema)
	defer stop()
	ctx := context.Background()
	conn, err := grpc.NewClient(addr, append(ttlclient.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client, err := ttlclient.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, ttlclient.ClientConfig{
		ClientConfig: bigtable.ClientConfig{AppProfile: "ha", MetricsProvider: bigtable.NoopMetricsProvider{}},
	}, option.WithGRPCConn(conn))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	tbl, err := client.Open(ctx, "sessions", schema)
	if err != nil {
		log.Fatal(err)
	}
	m := ttlclient.NewMutation()
	m.SetTTL("s", "user", time.Hour, []byte("alice"))
	if err := tbl.Apply(ctx, "session#1", m); err != nil {
		log.Fatal(err)
	}
	_, err = tbl.Expire(ctx, "session#1", "s", "user", 2*time.Hour)
	var pe *ttlclient.ProfileError
	fmt.Println(errors.Is(err, ttlclient.ErrTransactionsNotAllowed), errors.As(err, &pe) && pe.Profile == "ha", pe.Call)
	fmt.Println(pe.GRPCStatus().Code(), status.Code(err))
	// Output:
	// true true CheckAndMutateRow
	// FailedPrecondition FailedPrecondition
}

// Open reads the client's app profiles with the instance admin client it
// is given: a schema with an idle TTL on a client whose transactions would
// go through a multi-cluster profile is refused before any refresh fails.
func ExampleWithInstanceAdminClient() {
	schema := ttlclient.Schema{"s": strategy.OneSecond(strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce))}
	addr, stop := exampleProfiles(schema)
	defer stop()
	ctx := context.Background()
	conn, err := grpc.NewClient(addr, append(ttlclient.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	iac, err := bigtable.NewInstanceAdminClient(ctx, bttestharness.Project, option.WithGRPCConn(conn))
	if err != nil {
		log.Fatal(err)
	}
	defer iac.Close()
	for _, txn := range []string{"", "txn"} {
		client, err := ttlclient.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, ttlclient.ClientConfig{
			ClientConfig:            bigtable.ClientConfig{AppProfile: "ha", MetricsProvider: bigtable.NoopMetricsProvider{}},
			TransactionalAppProfile: txn,
			Options:                 []ttlclient.ClientOption{ttlclient.WithInstanceAdminClient(iac, bttestharness.Instance)},
		}, option.WithGRPCConn(conn))
		if err != nil {
			log.Fatal(err)
		}
		_, err = client.Open(ctx, "sessions", schema)
		fmt.Printf("transactional profile %q: refused %v\n", txn, errors.Is(err, ttlclient.ErrTransactionsNotAllowed))
		_ = client.Close()
	}
	// Output:
	// transactional profile "": refused true
	// transactional profile "txn": refused false
}
