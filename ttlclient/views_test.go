package ttlclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

const instanceName = "projects/" + bttestharness.Project + "/instances/" + bttestharness.Instance

// onBothServers runs f on bttest and on cbtemulator, each with GC off and,
// with useShim, a viewShim on the client's connection (f gets nil without).
func onBothServers(t *testing.T, useShim bool, f func(t *testing.T, h *bttestharness.Harness, shim *viewShim)) {
	config := func() (bttestharness.Config, *viewShim) {
		if !useShim {
			return bttestharness.Config{NoGC: true}, nil
		}
		shim := &viewShim{}
		return bttestharness.Config{NoGC: true, DialOptions: shim.dialOptions()}, shim
	}
	t.Run("bttest", func(t *testing.T) {
		cfg, shim := config()
		h, err := bttestharness.StartWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Close() })
		f(t, h, shim)
	})
	t.Run("cbtemulator", func(t *testing.T) {
		cfg, shim := config()
		h, _ := bttestharness.NewOnEmulator(t, cfg)
		f(t, h, shim)
	})
}

// Neither emulator serves views or SQL: what the view and SQL tests stand
// in for. If one starts to, this fails, and those tests can drop the shim.
func TestEmulatorsServeNoViewsOrSQL(t *testing.T) {
	onBothServers(t, false, func(t *testing.T, h *bttestharness.Harness, _ *viewShim) {
		ctx := context.Background()
		require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"cf": strategy.Unmanaged()}))
		err := h.Admin.CreateAuthorizedView(ctx, &bigtable.AuthorizedViewConf{TableID: "t", AuthorizedViewID: "v",
			AuthorizedView: &bigtable.SubsetViewConf{FamilySubsets: map[string]bigtable.FamilySubset{"cf": {QualifierPrefixes: [][]byte{{}}}}}})
		assert.Equal(t, codes.Unimplemented, status.Code(err), "CreateAuthorizedView: %v", err)

		// Without the shim, a request naming a view has an empty table_name,
		// the only name the emulators read.
		m := bigtable.NewMutation()
		m.Set("cf", "c", 1000, []byte("v"))
		err = h.Raw.OpenAuthorizedView("t", "v").Apply(ctx, "r", m)
		assert.Equal(t, codes.NotFound, status.Code(err), "write through a view: %v", err)
		_, err = h.Raw.OpenMaterializedView("mv").ReadRow(ctx, "r")
		assert.Equal(t, codes.NotFound, status.Code(err), "read of a materialized view: %v", err)
		_, err = h.Raw.PrepareStatement(ctx, "SELECT _key FROM t", nil)
		assert.Equal(t, codes.Unimplemented, status.Code(err), "PrepareStatement: %v", err)
	})
}

