package provisionjob_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/gcrule"
	provision "github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/strategy"
)

const day = 24 * time.Hour

// streamServer starts the change-stream server, whose admin side keeps a
// table's change stream configuration (bttest and cbtemulator keep none:
// docs/emulators.md#change-stream-server).
func streamServer(t *testing.T) (*bigtable.AdminClient, *bigtable.Client) {
	t.Helper()
	ctx := context.Background()
	srv, err := changestreams.Start(ctx, changestreams.Config{Project: "p", Instance: "i"})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ac, err := bigtable.NewAdminClient(ctx, "p", "i", option.WithGRPCConn(conn))
	require.NoError(t, err)
	dc, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(conn))
	require.NoError(t, err)
	return ac, dc
}

func streamRetention(t *testing.T, ac *bigtable.AdminClient, table string) time.Duration {
	t.Helper()
	ti, err := ac.TableInfo(context.Background(), table)
	require.NoError(t, err)
	d, _ := ti.ChangeStreamRetention.(time.Duration)
	return d
}

func TestApplyEnablesAndChangesTheChangeStream(t *testing.T) {
	ac, dc := streamServer(t)
	ctx := context.Background()
	schema := strategy.Schema{"s": strategy.OneSecond()}
	var out bytes.Buffer
	p := provision.New(gcrule.NewAdmin(ac, "p", "i"), dc, provision.WithOutput(&out))

	// A new table: created, then its stream enabled.
	plan, err := p.Apply(ctx, "t", schema, provision.WithChangeStream(7*day))
	require.NoError(t, err)
	assert.Equal(t, &provision.StreamChange{To: 7 * day}, plan.Stream)
	assert.Contains(t, out.String(), "  change stream: off -> retention 7d\n")
	assert.Equal(t, 7*day, streamRetention(t, ac, "t"))

	// Matching: nothing to do, and the plan says the stream was checked.
	out.Reset()
	plan, err = p.Apply(ctx, "t", schema, provision.WithChangeStream(7*day))
	require.NoError(t, err)
	assert.True(t, plan.Empty())
	assert.Equal(t, "table \"t\": no change (every family and the change stream match the schema)\n", out.String())

	// Without the option the stream is left as it is.
	plan, err = p.Apply(ctx, "t", schema)
	require.NoError(t, err)
	assert.Nil(t, plan.Stream)
	assert.Equal(t, 7*day, streamRetention(t, ac, "t"))

	// Longer is no loss: made without force.
	require.NoError(t, ac.UpdateTableWithChangeStream(ctx, "t", 2*day))
	out.Reset()
	_, err = p.Apply(ctx, "t", schema, provision.WithChangeStream(3*day))
	require.NoError(t, err)
	assert.Contains(t, out.String(), "change stream: retention 2d -> retention 3d\n")
	assert.Equal(t, 3*day, streamRetention(t, ac, "t"))
}

// Disabling the stream or shortening its retention drops records Bigtable
// kept: refused before any change unless forced, as a rule change that
// deletes cells is.
func TestChangeStreamLossRefusedUnlessForced(t *testing.T) {
	ac, dc := streamServer(t)
	ctx := context.Background()
	schema := strategy.Schema{"s": strategy.OneSecond()}
	admin := gcrule.NewAdmin(ac, "p", "i")
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ChangeStreamRetention: 3 * day}))

	for _, c := range []struct {
		to   time.Duration
		line string
		msg  string
	}{
		{0, "change stream: retention 3d -> off [drops the stream's records]", "drops every record it keeps"},
		{day, "change stream: retention 3d -> retention 1d [drops records older than 1d]", "drops its records older than 1d"},
	} {
		p := provision.New(admin, dc)
		plan, err := p.PlanAndCheck(ctx, "t", schema, provision.WithChangeStream(c.to))
		require.Error(t, err)
		require.NotNil(t, plan)
		assert.Equal(t, c.line, plan.Stream.String())
		assert.True(t, errors.Is(err, provision.ErrChangeStreamLoss))
		assert.True(t, errors.Is(err, provision.ErrUnsafeAdoption))
		var le *provision.AdoptionError
		require.True(t, errors.As(err, &le))
		assert.Equal(t, provision.ErrChangeStreamLoss, le.Err, "the first finding is the one named")
		assert.Equal(t, "t", le.Table)
		assert.False(t, le.Forced)
		assert.Contains(t, err.Error(), c.msg)
		assert.ErrorIs(t, p.CheckAdoptions(ctx, plan), provision.ErrChangeStreamLoss)

		_, err = p.Apply(ctx, "t", schema, provision.WithChangeStream(c.to))
		assert.ErrorIs(t, err, provision.ErrChangeStreamLoss)
		assert.Equal(t, 3*day, streamRetention(t, ac, "t"), "refused: nothing changed")
	}

	var out bytes.Buffer
	forced := provision.New(admin, dc, provision.WithForce(), provision.WithOutput(&out))
	_, err := forced.Apply(ctx, "t", schema, provision.WithChangeStream(0))
	require.NoError(t, err)
	assert.Contains(t, out.String(), "drops every record it keeps; a consumer behind, or restarting from an older token, cannot read them; forced")
	assert.Zero(t, streamRetention(t, ac, "t"))
}

// A retention Bigtable refuses is refused before any RPC (the server is
// never asked: the table does not even exist).
func TestWithChangeStreamOutOfRange(t *testing.T) {
	ac, dc := streamServer(t)
	p := provision.New(gcrule.NewAdmin(ac, "p", "i"), dc)
	for _, d := range []time.Duration{time.Hour, 8 * day, -day} {
		_, err := p.Plan(context.Background(), "t", strategy.Schema{"s": strategy.OneSecond()}, provision.WithChangeStream(d))
		assert.ErrorIs(t, err, provision.ErrInvalidOption, "%s", d)
		assert.ErrorContains(t, err, "Bigtable keeps a change stream between 1d and 7d", "%s", d)
	}
}
