package wireguard_test

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
	"github.com/bttl/bttl/internal/wiremark"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// A request ttlclient marked (internal/wiremark) passes the guard
// unchanged, on both the unary and the stream path: no read filter, no
// check. An unmarked one on the same connection is filtered and checked,
// and SQL stays refused marked or not.
func TestMarkedRequestsPassUnchanged(t *testing.T) {
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	schema := strategy.Schema{"one": strategy.OneSecond()}
	require.NoError(t, h.CreateTable(ctx, "t", schema))
	expired := bigtable.NewMutation()
	expired.Set("one", "c", bigtable.Time(time.Now().Add(-time.Hour)).TruncateToMilliseconds(), []byte("expired"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", expired))

	g, err := wireguard.New(map[string]strategy.Schema{"t": schema}, wireguard.WithReadFilter())
	require.NoError(t, err)
	conn, err := grpc.NewClient(h.Addr, append(g.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	guarded, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true}, option.WithGRPCConn(conn))
	require.NoError(t, err)
	t.Cleanup(func() { _ = guarded.Close() })
	tbl := guarded.Open("t")
	marked := wiremark.With(ctx, &wiremark.Mark{Table: "t", Schema: schema})

	r, err := tbl.ReadRow(ctx, "r")
	require.NoError(t, err)
	assert.Empty(t, r["one"], "unmarked: the guard's TTL filter hides the expired cell")
	r, err = tbl.ReadRow(marked, "r")
	require.NoError(t, err)
	assert.Len(t, r["one"], 1, "marked: passed without the filter")

	serverTS := bigtable.NewMutation()
	serverTS.Set("one", "c", bigtable.ServerTime, []byte("v"))
	err = tbl.Apply(ctx, "w", serverTS)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "unmarked: checked: %v", err)
	_, err = tbl.ApplyBulk(ctx, []string{"w"}, []*bigtable.Mutation{serverTS})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "unmarked stream: checked: %v", err)

	_, err = guarded.PrepareStatement(marked, "SELECT * FROM t", nil)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "SQL is not a data request ttlclient marks: %v", err)
}
