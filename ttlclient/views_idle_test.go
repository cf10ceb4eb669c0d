package ttlclient_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// A read through a materialized view of a family with an idle TTL queued
// time-to-idle refreshes, which are writes, sent through the read-only view
// (and failing). A view's reads queue none; its source table's reads refresh
// the cells (suspected in issue 35 item 7, and real).
func TestMaterializedViewReadsSendNoIdleRefresh(t *testing.T) {
	rec := newIdleCounter()
	shim := &viewShim{}
	// One refresh worker: jobs finish in the order queued, so once the
	// table's refresh is recorded, the view's (queued first) would be too.
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true, DialOptions: shim.dialOptions(),
		ClientOptions: []ttlclient.ClientOption{ttlclient.WithIdleRefreshConcurrency(1)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	schema := strategy.Schema{famIdleOne: strategy.OneSecond(strategy.WithIdleTTL(idleTTL, strategy.DefaultIdleDebounce))}
	require.NoError(t, h.CreateTable(ctx, "mv", schema)) // what the shim reads for view "mv"
	tbl := h.MustTable(t, "t", schema, ttlclient.WithRecorder(rec))
	due := bigtable.Time(h.Clock.Now().Add(time.Minute)) // 1m left of a 10m idle TTL: due
	for _, name := range []string{"mv", "t"} {
		m := bigtable.NewMutation()
		m.Set(famIdleOne, "c", due, []byte("v"))
		require.NoError(t, h.Raw.Open(name).Apply(ctx, "r", m))
	}
	mv, err := h.Client.OpenMaterializedView("mv", schema, ttlclient.WithRecorder(rec))
	require.NoError(t, err)
	shim.reset()
	_, err = mv.ReadRow(ctx, "r")
	require.NoError(t, err)
	_, err = tbl.ReadRow(ctx, "r")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rec.get(famIdleOne, ttlclient.IdleRefreshed) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the table's cell is refreshed")
	for _, res := range []ttlclient.IdleResult{ttlclient.IdleFailed, ttlclient.IdleConflict, ttlclient.IdleDropped} {
		assert.Zero(t, rec.get(famIdleOne, res), "result %v: only the table's refresh ran", res)
	}
	assert.Len(t, shim.requests("CheckAndMutateRow"), 1, "one refresh sent: the table's")
	r, err := h.Raw.Open("mv").ReadRow(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, due, r[famIdleOne][0].Timestamp, "the view's source is not written through the view")
}