// Acceptance 4: writes through a bttl authorized view are rewritten and
// guarded as the table's, nothing refused is sent, every request names
// the view, and reads through it hide expired cells the raw view returns.
func TestAuthorizedViewIsGuardedAndFiltered(t *testing.T) {
	onBothServers(t, true, func(t *testing.T, h *bttestharness.Harness, shim *viewShim) {
		ctx := context.Background()
		const viewName = instanceName + "/tables/t/authorizedViews/v"
		require.NoError(t, h.CreateTable(ctx, "t", mixedSchema()))
		view, err := h.Client.OpenAuthorizedView(ctx, "t", "v", mixedSchema())
		require.NoError(t, err)
		assert.Nil(t, view.Raw(), "no *bigtable.Table for a view")
		assert.Equal(t, "t", view.Name())
		now := h.Clock.Now()

		// The bttl API: the library assigns the default TTL's timestamp.
		shim.reset()
		m := ttlclient.NewMutation()
		m.Set(famDef, "d", bigtable.ServerTime, []byte("def"))
		m.SetTTL(famOne, "live", time.Minute, []byte("live"))
		require.NoError(t, view.Apply(ctx, "r", m))
		sent := shim.requests("MutateRow")
		require.Len(t, sent, 1)
		mr := sent[0].(*btpb.MutateRowRequest)
		assert.Equal(t, viewName, mr.AuthorizedViewName)
		assert.Empty(t, mr.TableName)
		require.Len(t, mr.Mutations, 2)
		assert.Equal(t, now.UnixMicro(), mr.Mutations[0].GetSetCell().TimestampMicros, "default expiry: written at now")
		assert.Equal(t, now.Add(time.Minute).UnixMicro(), mr.Mutations[1].GetSetCell().TimestampMicros, "one-second: the expiry instant")

		// The bigtable.TableAPI form, with the client's own mutations: the
		// guardrails refuse before any RPC.
		api := view.API()
		shim.reset()
		bad := bigtable.NewMutation()
		bad.Set(famOne, "c", bigtable.ServerTime, []byte("x"))
		assert.ErrorIs(t, api.Apply(ctx, "bad", bad), strategy.ErrServerTimestamp)
		var ce *ttlclient.CellError
		require.ErrorAs(t, api.Apply(ctx, "bad", bad), &ce)
		assert.Equal(t, "t", ce.Table)
		rmw := bigtable.NewReadModifyWrite()
		rmw.Increment(famSeq, "n", 1)
		_, err = api.ApplyReadModifyWrite(ctx, "bad", rmw)
		assert.ErrorIs(t, err, ttlclient.ErrServerAssignedTimestamp)
		assert.Zero(t, shim.count(), "nothing refused is sent")

		good := bigtable.NewMutation()
		good.Set(famDef, "bulk", bigtable.ServerTime, []byte("b"))
		errs, err := api.ApplyBulk(ctx, []string{"bad", "r"}, []*bigtable.Mutation{bad, good})
		require.NoError(t, err)
		require.Len(t, errs, 2)
		assert.ErrorIs(t, errs[0], strategy.ErrServerTimestamp)
		assert.NoError(t, errs[1])
		sent = shim.requests("MutateRows")
		require.Len(t, sent, 1)
		bulk := sent[0].(*btpb.MutateRowsRequest)
		assert.Equal(t, viewName, bulk.AuthorizedViewName)
		require.Len(t, bulk.Entries, 1, "only the good row is sent")
		assert.Equal(t, "r", string(bulk.Entries[0].RowKey))
		stored, err := h.Stored(ctx, "t", "bad")
		require.NoError(t, err)
		assert.Empty(t, stored, "nothing of the refused row is stored")

		// A conditional mutation's predicate gets the TTL filter first.
		shim.reset()
		cond := bigtable.NewCondMutation(bigtable.ColumnFilter("^live$"), nil, good)
		var matched bool
		require.NoError(t, api.Apply(ctx, "r", cond, bigtable.GetCondMutationResult(&matched)))
		assert.True(t, matched)
		sent = shim.requests("CheckAndMutateRow")
		require.Len(t, sent, 1)
		cam := sent[0].(*btpb.CheckAndMutateRowRequest)
		assert.Equal(t, viewName, cam.AuthorizedViewName)
		require.Len(t, cam.PredicateFilter.GetChain().GetFilters(), 2, "chain(TTL filter, caller's)")

		// An expired cell, written past the library to the table.
		old := bigtable.NewMutation()
		old.Set(famOne, "old", bigtable.Time(now.Add(-time.Second)), []byte("old"))
		require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", old))

		shim.reset()
		r, err := view.ReadRow(ctx, "r")
		require.NoError(t, err)
		assert.Equal(t, []string{"def:bulk@" + itoa(now.UnixMicro()) + "=b", "def:d@" + itoa(now.UnixMicro()) + "=def",
			"one:live@" + itoa(now.Add(time.Minute).UnixMicro()) + "=live"}, cells(r))
		rawView := h.Raw.OpenAuthorizedView("t", "v")
		r, err = rawView.ReadRow(ctx, "r")
		require.NoError(t, err)
		assert.Contains(t, cells(r), "one:old@"+itoa(now.Add(-time.Second).UnixMicro())+"=old", "the raw view returns the expired cell")
		sent = shim.requests("ReadRows")
		require.Len(t, sent, 2)
		for i, req := range sent {
			rr := req.(*btpb.ReadRowsRequest)
			assert.Equal(t, viewName, rr.AuthorizedViewName, "read %d", i)
			assert.Empty(t, rr.TableName)
		}
		assert.NotNil(t, sent[0].(*btpb.ReadRowsRequest).Filter, "bttl's read carries the TTL filter")
		assert.Nil(t, sent[1].(*btpb.ReadRowsRequest).Filter, "the raw view's does not")

		// D later the default-expiry cells have expired too; ReadRows and the
		// TableAPI form filter the same way.
		h.Clock.Advance(defaultD)
		var rows []bigtable.Row
		require.NoError(t, api.ReadRows(ctx, bigtable.RowList{"r"}, func(r bigtable.Row) bool {
			rows = append(rows, r)
			return true
		}))
		assert.Empty(t, rows, "every cell of r has expired")
		r, err = rawView.ReadRow(ctx, "r")
		require.NoError(t, err)
		assert.Len(t, cells(r), 4, "the raw view still returns them all")

		shim.reset()
		_, err = api.SampleRowKeys(ctx)
		require.NoError(t, err)
		sent = shim.requests("SampleRowKeys")
		require.Len(t, sent, 1)
		assert.Equal(t, viewName, sent[0].(*btpb.SampleRowKeysRequest).AuthorizedViewName)
	})
}

// OpenAuthorizedView verifies the table's GC rules, as Open does.
func TestOpenAuthorizedViewVerifiesTheTable(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{famOne: strategy.OneSecond()}))
	_, err := h.Client.OpenAuthorizedView(ctx, "t", "v", strategy.Schema{famOne: strategy.DefaultExpiry(time.Hour)})
	assert.ErrorIs(t, err, gcrule.ErrMismatch)
	_, err = h.Client.OpenAuthorizedView(ctx, "t", "v", strategy.Schema{famOne: strategy.Sequence(0)})
	assert.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	_, err = h.Client.OpenAuthorizedView(ctx, "t", "v", strategy.Schema{famOne: strategy.OneSecond()})
	assert.NoError(t, err)
}

