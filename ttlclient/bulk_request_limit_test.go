package ttlclient_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// The client groups an ApplyBulk's rows by their own mutation count (at
// most 100,000 per MutateRows request, Bigtable's limit), before bttl's
// interceptor adds a family's single-value deletes and write-time
// companions: a group under the limit grows over it on the wire. The
// interceptor sends such a request as several, each within the limit, so
// that an ApplyBulk the raw client would send is not refused whole by the
// server (Table.ApplyBulk groups after adding them, and so did Table.API
// before the interceptor).
func TestAPIApplyBulkStaysWithinTheRequestLimit(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: s.Addr, NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	tbl := h.MustTable(t, "t", strategy.Schema{"sv": strategy.OneSecond(strategy.SingleValue(), strategy.WithWriteTime(), strategy.WithDefaultTTL(time.Hour))})
	ctx := context.Background()

	// Each Set becomes 4 mutations (the column's delete and its
	// companion's, the cell and its companion): 25,001 of them are
	// 100,004, over the limit, in one group of the client's. Row 1 is
	// refused (an unknown family): its error is at its index, and the
	// rows after it, in the second request, map back to theirs.
	const n = prodserver.MaxMutations/4 + 2
	keys := make([]string, n)
	muts := make([]*bigtable.Mutation, n)
	for i := range keys {
		keys[i] = "r" + strconv.Itoa(i)
		m := bigtable.NewMutation()
		fam := "sv"
		if i == 1 {
			fam = "unknown"
		}
		m.Set(fam, "c", bigtable.ServerTime, []byte("v"))
		muts[i] = m
	}
	errs, err := tbl.API().ApplyBulk(ctx, keys, muts)
	require.NoError(t, err)
	require.Len(t, errs, n)
	for i, err := range errs {
		if i == 1 {
			require.ErrorIs(t, err, ttlclient.ErrUnknownFamily)
			continue
		}
		require.NoError(t, err, "row %d", i)
	}
	for _, k := range []string{keys[0], keys[n/2], keys[n-1]} {
		r, err := tbl.ReadRow(ctx, k)
		require.NoError(t, err)
		assert.Len(t, r["sv"], 1, "row %s", k)
	}
}

// A row that the rules alone take over the limit is answered at its
// index, as the server answers a request over it, and the other rows of
// its group are written: the client's grouping (by the row's own count)
// put it with them, where Table.ApplyBulk would have sent it alone.
func TestAPIApplyBulkRowOverTheRequestLimitFailsAlone(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: s.Addr, NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	tbl := h.MustTable(t, "t", strategy.Schema{"sv": strategy.OneSecond(strategy.SingleValue(), strategy.WithWriteTime(), strategy.WithDefaultTTL(time.Hour))})
	ctx := context.Background()

	big, small := bigtable.NewMutation(), bigtable.NewMutation()
	for i := 0; i < prodserver.MaxMutations/4+1; i++ { // 100,004 once rewritten
		big.Set("sv", "c"+strconv.Itoa(i), bigtable.ServerTime, []byte("v"))
	}
	small.Set("sv", "c", bigtable.ServerTime, []byte("v"))
	errs, err := tbl.API().ApplyBulk(ctx, []string{"big", "small"}, []*bigtable.Mutation{big, small})
	require.NoError(t, err)
	require.Len(t, errs, 2)
	assert.Equal(t, codes.InvalidArgument, status.Code(errs[0]), "%v", errs[0])
	require.NoError(t, errs[1])
	r, err := tbl.ReadRow(ctx, "small")
	require.NoError(t, err)
	assert.Len(t, r["sv"], 1)
	r, err = tbl.ReadRow(ctx, "big")
	require.NoError(t, err)
	assert.Empty(t, r, "nothing of the row over the limit is written")
}
