package bttestharness_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

var schema = strategy.Schema{
	"session": strategy.OneSecond(),
	"meta":    strategy.Unmanaged(),
}

func cells(r bigtable.Row) string {
	var out []string
	for _, items := range r {
		for _, it := range items {
			out = append(out, it.Column+"="+string(it.Value))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, " ")
}

func ExampleStart() {
	ctx := context.Background()
	// An in-process emulator, or the one BIGTABLE_EMULATOR_HOST names.
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	tbl, err := h.Table(ctx, "events", schema)
	if err != nil {
		panic(err)
	}
	m := ttlclient.NewMutation()
	m.SetTTL("session", "token", time.Minute, []byte("abc"))
	fmt.Println(tbl.Apply(ctx, "user#1", m))
	// Output: <nil>
}

func ExampleStartWithConfig() {
	ctx := context.Background()
	calls := 0
	count := grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/MutateRow") {
			calls++
		}
		return handler(ctx, req)
	})
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{ServerOptions: []grpc.ServerOption{count}})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	tbl, _ := h.Table(ctx, "events", schema)

	bad := ttlclient.NewMutation()
	bad.Set("session", "token", bigtable.ServerTime, []byte("oops")) // refused before any RPC
	good := ttlclient.NewMutation()
	good.Set("meta", "owner", 0, []byte("ada"))
	_ = tbl.Apply(ctx, "user#1", bad)
	_ = tbl.Apply(ctx, "user#1", good)
	fmt.Println("MutateRow calls the server saw:", calls)
	// Output: MutateRow calls the server saw: 1
}

// A test gets a harness that is closed when the test ends.
func ExampleNew() {
	_ = func(t *testing.T) {
		h := bttestharness.New(t)
		tbl := h.MustTable(t, "events", schema)
		_ = tbl
	}
}

func ExampleHarness_MustTable() {
	_ = func(t *testing.T) {
		h := bttestharness.New(t)
		tbl := h.MustTable(t, "events", schema) // fails t on error
		m := ttlclient.NewMutation()
		m.SetTTL("session", "token", time.Minute, []byte("abc"))
		if err := tbl.Apply(context.Background(), "user#1", m); err != nil {
			t.Fatal(err)
		}
	}
}

func ExampleHarness_Close() {
	h, _ := bttestharness.Start(context.Background())
	fmt.Println(h.Close(), h.Close()) // idempotent
	// Output: <nil> <nil>
}

func ExampleHarness_CreateTable() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	// Each family gets exactly the GC rule its policy needs.
	_ = h.CreateTable(ctx, "events", strategy.Schema{
		"clicks": strategy.DefaultExpiry(48 * time.Hour),
		"doc":    strategy.Sequence(3),
	})
	info, _ := h.Admin.TableInfo(ctx, "events")
	sort.Slice(info.FamilyInfos, func(i, j int) bool { return info.FamilyInfos[i].Name < info.FamilyInfos[j].Name })
	for _, f := range info.FamilyInfos {
		fmt.Println(f.Name, f.GCPolicy)
	}
	// Output:
	// clicks age() > 2d
	// doc versions() > 3
}

func ExampleHarness_Table() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	// Table creates the table and opens it through bttl on h.Clock.
	tbl, err := h.Table(ctx, "events", schema)
	fmt.Println(tbl.Name(), err)
	// Output: events <nil>
}

func ExampleHarness_Stored() {
	ctx := context.Background()
	h, _ := bttestharness.Start(ctx)
	defer h.Close()
	tbl, _ := h.Table(ctx, "events", schema)
	m := ttlclient.NewMutation()
	m.SetTTL("session", "token", time.Minute, []byte("abc"))
	_ = tbl.Apply(ctx, "user#1", m)

	h.Clock.Advance(time.Hour)
	read, _ := tbl.ReadRow(ctx, "user#1")
	stored, _ := h.Stored(ctx, "events", "user#1") // expired, not yet collected
	fmt.Println("read:  ", cells(read))
	fmt.Println("stored:", cells(stored))
	// Output:
	// read:   (none)
	// stored: session:token=abc
}

func ExampleNewManualClock() {
	c := bttestharness.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	fmt.Println(c.Now())
	// Output: 2030-01-01 00:00:00 +0000 UTC
}

func ExampleManualClock_Now() {
	c := bttestharness.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	fmt.Println(c.Now().Equal(c.Now())) // it does not move on its own
	// Output: true
}

