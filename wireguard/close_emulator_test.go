package wireguard_test

import (
	"context"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

// Close returned Canceled after a clean run of a client made with the guard's
// options under an emulator (BIGTABLE_EMULATOR_HOST, where ClientOptions is a
// connection of the guard's). Checked on both servers: Close returns nil
// (suspected in issue 35 item 7).
func TestCloseAfterCleanRunUnderEmulator(t *testing.T) {
	bttestharness.OnBothServers(t, bttestharness.Config{NoGC: true}, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		require.NoError(t, h.CreateTable(ctx, "legacy", legacySchema))
		t.Setenv("BIGTABLE_EMULATOR_HOST", h.Addr)
		g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, wireguard.WithReadFilter())
		require.NoError(t, err)
		for _, cfg := range []bigtable.ClientConfig{{}, {MetricsProvider: bigtable.NoopMetricsProvider{}}} {
			c, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, cfg, g.ClientOptions()...)
			require.NoError(t, err)
			tbl := c.Open("legacy")
			m := bigtable.NewMutation()
			m.Set("plain", "c", 1000, []byte("v"))
			require.NoError(t, tbl.Apply(ctx, "r", m))
			_, err = tbl.ReadRow(ctx, "r")
			require.NoError(t, err)
			require.NoError(t, g.Verify(ctx, c, "legacy"))
			require.NoError(t, c.Close(), "a clean run closes cleanly")
		}
	})
}

// The same through ttlclient.NewClient, which makes a data and an admin
// client from the same options: under an emulator both are given the
// guard's one connection.
func TestTTLClientCloseAfterCleanRunUnderEmulator(t *testing.T) {
	bttestharness.OnBothServers(t, bttestharness.Config{NoGC: true}, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		require.NoError(t, h.CreateTable(ctx, "legacy", legacySchema))
		t.Setenv("BIGTABLE_EMULATOR_HOST", h.Addr)
		g, err := wireguard.New(map[string]strategy.Schema{"legacy": legacySchema}, wireguard.WithReadFilter())
		require.NoError(t, err)
		c, err := ttlclient.NewClient(ctx, bttestharness.Project, bttestharness.Instance, g.ClientOptions()...)
		require.NoError(t, err)
		tbl, err := c.Open(ctx, "legacy", legacySchema)
		require.NoError(t, err)
		m := ttlclient.NewMutation()
		m.Set("plain", "c", 1000, []byte("v"))
		require.NoError(t, tbl.Apply(ctx, "r", m))
		_, err = tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		require.NoError(t, c.Close(), "a clean run closes cleanly")
	})
}
