package ttlclient_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// assertStatus checks that err, a refusal wrapping want, carries want's
// gRPC code (InvalidArgument or FailedPrecondition, never Unknown) and
// still answers errors.Is.
func assertStatus(t *testing.T, err, want error, code codes.Code) {
	t.Helper()
	require.ErrorIs(t, err, want)
	assert.Equal(t, code, status.Code(err), "%v", err)
	assert.Equal(t, code, ttlclient.StatusCode(want))
	st, ok := status.FromError(err)
	require.True(t, ok, "status.FromError found no status in %v", err)
	assert.Equal(t, err.Error(), st.Message())
}

// The refusals the API really returns, on every entry point, carry their
// sentinel's gRPC code; before, status.Code gave Unknown (issue 28).
func TestRefusalsCarryStatusCodes(t *testing.T) {
	for _, c := range guardCases() {
		t.Run(c.name, func(t *testing.T) {
			e, _ := newCountingEnv(t, mixedSchema())
			if !c.clock.IsZero() {
				e.h.Clock.Set(c.clock)
			}
			row := c.rowKey()
			m := ttlclient.NewMutation()
			c.build(m)
			code := ttlclient.StatusCode(c.want)
			require.NotEqual(t, codes.Unknown, code)
			assertStatus(t, e.tbl.Apply(e.ctx, row, m), c.want, code)
			errs, err := e.tbl.ApplyBulk(e.ctx, []string{row}, []*ttlclient.Mutation{m})
			require.NoError(t, err)
			assertStatus(t, errs[0], c.want, code)
		})
	}

	e, _ := newCountingEnv(t, mixedSchema())
	ctx := e.ctx
	t.Run("nil mutation", func(t *testing.T) {
		assertStatus(t, e.tbl.Apply(ctx, "row", nil), ttlclient.ErrNilMutation, codes.InvalidArgument)
	})
	t.Run("nested condition", func(t *testing.T) {
		inner := ttlclient.NewCondMutation(nil, ttlclient.NewMutation(), nil)
		err := e.tbl.Apply(ctx, "row", ttlclient.NewCondMutation(nil, inner, nil))
		assertStatus(t, err, ttlclient.ErrNestedCondition, codes.InvalidArgument)
	})
	t.Run("ReadModifyWrite on a managed family", func(t *testing.T) {
		rmw := ttlclient.NewReadModifyWrite()
		rmw.Increment(famDef, "c", 1)
		_, err := e.tbl.ApplyReadModifyWrite(ctx, "row", rmw)
		assertStatus(t, err, ttlclient.ErrServerAssignedTimestamp, codes.FailedPrecondition)
	})
	t.Run("TableAPI", func(t *testing.T) {
		m := bigtable.NewMutation()
		m.Set("nope", "c", 1000, []byte("v"))
		assertStatus(t, e.tbl.API().Apply(ctx, "row", m), ttlclient.ErrUnknownFamily, codes.FailedPrecondition)
	})
	t.Run("lifecycle", func(t *testing.T) {
		_, err := e.tbl.Timestamp(famPlain, time.Hour)
		assertStatus(t, err, strategy.ErrWrongCellOption, codes.InvalidArgument)
	})
	t.Run("invalid schema", func(t *testing.T) {
		_, err := e.h.Client.Open(ctx, "t", strategy.Schema{"s": strategy.Sequence(0)})
		assertStatus(t, err, strategy.ErrInvalidPolicy, codes.InvalidArgument)
	})
	t.Run("GC rule mismatch", func(t *testing.T) {
		require.NoError(t, e.h.CreateTable(ctx, "plain", strategy.Schema{famDef: strategy.Unmanaged()}))
		_, err := e.h.Client.Open(ctx, "plain", strategy.Schema{famDef: strategy.DefaultExpiry(defaultD)})
		assertStatus(t, err, gcrule.ErrMismatch, codes.FailedPrecondition)
	})
	t.Run("no admin client", func(t *testing.T) {
		_, err := ttlclient.Wrap(e.h.Raw).Open(ctx, "t", mixedSchema())
		assertStatus(t, err, ttlclient.ErrNoAdminClient, codes.FailedPrecondition)
	})
	t.Run("SQL of an unknown table", func(t *testing.T) {
		_, err := e.h.Client.PrepareStatement(ctx, "SELECT * FROM elsewhere", nil)
		assertStatus(t, err, ttlclient.ErrSQLUnknownTable, codes.FailedPrecondition)
	})
}

// A refusal's message names the family, quoted, even when it is the empty
// name; a refusal about no family names none (issue 28).
func TestRefusalNamesTheEmptyFamily(t *testing.T) {
	h := bttestharness.New(t)
	tbl := h.MustTable(t, "t", strategy.Schema{famPlain: strategy.Unmanaged()})
	ctx := context.Background()
	m := ttlclient.NewMutation()
	m.Set("", "", 0, nil) // the suite's empty SetCell{}
	err := tbl.Apply(ctx, "row", m)
	require.ErrorIs(t, err, ttlclient.ErrUnknownFamily)
	assert.Contains(t, err.Error(), `row "row", family "")`)

	rmw := ttlclient.NewReadModifyWrite()
	rmw.Increment("", "c", 1)
	_, err = tbl.ApplyReadModifyWrite(ctx, "row", rmw)
	require.ErrorIs(t, err, ttlclient.ErrUnknownFamily)
	assert.Contains(t, err.Error(), `family ""`)

	_, err = tbl.Timestamp("", 0)
	require.ErrorIs(t, err, ttlclient.ErrUnknownFamily)
	assert.Contains(t, err.Error(), `family ""`)

	err = tbl.Apply(ctx, "", m)
	require.ErrorIs(t, err, ttlclient.ErrEmptyRowKey)
	assert.NotContains(t, err.Error(), "family")
}

// A refusal of a cell written with bigtable.ServerTime says so, not
// "timestamp -1".
func TestCellErrorNamesAuto(t *testing.T) {
	e := &ttlclient.CellError{Table: "t", Family: "f", Timestamp: bigtable.ServerTime, Err: strategy.ErrServerTimestamp}
	assert.Contains(t, e.Error(), "timestamp bigtable.ServerTime")
	assert.NotContains(t, e.Error(), "timestamp -1")
}
