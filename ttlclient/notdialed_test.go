package ttlclient_test

import (
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/ttlclient"
)

// Wrap over a client whose connection lacks bttl's interceptor. What needs it
// (Table.API's writes, a read with options of a table with managed families)
// is refused with ErrNotDialed, naming the options to dial with, and nothing
// reaches the server: not the call, not the probe that found the interceptor
// missing. A read without options still works (the TTL filter goes as its
// RowFilter) (issue 34).
func TestWrapWithoutInterceptorRefusesBeforeAnyRPC(t *testing.T) {
	e, counter := newCountingEnv(t, mixedSchema())
	plain, err := e.h.DialDataClient(e.ctx) // no bttl interceptor
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	tbl, err := ttlclient.Wrap(plain.Client, ttlclient.WithoutVerify(), ttlclient.WithClock(e.h.Clock)).Open(e.ctx, "t", mixedSchema())
	require.NoError(t, err)
	before := counter.n.Load()

	m := bigtable.NewMutation()
	m.Set(famDef, "c", bigtable.ServerTime, []byte("v"))
	err = tbl.API().Apply(e.ctx, "row", m)
	require.ErrorIs(t, err, ttlclient.ErrNotDialed)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	assert.ErrorContains(t, err, "ttlclient.ClientOptions()")
	_, err = tbl.ReadRow(e.ctx, "row", bigtable.RowFilter(bigtable.PassAllFilter()))
	require.ErrorIs(t, err, ttlclient.ErrNotDialed)
	assert.Equal(t, before, counter.n.Load(), "a refused call, or the probe, reached the server")

	// The TTL filter alone needs no interceptor.
	w := ttlclient.NewMutation()
	w.SetTTL(famOne, "c", 2*time.Hour, []byte("v"))
	require.NoError(t, tbl.Apply(e.ctx, "row", w))
	r, err := tbl.ReadRow(e.ctx, "row")
	require.NoError(t, err)
	assert.Len(t, r[famOne], 1)
}
