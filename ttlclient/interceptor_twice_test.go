package ttlclient_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// bttl's interceptor installed twice on one connection (ClientOptions
// passed to NewClient, which adds them itself) rewrites a Table.API call
// once: the second copy used to rewrite the first's request again and
// refuse the write-time companion the first had added, so every API write
// to a write-time family failed (ErrReservedColumn).
func TestInterceptorInstalledTwiceRewritesOnce(t *testing.T) {
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{DialOptions: ttlclient.DialOptions()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	schema := strategy.Schema{"wt": strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime())}
	tbl := h.MustTable(t, "t", schema)
	ctx := context.Background()

	m := bigtable.NewMutation()
	m.Set("wt", "c", bigtable.ServerTime, []byte("v"))
	require.NoError(t, tbl.API().Apply(ctx, "r", m))
	errs, err := tbl.API().ApplyBulk(ctx, []string{"b"}, []*bigtable.Mutation{m})
	require.NoError(t, err)
	require.Nil(t, errs)

	for _, row := range []string{"r", "b"} {
		stored, err := h.Stored(ctx, "t", row)
		require.NoError(t, err)
		cols := map[string]int{}
		for _, it := range stored["wt"] {
			cols[it.Column]++
		}
		assert.Equal(t, map[string]int{"wt:c": 1, "wt:" + strategy.WriteTimeColumn("c"): 1}, cols, "row %q: the cell and one companion", row)
	}
}
