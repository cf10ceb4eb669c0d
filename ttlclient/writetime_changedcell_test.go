package ttlclient_test

import (
	"context"
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
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

// guardedClient is a ttlclient over a connection carrying a wire guard of
// guardSchemas, on h's server.
func guardedClient(t *testing.T, h *bttestharness.Harness, guardSchemas map[string]strategy.Schema, gopts ...wireguard.Option) *ttlclient.Client {
	t.Helper()
	ctx := context.Background()
	g, err := wireguard.New(guardSchemas, append([]wireguard.Option{wireguard.WithClock(h.Clock)}, gopts...)...)
	require.NoError(t, err)
	conn, err := grpc.NewClient(h.Addr, append(g.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	raw, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true}, option.WithGRPCConn(conn))
	require.NoError(t, err)
	c := ttlclient.Wrap(raw, ttlclient.WithClock(h.Clock), ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance))
	t.Cleanup(func() {
		_ = c.Close()
		_ = raw.Close()
		_ = conn.Close()
	})
	return c
}

// A ttlclient whose schema for a guarded table differs from the guard's
// (here a family the guard manages, declared Unmanaged, which Open's GC
// check accepts: an unmanaged family takes any rule) must not get the
// marked pass: its reads would return the guard's expired cells and its
// writes store what the guard refuses. The guard refuses its requests
// instead.
func TestMarkedRequestWithOtherSchemaRefused(t *testing.T) {
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	managed := strategy.Schema{"one": strategy.OneSecond()}
	require.NoError(t, h.CreateTable(ctx, "t", managed))
	expired := bigtable.NewMutation()
	expired.Set("one", "c", bigtable.Time(h.Clock.Now().Add(-time.Hour)).TruncateToMilliseconds(), []byte("expired"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", expired))

	c := guardedClient(t, h, map[string]strategy.Schema{"t": managed}, wireguard.WithReadFilter())
	for name, opts := range map[string][]ttlclient.TableOption{
		"declared unmanaged": nil,
		"unlisted":           {ttlclient.WithUnlistedFamilies(strategy.Unmanaged())},
	} {
		t.Run(name, func(t *testing.T) {
			schema := strategy.Schema{"one": strategy.Unmanaged()}
			if opts != nil {
				schema = strategy.Schema{}
			}
			tbl, err := c.Open(ctx, "t", schema, opts...)
			require.NoError(t, err, "Open's GC check passes: the family is not managed in this schema")

			r, err := tbl.ReadRow(ctx, "r")
			assert.Equal(t, codes.FailedPrecondition, status.Code(err), "read refused, not passed unfiltered: %v", err)
			assert.Empty(t, r["one"], "the guard's expired cell is not returned")
			assert.ErrorContains(t, err, "rule "+wireguard.RuleSchemaMismatch)

			m := ttlclient.NewMutation()
			m.Set("one", "c", 1000, []byte("ancient"))
			err = tbl.Apply(ctx, "w", m)
			assert.Equal(t, codes.FailedPrecondition, status.Code(err), "write refused as the guard refuses it for a plain client: %v", err)
			stored, err := h.Stored(ctx, "t", "w")
			require.NoError(t, err)
			assert.Empty(t, stored["one"], "nothing the guard refuses was stored")
		})
	}
}

// WriteTime of a cell read while live that has expired since (still
// stored: GC has not run) is ErrNoWriteTime, as documented ("no longer
// live"), not the expired cell's write time.
func TestWriteTimeOfACellExpiredSinceItWasRead(t *testing.T) {
	e := newEnvNoGC(t, writeTimeSchema())
	for _, fam := range writeTimeFamilies {
		e.setTTL(t, "r", fam, "c", "v", time.Minute)
	}
	items := map[string]bigtable.ReadItem{}
	for _, fam := range writeTimeFamilies {
		items[fam] = e.readCell(t, "r", fam, "c")
		_, err := e.tbl.WriteTime(e.ctx, items[fam])
		require.NoError(t, err, "%s: live", fam)
	}
	e.h.Clock.Advance(2 * time.Minute)
	for _, fam := range writeTimeFamilies {
		require.NotEmpty(t, e.stored(t, "r"), "the expired cells are still stored")
		wt, err := e.tbl.WriteTime(e.ctx, items[fam])
		assert.ErrorIs(t, err, ttlclient.ErrNoWriteTime, "%s: expired since the read, got write time %s", fam, wt)
	}
}

// WriteTime of a cell since replaced in its millisecond by another value
// (a write with the same timestamp) is not the replacing cell's write
// time: the cell read is gone, and nothing holds its value.
func TestWriteTimeOfACellReplacedInItsMillisecond(t *testing.T) {
	e := newEnvNoGC(t, writeTimeSchema())
	expiry := e.now().TruncateToMilliseconds() + bigtable.Timestamp(time.Hour/time.Microsecond)
	m := ttlclient.NewMutation()
	m.Set("one", "c", expiry, []byte("v1"))
	e.apply(t, "r", m)
	item := e.readCell(t, "r", "one", "c")
	first, err := e.tbl.WriteTime(e.ctx, item)
	require.NoError(t, err)

	e.h.Clock.Advance(10 * time.Second)
	m = ttlclient.NewMutation()
	m.Set("one", "c", expiry, []byte("v2")) // the same expiry instant: the same cell slot
	e.apply(t, "r", m)
	require.Equal(t, "v2", string(e.readCell(t, "r", "one", "c").Value))

	wt, err := e.tbl.WriteTime(e.ctx, item)
	if err == nil {
		assert.True(t, first.Equal(wt), "the write time of v1 (%s), not of v2 that replaced it (%s)", first, wt)
	} else {
		assert.ErrorIs(t, err, ttlclient.ErrNoWriteTime)
	}
}
