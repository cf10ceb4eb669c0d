package wireguard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

// limitSchema's family records write times: every cell written gets a
// companion, so the guard doubles a row's mutations.
var limitSchema = strategy.Schema{"wt": strategy.OneSecond(strategy.WithWriteTime())}

// limitEnv is a guarded plain client and bttl's client on a
// production-rules server, which refuses a request over Bigtable's
// 100,000 mutations (prodserver.MaxMutations) as production does.
func limitEnv(t *testing.T) (*prodserver.Server, *bigtable.Table, *ttlclient.Table, *bttestharness.Harness) {
	t.Helper()
	return limitEnvWith(t, prodserver.Config{})
}

// smallLimitTableEnv is limitEnv with Bigtable's limit lowered to
// smallLimit on both sides (see smallLimit).
func smallLimitTableEnv(t *testing.T) (*prodserver.Server, *bigtable.Table, *ttlclient.Table, *bttestharness.Harness) {
	t.Helper()
	t.Cleanup(rules.SetRequestLimitForTest(smallLimit))
	return limitEnvWith(t, prodserver.Config{MaxMutations: smallLimit})
}

func limitEnvWith(t *testing.T, cfg prodserver.Config) (*prodserver.Server, *bigtable.Table, *ttlclient.Table, *bttestharness.Harness) {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	s := prodserver.New(t, cfg)
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: s.Addr, NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	h.MustTable(t, "t", limitSchema)
	g, err := wireguard.New(map[string]strategy.Schema{"t": limitSchema})
	require.NoError(t, err)
	bt, err := h.Client.Open(context.Background(), "t", limitSchema)
	require.NoError(t, err)
	return s, guardedClient(t, s.Addr, g).Open("t"), bt, h
}

// cells is a mutation of n cells of family wt in distinct columns, each
// expiring in an hour.
func cells(t *testing.T, n int) *bigtable.Mutation {
	t.Helper()
	ts, err := limitSchema["wt"].WriteTimestamp(time.Now(), time.Hour)
	require.NoError(t, err)
	m := bigtable.NewMutation()
	for i := range n {
		m.Set("wt", fmt.Sprintf("c%06d", i), ts, []byte("v"))
	}
	return m
}

// The client groups an ApplyBulk's rows within the limit per request by
// their own count (52 rows of 10 cells, one request); the guard's
// companions double it. The guard sends the rewritten request as
// several, each within the limit, and every row is written. (The limit
// is lowered to smallLimit on both sides: the split is the same at
// 100,000, with rows of 1,000 cells.)
func TestGuardSplitsABulkRequestItsRulesPushOverTheLimit(t *testing.T) {
	s, tbl, _, h := smallLimitTableEnv(t)
	ctx := context.Background()
	var rows []string
	var muts []*bigtable.Mutation
	for i := range 52 {
		rows = append(rows, fmt.Sprintf("r%02d", i))
		muts = append(muts, cells(t, 10))
	}
	errs, err := tbl.ApplyBulk(ctx, rows, muts)
	require.NoError(t, err)
	require.Nil(t, errs)
	for _, row := range rows {
		r, err := h.Stored(ctx, "t", row)
		require.NoError(t, err)
		assert.Len(t, r["wt"], 20, "row %s: 10 cells and their companions", row)
	}
	assert.Zero(t, s.Counts().Refused, "the server refused nothing")
}

// A row over the limit once the rules added to it is refused before any
// RPC, naming the rule, and nothing of it is written: through the guard
// (MutateRow, and MutateRows refused whole) and through bttl's client
// (a *CellError wrapping ErrTooManyMutations, InvalidArgument as the
// server would answer).
func TestARowOverTheLimitAfterTheRulesIsRefusedBeforeAnyRPC(t *testing.T) {
	s, tbl, bt, h := limitEnv(t)
	ctx := context.Background()
	big := cells(t, 50001)

	err := tbl.Apply(ctx, "one", big)
	require.Error(t, err)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "the guard's refusals are FailedPrecondition")
	assert.Contains(t, err.Error(), "rule too-many-mutations")
	assert.True(t, strings.Contains(err.Error(), "100002 mutations"), err.Error())

	_, err = tbl.ApplyBulk(ctx, []string{"small", "bulk"}, []*bigtable.Mutation{cells(t, 1), big})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rule too-many-mutations")

	err = bt.API().Apply(ctx, "api", big)
	require.ErrorIs(t, err, ttlclient.ErrTooManyMutations)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))

	for _, row := range []string{"one", "small", "bulk", "api"} {
		r, err := h.Stored(ctx, "t", row)
		require.NoError(t, err)
		assert.Empty(t, r, "row %s: nothing written", row)
	}
	assert.Zero(t, s.Counts().Refused, "refused before any RPC: the server saw nothing to refuse")
}
