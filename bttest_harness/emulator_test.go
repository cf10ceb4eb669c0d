package bttestharness_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

func TestStartEmulatorWithoutBinary(t *testing.T) {
	t.Setenv("BTTL_CBTEMULATOR", filepath.Join(t.TempDir(), "no-such-cbtemulator"))
	_, err := bttestharness.StartEmulator(context.Background())
	require.ErrorIs(t, err, bttestharness.ErrNoEmulator)
	assert.Contains(t, err.Error(), "no-such-cbtemulator")
}

// A restarted emulator is empty and listens on the address it had, so the
// clients dialled to it carry on.
func TestEmulatorRestartKeepsAddress(t *testing.T) {
	h, e := bttestharness.NewOnEmulator(t, bttestharness.Config{})
	addr := e.Addr
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	require.NotEqual(t, "0", port, "the address names the port the emulator bound")

	ctx := context.Background()
	schema := strategy.Schema{"s": strategy.DefaultExpiry(time.Hour)}
	tbl := h.MustTable(t, "t", schema)
	m := ttlclient.NewMutation()
	m.Set("s", "c", bigtable.ServerTime, []byte("v"))
	require.NoError(t, tbl.Apply(ctx, "r", m))

	require.NoError(t, e.Restart(ctx))
	assert.Equal(t, addr, e.Addr)
	tables, err := h.Admin.Tables(ctx)
	require.NoError(t, err)
	assert.Empty(t, tables, "the data went with the old process")
	tbl = h.MustTable(t, "t", schema)
	require.NoError(t, tbl.Apply(ctx, "r", m))
}

// CPUTime is the emulator process's CPU time: it grows while the emulator
// serves requests, and a killed emulator has none.
func TestEmulatorCPUTime(t *testing.T) {
	h, e := bttestharness.NewOnEmulator(t, bttestharness.Config{})
	ctx := context.Background()
	tbl := h.MustTable(t, "t", strategy.Schema{"s": strategy.DefaultExpiry(time.Hour)})
	before, err := e.CPUTime()
	require.NoError(t, err)
	// Requests until the emulator has used at least two clock ticks.
	var after time.Duration
	for i := 0; i < 100_000 && after-before < 20*time.Millisecond; i++ {
		m := ttlclient.NewMutation()
		m.Set("s", "c", bigtable.ServerTime, []byte("v"))
		require.NoError(t, tbl.Apply(ctx, fmt.Sprintf("r%d", i), m))
		after, err = e.CPUTime()
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, after-before, 20*time.Millisecond)
	e.Kill()
	_, err = e.CPUTime()
	require.ErrorIs(t, err, bttestharness.ErrNoCPUTime)
}

// If another process binds the port while the emulator is down, Restart
// says so instead of leaving the clients talking to that process.
func TestEmulatorRestartOnTakenPort(t *testing.T) {
	e := bttestharness.NewEmulator(t)
	e.Kill()
	l, err := net.Listen("tcp", e.Addr)
	require.NoError(t, err)
	defer l.Close()

	err = e.Restart(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited before listening")
	assert.Contains(t, err.Error(), "address already in use")
}

// With NoGC an expired cell stays stored: bttest's GC passes come every
// 0.5-1.5s of real time once started, so two would have run in the window.
// (That GC does run without NoGC is TestServerGCCollectsOneSecondCell in
// ttlclient.)
func TestNoGCKeepsExpiredCells(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "") // a shared emulator may be collecting already
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"s": strategy.OneSecond()}))
	m := bigtable.NewMutation()
	m.Set("s", "c", 1000, []byte("expired in 1970"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", m))
	assert.Never(t, func() bool {
		r, err := h.Stored(ctx, "t", "r")
		return err != nil || len(r["s"]) != 1
	}, 3200*time.Millisecond, 100*time.Millisecond, "GC collected the cell")
}
