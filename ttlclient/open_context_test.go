package ttlclient_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Open passes the caller's context to the verifying admin call: a
// cancelled context fails the open; a live one opens.
func TestOpenUsesCallerContext(t *testing.T) {
	h := bttestharness.New(t)
	require.NoError(t, h.CreateTable(context.Background(), "t", mixedSchema()))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tbl, err := h.Client.Open(ctx, "t", mixedSchema())
	require.Error(t, err)
	assert.Nil(t, tbl)
	assert.Equal(t, codes.Canceled, status.Code(err), "err: %v", err)

	// Without verification there is no admin call for the context to stop.
	tbl, err = h.Client.Open(ctx, "t", mixedSchema(), ttlclient.WithoutVerify())
	require.NoError(t, err)
	assert.Equal(t, "t", tbl.Name())

	tbl, err = h.Client.Open(context.Background(), "t", mixedSchema())
	require.NoError(t, err)
	assert.Equal(t, "t", tbl.Name())
}

// Opening a table that does not exist fails with ErrTableNotFound, and
// status.Code still says NotFound, as the admin API did.
func TestOpenMissingTableIsErrTableNotFound(t *testing.T) {
	h := bttestharness.New(t)
	_, err := h.Client.Open(context.Background(), "nosuchtable", ttlclient.Schema{"f": strategy.OneSecond()})
	require.Error(t, err)
	assert.ErrorIs(t, err, ttlclient.ErrTableNotFound)
	assert.Equal(t, codes.NotFound, status.Code(err))
	assert.Contains(t, err.Error(), `"nosuchtable"`)
}