// A materialized view is read-only: every write through it is refused
// before any RPC. Its reads name the view and hide the expired cells of
// its managed families, which the raw view returns; an aggregate family,
// declared unmanaged, is read as it is.
func TestMaterializedViewIsReadOnlyAndFiltered(t *testing.T) {
	onBothServers(t, true, func(t *testing.T, h *bttestharness.Harness, shim *viewShim) {
		ctx := context.Background()
		const viewName = instanceName + "/materializedViews/mv"
		schema := strategy.Schema{famOne: strategy.OneSecond(), "counts": strategy.Unmanaged()}
		// The table the shim reads for view "mv", holding what it would: a
		// source family's cells with their timestamps, and an aggregate.
		require.NoError(t, h.CreateTable(ctx, "mv", schema))
		now := h.Clock.Now()
		m := bigtable.NewMutation()
		m.Set(famOne, "old", bigtable.Time(now.Add(-time.Second)), []byte("old"))
		m.Set(famOne, "live", bigtable.Time(now.Add(time.Minute)), []byte("live"))
		m.Set("counts", "n", 0, []byte("2"))
		require.NoError(t, h.Raw.Open("mv").Apply(ctx, "r", m))

		mv, err := h.Client.OpenMaterializedView("mv", schema)
		require.NoError(t, err)
		assert.Equal(t, "mv", mv.Name())
		shim.reset()
		r, err := mv.ReadRow(ctx, "r")
		require.NoError(t, err)
		want := []string{"counts:n@0=2", "one:live@" + itoa(now.Add(time.Minute).UnixMicro()) + "=live"}
		assert.Equal(t, want, cells(r))
		var rows []bigtable.Row
		require.NoError(t, mv.API().ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
			rows = append(rows, r)
			return true
		}))
		require.Len(t, rows, 1)
		assert.Equal(t, want, cells(rows[0]))
		r, err = h.Raw.OpenMaterializedView("mv").ReadRow(ctx, "r")
		require.NoError(t, err)
		assert.Len(t, cells(r), 3, "the raw view returns the expired cell")
		sent := shim.requests("ReadRows")
		require.Len(t, sent, 3)
		for i, req := range sent {
			rr := req.(*btpb.ReadRowsRequest)
			assert.Equal(t, viewName, rr.MaterializedViewName, "read %d", i)
			assert.Empty(t, rr.TableName)
		}
		_, err = mv.SampleRowKeys(ctx)
		require.NoError(t, err)

		shim.reset()
		api := mv.API()
		w := bigtable.NewMutation()
		w.Set("counts", "n", 0, []byte("3"))
		err = api.Apply(ctx, "r", w)
		assert.ErrorIs(t, err, ttlclient.ErrReadOnlyView)
		var ce *ttlclient.CellError
		require.True(t, errors.As(err, &ce))
		assert.Equal(t, "mv", ce.Table)
		assert.Equal(t, "r", ce.Row)
		errs, err := api.ApplyBulk(ctx, []string{"r", "s"}, []*bigtable.Mutation{w, w})
		require.NoError(t, err)
		require.Len(t, errs, 2)
		assert.ErrorIs(t, errs[0], ttlclient.ErrReadOnlyView)
		assert.ErrorIs(t, errs[1], ttlclient.ErrReadOnlyView)
		_, err = api.ApplyBulk(ctx, []string{"r"}, nil)
		assert.Error(t, err)
		rmw := bigtable.NewReadModifyWrite()
		rmw.Increment("counts", "n", 1)
		_, err = api.ApplyReadModifyWrite(ctx, "r", rmw)
		assert.ErrorIs(t, err, ttlclient.ErrReadOnlyView)
		assert.Zero(t, shim.count(), "no write is sent")
		r, err = h.Raw.Open("mv").ReadRow(ctx, "r")
		require.NoError(t, err)
		assert.Contains(t, cells(r), "counts:n@0=2", "nothing written")

		_, err = h.Client.OpenMaterializedView("mv", strategy.Schema{famOne: strategy.Sequence(0)})
		assert.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	})
}

// A materialized view has no GC rules: opening one makes no admin call, so
// a client without an admin client opens it, where Open of a table fails.
func TestOpenMaterializedViewMakesNoAdminCall(t *testing.T) {
	h := bttestharness.New(t)
	c := ttlclient.Wrap(h.Raw, ttlclient.WithLogger(quietLogger()))
	_, err := c.Open(context.Background(), "t", strategy.Schema{famOne: strategy.OneSecond()})
	require.ErrorIs(t, err, ttlclient.ErrNoAdminClient)
	mv, err := c.OpenMaterializedView("mv", strategy.Schema{famOne: strategy.OneSecond()})
	require.NoError(t, err)
	assert.Equal(t, "mv", mv.Name())
}
