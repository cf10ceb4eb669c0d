package expiry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/strategy"
)

// exSchema: a session cell expires at its timestamp.
var exSchema = strategy.Schema{"session": strategy.OneSecond()}

// exEnv is a change-stream test server with table "events" on exSchema,
// the index table "expiry" and the stream's store table "state".
type exEnv struct {
	srv    *changestreams.Server
	conn   *grpc.ClientConn
	client *bigtable.Client
	clock  *manualClock
	store  changestream.Store
}

func exStart() *exEnv {
	ctx := context.Background()
	clk := &manualClock{t: t0}
	srv, err := changestreams.Start(ctx, changestreams.Config{Clock: clk})
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	admin, err := bigtable.NewAdminClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	// (Not closed: it would close the shared connection.)
	_ = admin
	for id, fams := range map[string]map[string]bigtable.GCPolicy{
		"events": {"session": exSchema["session"].GCPolicy()},
		"expiry": {expiry.TimerFamily: bigtable.NoGcPolicy(), expiry.LeaseFamily: bigtable.NoGcPolicy(), expiry.ExpiredFamily: bigtable.NoGcPolicy()},
		"state":  {"cs": bigtable.NoGcPolicy()},
	} {
		if err := admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: id, Families: fams}); err != nil {
			panic(err)
		}
	}
	client, err := bigtable.NewClientWithConfig(ctx, changestreams.DefaultProject, changestreams.DefaultInstance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(conn))
	if err != nil {
		panic(err)
	}
	return &exEnv{srv: srv, conn: conn, client: client, clock: clk,
		store: changestream.NewBigtableStore(client.Open("state"), "cs", "events#")}
}

func (e *exEnv) Close() {
	e.client.Close()
	e.conn.Close()
	e.srv.Close()
}

// write stores a session cell expiring after ttl and returns the change
// the stream gives for it.
func (e *exEnv) write(row string, ttl time.Duration) changestream.Change {
	ts, err := exSchema["session"].WriteTimestamp(e.clock.Now(), ttl)
	if err != nil {
		panic(err)
	}
	m := bigtable.NewMutation()
	m.Set("session", "token", ts, []byte("abc"))
	if err := e.client.Open("events").Apply(context.Background(), row, m); err != nil {
		panic(err)
	}
	return changestream.Change{Table: "events", Type: changestream.User, RowKey: []byte(row), CommitTime: e.clock.Now(),
		Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
			FamilyName: "session", ColumnQualifier: []byte("token"), TimestampMicros: int64(ts), Value: []byte("abc")}}}}}
}

func printEvent(ctx context.Context, e expiry.Event) error {
	fmt.Printf("%s %s:%s expired at %s, announced %v later\n", e.Key, e.Family, e.Column, e.Expiry.UTC().Format(time.RFC3339), e.Delay)
	return nil
}

// A consumer of the table's change stream feeds the notifier, which
// announces the session when its instant passes.
func Example() {
	ctx := context.Background()
	env := exStart()
	defer env.Close()
	n, err := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent, expiry.WithClock(env.clock))
	if err != nil {
		panic(err)
	}
	c, err := changestream.NewConsumer(env.conn, changestreams.DefaultProject, changestreams.DefaultInstance, "events", env.store,
		changestream.WithClock(env.clock), changestream.WithStartTime(t0), changestream.WithPollInterval(5*time.Millisecond))
	if err != nil {
		panic(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	scheduled := make(chan struct{}, 1)
	go c.Run(rctx, func(ctx context.Context, ch changestream.Change) error {
		err := n.Handle(ctx, ch)
		scheduled <- struct{}{}
		return err
	})
	env.write("user-1", 30*time.Second)
	<-scheduled
	env.clock.Advance(31 * time.Second)
	if _, err := n.Poll(ctx); err != nil {
		panic(err)
	}
	// Output: "user-1" session:token expired at 2026-11-28T12:00:30Z, announced 1s later
}

func ExampleNew() {
	env := exStart()
	defer env.Close()
	_, err := expiry.New(env.client, "events", exSchema, "expiry", env.store, nil)
	fmt.Println(errors.Is(err, expiry.ErrInvalidOption))
	// Output: true
}

// Handle is the consumer's handler; here it is given a change by hand.
func ExampleNotifier_Handle() {
	ctx := context.Background()
	env := exStart()
	defer env.Close()
	n, _ := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent, expiry.WithClock(env.clock))
	if err := n.Handle(ctx, env.write("user-1", time.Minute)); err != nil {
		panic(err)
	}
	env.clock.Advance(time.Minute)
	_, _ = n.Poll(ctx)
	// Output: "user-1" session:token expired at 2026-11-28T12:01:00Z, announced 0s later
}

// A cell moved before its instant (Expire, an idle refresh) is not
// announced at its old instant.
func ExampleNotifier_Poll() {
	ctx := context.Background()
	env := exStart()
	defer env.Close()
	n, _ := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent, expiry.WithClock(env.clock))
	_ = n.Handle(ctx, env.write("user-1", 10*time.Second))
	_ = n.Handle(ctx, env.write("user-2", 10*time.Second))
	m := bigtable.NewMutation()
	m.DeleteRow() // user-2 logged out
	_ = env.client.Open("events").Apply(ctx, "user-2", m)
	env.clock.Advance(11 * time.Second)
	k, err := n.Poll(ctx)
	fmt.Println(k, err)
	// Output:
	// "user-1" session:token expired at 2026-11-28T12:00:10Z, announced 1s later
	// 1 <nil>
}

