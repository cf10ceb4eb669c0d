package wireguard_test

import (
	"context"
	"fmt"
	"os"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// A plain *bigtable.Client with the guard refuses a server-timestamp write
// to a one-second family before it is sent.
func ExampleGuard_ClientOptions() {
	ctx := context.Background()
	// Under BIGTABLE_EMULATOR_HOST the client would ignore dial options.
	if prev, ok := os.LookupEnv("BIGTABLE_EMULATOR_HOST"); ok {
		os.Unsetenv("BIGTABLE_EMULATOR_HOST")
		defer os.Setenv("BIGTABLE_EMULATOR_HOST", prev)
	}
	h, err := bttestharness.Start(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"session": strategy.OneSecond()}
	if err := h.CreateTable(ctx, "sessions", schema); err != nil {
		panic(err)
	}

	guard, err := wireguard.New(map[string]strategy.Schema{"sessions": schema}, wireguard.WithReadFilter())
	if err != nil {
		panic(err)
	}
	opts := append([]option.ClientOption{
		// The emulator; in production, only guard.ClientOptions().
		option.WithEndpoint(h.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}, guard.ClientOptions()...)
	client, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{DisableSession: true, MetricsProvider: bigtable.NoopMetricsProvider{}}, opts...)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	m := bigtable.NewMutation()
	m.Set("session", "token", bigtable.ServerTime, []byte("abc"))
	err = client.Open("sessions").Apply(ctx, "user#1", m)
	fmt.Println(status.Code(err) == codes.FailedPrecondition)
	// Output: true
}
