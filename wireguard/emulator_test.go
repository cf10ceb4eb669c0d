package wireguard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// emulatorServers runs f on the in-process server and on cbtemulator with
// BIGTABLE_EMULATOR_HOST naming the server, as a user testing locally
// would have it.
func emulatorServers(t *testing.T, f func(t *testing.T, h *bttestharness.Harness)) {
	for _, server := range serverNames {
		t.Run(server, func(t *testing.T) {
			t.Setenv("BIGTABLE_EMULATOR_HOST", "")
			h := startServer(t, server, bttestharness.Config{})
			require.NoError(t, h.CreateTable(context.Background(), "legacy", legacySchema))
			t.Setenv("BIGTABLE_EMULATOR_HOST", h.Addr)
			f(t, h)
		})
	}
}

// readmeClient is the README's wire-guard snippet.
func readmeClient(t *testing.T, opts ...option.ClientOption) *bigtable.Client {
	t.Helper()
	client, err := bigtable.NewClientWithConfig(context.Background(), bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{DisableSession: true, MetricsProvider: bigtable.NoopMetricsProvider{}}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// requireNothingStored: no row of table "legacy" holds a cell.
func requireNothingStored(t *testing.T, h *bttestharness.Harness) {
	t.Helper()
	n := 0
	require.NoError(t, h.Raw.Open("legacy").ReadRows(context.Background(), bigtable.InfiniteRange(""), func(bigtable.Row) bool { n++; return true }))
	assert.Zero(t, n, "rows stored")
}

// With BIGTABLE_EMULATOR_HOST set, the README's snippet
// (bigtable.NewClientWithConfig(..., guard.ClientOptions()...)) installs the
// guard: a server-timestamp write and a real-timestamp write to a one-second
// family are refused, nothing is stored, and Verify says the guard is active,
// sending nothing (issue 26 item 9).
func TestClientOptionsInstallTheGuardUnderAnEmulator(t *testing.T) {
	emulatorServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, wireguard.WithReadFilter())
		require.NoError(t, err)
		tbl := readmeClient(t, g.ClientOptions()...).Open("legacy")

		serverTime := bigtable.NewMutation()
		serverTime.Set("one", "c", bigtable.ServerTime, []byte("v"))
		err = tbl.Apply(ctx, "r", serverTime)
		assert.Equal(t, codes.FailedPrecondition, status.Code(err), err)
		assert.ErrorContains(t, err, "rule "+wireguard.RuleServerTimestamp)

		realTime := bigtable.NewMutation()
		realTime.Set("one", "c", bigtable.Now(), []byte("v"))
		err = tbl.Apply(ctx, "r", realTime)
		assert.Equal(t, codes.FailedPrecondition, status.Code(err), err)
		assert.ErrorContains(t, err, "rule "+wireguard.RuleExpiredOnArrival)
		requireNothingStored(t, h)

		require.NoError(t, g.Verify(ctx, readmeClient(t, g.ClientOptions()...), "legacy"))

		// Writes the guard accepts still reach the emulator.
		ok := bigtable.NewMutation()
		ok.Set("one", "c", bigtable.Time(time.Now().Add(time.Hour)).TruncateToMilliseconds(), []byte("v"))
		require.NoError(t, tbl.Apply(ctx, "r", ok))
		stored, err := h.Stored(ctx, "legacy", "r")
		require.NoError(t, err)
		assert.Len(t, stored["one"], 1)
	})
}

// Verify tells a guarded client from an unguarded one, on both servers,
// without writing anything: a client with no guard, a client whose own
// connection (option.WithGRPCConn) ignores the guard's dial options, and
// a client carrying another guard are reported inactive (ErrGuardInactive
// in a *VerifyError); a connection dialled with DialOptions is active. A
// table the guard does not guard is refused before any RPC.
func TestVerifyReportsWhetherTheGuardIsInstalled(t *testing.T) {
	emulatorServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema})
		require.NoError(t, err)
		other, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema})
		require.NoError(t, err)

		inactive := func(t *testing.T, err error, reason string) {
			t.Helper()
			assert.ErrorIs(t, err, wireguard.ErrGuardInactive)
			var ve *wireguard.VerifyError
			if assert.ErrorAs(t, err, &ve) {
				assert.Equal(t, "legacy", ve.Table)
				assert.Contains(t, ve.Reason, reason)
			}
			assert.ErrorContains(t, err, "guard.ClientOptions()", "the error says how to install it")
		}
		inactive(t, g.Verify(ctx, readmeClient(t), "legacy"), "reached the server")

		dial := func(opts ...grpc.DialOption) option.ClientOption {
			conn, err := grpc.NewClient(h.Addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			require.NoError(t, err)
			return option.WithGRPCConn(conn)
		}
		// The guard's dial options on a client with its own connection are ignored.
		opts := append(g.ClientOptions(), dial())
		inactive(t, g.Verify(ctx, readmeClient(t, opts...), "legacy"), "reached the server")
		inactive(t, g.Verify(ctx, readmeClient(t, other.ClientOptions()...), "legacy"), "another bttl wire guard")
		require.NoError(t, g.Verify(ctx, readmeClient(t, dial(g.DialOptions()...)), "legacy"))
		requireNothingStored(t, h)

		err = g.Verify(ctx, readmeClient(t, g.ClientOptions()...), "other")
		assert.ErrorIs(t, err, wireguard.ErrNotGuarded)
		assert.False(t, errors.Is(err, wireguard.ErrGuardInactive))
	})
}

// When ClientOptions cannot dial the emulator, the client it makes refuses
// every request (guard-not-installed, saying why) rather than sending it
// unguarded. The bigtable client reads BIGTABLE_EMULATOR_HOST again, so
// the test changes it between the two calls.
func TestClientOptionsRefuseWhenTheGuardCannotBeInstalled(t *testing.T) {
	h := bttestharness.New(t)
	require.NoError(t, h.CreateTable(context.Background(), "legacy", legacySchema))
	g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema})
	require.NoError(t, err)
	t.Setenv("BIGTABLE_EMULATOR_HOST", "bad%zzhost")
	opts := g.ClientOptions()
	t.Setenv("BIGTABLE_EMULATOR_HOST", h.Addr)
	m := bigtable.NewMutation()
	m.Set("plain", "c", bigtable.ServerTime, []byte("v"))
	err = readmeClient(t, opts...).Open("legacy").Apply(context.Background(), "r", m)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), err)
	assert.ErrorContains(t, err, "rule "+wireguard.RuleNotInstalled)
	assert.ErrorContains(t, err, "bad%zzhost")
	requireNothingStored(t, h)
}