func ExampleNotifier_Run() {
	ctx, cancel := context.WithCancel(context.Background())
	env := exStart()
	defer env.Close()
	n, _ := expiry.New(env.client, "events", exSchema, "expiry", env.store, func(ctx context.Context, e expiry.Event) error {
		fmt.Printf("%s expired\n", e.RowKey)
		cancel() // one is enough here
		return nil
	}, expiry.WithClock(env.clock), expiry.WithPollInterval(10*time.Millisecond))
	_ = n.Handle(ctx, env.write("user-1", time.Second))
	env.clock.Advance(time.Second)
	fmt.Println(n.Run(ctx))
	// Output:
	// user-1 expired
	// context canceled
}

func ExampleWithKeyRedaction() {
	ctx := context.Background()
	env := exStart()
	defer env.Close()
	n, _ := expiry.New(env.client, "events", exSchema, "expiry", env.store, func(ctx context.Context, e expiry.Event) error {
		fmt.Println(e.RowKey == nil, strings.HasPrefix(e.Key, "[redacted 6 bytes hmac:"))
		return nil
	}, expiry.WithClock(env.clock), expiry.WithKeyRedaction([]byte("secret shared by the fleet")))
	_ = n.Handle(ctx, env.write("user-1", time.Second))
	env.clock.Advance(time.Second)
	_, _ = n.Poll(ctx)
	// Output: true true
}

// The index rows: one per bucket, under the prefix.
func ExampleWithIndexPrefix() {
	ctx := context.Background()
	env := exStart()
	defer env.Close()
	n, _ := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent,
		expiry.WithClock(env.clock), expiry.WithIndexPrefix("sessions/"), expiry.WithBucket(time.Minute))
	_ = n.Handle(ctx, env.write("user-1", 90*time.Second))
	_ = env.client.Open("expiry").ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		fmt.Println(r.Key())
		return true
	})
	// Output: sessions/0000000001c8b671
}

func ExampleWithBucket() {
	env := exStart()
	defer env.Close()
	_, err := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent, expiry.WithBucket(time.Microsecond))
	fmt.Println(errors.Is(err, expiry.ErrInvalidOption))
	// Output: true
}

func ExampleWithPollInterval() {
	env := exStart()
	defer env.Close()
	_, err := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent,
		expiry.WithPollInterval(time.Minute), expiry.WithLease(30*time.Second))
	fmt.Println(err)
	// Output: bttl: expiry: invalid option: poll interval 1m0s must be shorter than the lease 30s
}

// A killed worker's buckets are taken over once its lease lapses.
func ExampleWithLease() {
	env := exStart()
	defer env.Close()
	_, err := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent, expiry.WithLease(10*time.Second))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithRPCTimeout() {
	env := exStart()
	defer env.Close()
	_, err := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent, expiry.WithRPCTimeout(5*time.Second))
	fmt.Println(err)
	// Output: <nil>
}

func ExampleWithClock() {
	ctx := context.Background()
	env := exStart()
	defer env.Close()
	n, _ := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent, expiry.WithClock(env.clock))
	_ = n.Handle(ctx, env.write("user-1", time.Hour))
	k, _ := n.Poll(ctx) // not due by the clock
	fmt.Println(k)
	// Output: 0
}

func ExampleWithWorker() {
	env := exStart()
	defer env.Close()
	_, err := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent, expiry.WithWorker(2, 2))
	fmt.Println(err)
	// Output: bttl: expiry: invalid option: worker 2 of 2
}

func ExampleWithOwner() {
	env := exStart()
	defer env.Close()
	// A pod's name: a restarted pod resumes its buckets at once.
	_, err := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent, expiry.WithOwner("expiry-7f9c"))
	fmt.Println(err)
	// Output: <nil>
}

// The stock gauge: a cell announced is counted until its GC record (or a
// recheck finding it deleted) takes it out.
func ExampleWithRegisterer() {
	ctx := context.Background()
	env := exStart()
	defer env.Close()
	reg := prometheus.NewRegistry()
	n, _ := expiry.New(env.client, "events", exSchema, "expiry", env.store, func(context.Context, expiry.Event) error { return nil },
		expiry.WithClock(env.clock), expiry.WithRegisterer(reg))
	_ = n.Handle(ctx, env.write("user-1", 30*time.Second))
	env.clock.Advance(31 * time.Second)
	_, _ = n.Poll(ctx)
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			fmt.Println(mf.GetName(), m.GetLabel()[0].GetValue(), m.GetLabel()[1].GetValue(), m.GetGauge().GetValue())
		}
	}
	// Output: bttl_expired_not_collected_cells session events 1
}

func ExampleWithRecheck() {
	env := exStart()
	defer env.Close()
	_, err := expiry.New(env.client, "events", exSchema, "expiry", env.store, printEvent, expiry.WithRecheck(0))
	fmt.Println(err)
	// Output: bttl: expiry: invalid option: the recheck interval must be positive
}
