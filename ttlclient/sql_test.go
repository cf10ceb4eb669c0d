package ttlclient_test

import (
	"context"
	"testing"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Acceptance 5: a query reading a table with managed families is refused
// before any RPC, naming the families at risk, unless WithSQLAllowed is
// given for the call or the client; a query over a table of unmanaged
// families only, or reading no table, reaches the server exactly as
// written. Neither emulator runs SQL (TestEmulatorsServeNoViewsOrSQL): a
// query that reaches one is answered Unimplemented, and the request the
// client sent is checked instead of a result.
func TestPrepareStatementRefusesManagedTables(t *testing.T) {
	onBothServers(t, true, func(t *testing.T, h *bttestharness.Harness, shim *viewShim) {
		ctx := context.Background()
		_, err := h.Table(ctx, "t", mixedSchema())
		require.NoError(t, err)
		_, err = h.Table(ctx, "plain", strategy.Schema{famPlain: strategy.Unmanaged()})
		require.NoError(t, err)
		mvSchema := strategy.Schema{famDef: strategy.DefaultExpiry(defaultD)}
		_, err = h.Client.OpenMaterializedView("mv", mvSchema)
		require.NoError(t, err)

		// reached: the query went to the server, as written, and only it.
		reached := func(t *testing.T, query string, err error) {
			t.Helper()
			assert.Equal(t, codes.Unimplemented, status.Code(err), "the emulator's answer: %v", err)
			sent := shim.requests("PrepareQuery")
			require.Len(t, sent, 1)
			pq := sent[0].(*btpb.PrepareQueryRequest)
			assert.Equal(t, query, pq.Query)
			assert.Equal(t, instanceName, pq.InstanceName)
			shim.reset()
		}
		refused := func(t *testing.T, err error, sentinel error, table string, families []string) {
			t.Helper()
			assert.ErrorIs(t, err, sentinel)
			var se *ttlclient.SQLError
			if assert.ErrorAs(t, err, &se) {
				assert.Equal(t, table, se.Table)
				assert.Equal(t, families, se.Families)
			}
			assert.Zero(t, shim.count(), "nothing sent")
			shim.reset()
		}
		c := h.Client
		shim.reset()
		for _, q := range []string{
			"SELECT * FROM t",
			"SELECT _key, plain FROM t WHERE _key = @k",
			"SELECT * FROM `t`(with_history => TRUE, after_or_equal => @since) AS x",
		} {
			_, err = c.PrepareStatement(ctx, q, map[string]bigtable.SQLType{"k": bigtable.BytesSQLType{}})
			refused(t, err, ttlclient.ErrUnfilteredSQL, "t", []string{famDef, famOne, famSeq})
		}
		_, err = c.PrepareStatement(ctx, "SELECT * FROM mv", nil)
		refused(t, err, ttlclient.ErrUnfilteredSQL, "mv", []string{famDef})
		_, err = c.PrepareStatement(ctx, "SELECT * FROM other", nil)
		refused(t, err, ttlclient.ErrSQLUnknownTable, "other", nil)
		_, err = c.PrepareStatement(ctx, "SELECT * FROM plain JOIN t ON TRUE", nil)
		refused(t, err, ttlclient.ErrSQLUnknownTable, "", nil)
		assert.Contains(t, err.Error(), "WithSQLAllowed")
		// Subqueries starting with FROM (pipe syntax) read t though the
		// query's FROM clause names plain (issue 26 item 5).
		for _, q := range []string{
			"SELECT * FROM plain WHERE EXISTS(FROM t)",
			"SELECT * FROM plain ORDER BY (FROM t)",
			"SELECT ARRAY(FROM t) FROM plain",
		} {
			_, err = c.PrepareStatement(ctx, q, nil)
			refused(t, err, ttlclient.ErrSQLUnknownTable, "", nil)
			assert.ErrorContains(t, err, "a FROM it cannot place (FROM t)", q)
		}

		// Untouched: unmanaged families only, or no table at all.
		const plainQuery = "SELECT _key, plain['c'] FROM plain WHERE _key = @k"
		_, err = c.PrepareStatement(ctx, plainQuery, map[string]bigtable.SQLType{"k": bigtable.BytesSQLType{}})
		reached(t, plainQuery, err)
		_, err = c.PrepareStatement(ctx, "SELECT 1", nil)
		reached(t, "SELECT 1", err)

		// The opt-outs: for one call, or for every call of a client.
		_, err = c.PrepareStatement(ctx, "SELECT * FROM t", nil, ttlclient.WithSQLAllowed())
		reached(t, "SELECT * FROM t", err)
		_, err = c.PrepareStatement(ctx, "SELECT * FROM t", nil)
		refused(t, err, ttlclient.ErrUnfilteredSQL, "t", []string{famDef, famOne, famSeq})
		allowing := ttlclient.Wrap(h.Raw, ttlclient.WithSQLAllowed())
		_, err = allowing.PrepareStatement(ctx, "SELECT * FROM other", nil)
		reached(t, "SELECT * FROM other", err)
	})
}