func ExampleManualClock_Advance() {
	c := bttestharness.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c.Advance(36 * time.Hour)
	fmt.Println(c.Now())
	// Output: 2030-01-02 12:00:00 +0000 UTC
}

func ExampleManualClock_Set() {
	c := bttestharness.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c.Set(time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC))
	fmt.Println(c.Now())
	// Output: 2031-06-01 00:00:00 +0000 UTC
}

// The gcloud emulator is an external program (Debian package
// google-cloud-cli-bigtable-emulator), so the examples below are compiled
// but not run by go test; the package's tests run them where it is
// installed.

func ExampleFindEmulator() {
	path, err := bttestharness.FindEmulator()
	if errors.Is(err, bttestharness.ErrNoEmulator) {
		fmt.Println("install google-cloud-cli-bigtable-emulator")
		return
	}
	fmt.Println("cbtemulator at", path)
}

func ExampleStartEmulator() {
	ctx := context.Background()
	e, err := bttestharness.StartEmulator(ctx)
	if err != nil {
		panic(err)
	}
	defer e.Kill()
	// A harness on the gcloud emulator instead of the in-process one.
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{Addr: e.Addr})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	tbl, _ := h.Table(ctx, "events", schema)
	fmt.Println(tbl.Name())
}

func ExampleNewEmulator() {
	_ = func(t *testing.T) {
		e := bttestharness.NewEmulator(t) // skipped when not installed, killed at the end
		h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: e.Addr})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
	}
}

func ExampleNewOnEmulator() {
	_ = func(t *testing.T) {
		h, _ := bttestharness.NewOnEmulator(t, bttestharness.Config{})
		tbl := h.MustTable(t, "events", schema)
		_ = tbl
	}
}

func ExampleOnBothServers() {
	_ = func(t *testing.T) {
		bttestharness.OnBothServers(t, bttestharness.Config{NoGC: true}, func(t *testing.T, h *bttestharness.Harness) {
			tbl := h.MustTable(t, "events", schema)
			_ = tbl // the same assertions, on bttest and on cbtemulator
		})
	}
}

func ExampleEmulator_Kill() {
	e, err := bttestharness.StartEmulator(context.Background())
	if err != nil {
		panic(err)
	}
	e.Kill() // SIGKILL: the data is lost, as in a crash
	e.Kill() // a no-op
}

// CPUTime measures the server's side of a benchmark: the emulator's CPU
// time before and after the requests.
func ExampleEmulator_CPUTime() {
	_ = func(b *testing.B) {
		h, e := bttestharness.NewOnEmulator(b, bttestharness.Config{})
		tbl := h.MustTable(b, "events", schema)
		before, err := e.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			_, _ = tbl.ReadRow(context.Background(), "user#1")
		}
		after, _ := e.CPUTime()
		b.ReportMetric((after-before).Seconds()/float64(b.N), "server-cpu-s/op")
	}
}

func ExampleEmulator_Restart() {
	_ = func(t *testing.T) {
		ctx := context.Background()
		h, e := bttestharness.NewOnEmulator(t, bttestharness.Config{})
		tbl := h.MustTable(t, "events", schema)
		// A server crash mid-test: same address, empty server.
		if err := e.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.ReadRow(ctx, "user#1"); err != nil {
			t.Log("the table is gone with the old server:", err)
		}
	}
}

// A plain client on its own connection to the harness's server, dialled
// with the wire guard's interceptors: on bttest and on cbtemulator alike,
// its writes pass the guard.
func ExampleHarness_DialDataClient() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	if err := h.CreateTable(ctx, "events", schema); err != nil {
		panic(err)
	}
	guard, err := wireguard.New(map[string]strategy.Schema{"events": schema}, wireguard.WithClock(h.Clock))
	if err != nil {
		panic(err)
	}
	c, err := h.DialDataClient(ctx, guard.DialOptions()...)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// A server timestamp on a one-second family would expire at once.
	m := bigtable.NewMutation()
	m.Set("session", "token", bigtable.ServerTime, []byte("abc"))
	fmt.Println(status.Code(c.Open("events").Apply(ctx, "user#1", m)))
	// Output: FailedPrecondition
}

func ExampleDataClient_Close() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	c, err := h.DialDataClient(ctx)
	if err != nil {
		panic(err)
	}
	// The client and the connection DialDataClient dialled.
	fmt.Println(c.Close())
	// Output: <nil>
}
