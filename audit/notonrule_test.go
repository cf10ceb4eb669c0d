package audit_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// A family whose GC rule is not the one its strategy needs but collects
// every cell that one would (an age as short or shorter, with a versions
// rule beside it) keeps no expired cell by its rule: cells still stored
// past their expiry are GC's stock, counted Expired (and so alerted on by
// BttlExpiredStockOverAWeek), not hidden as not on their rule. A family
// whose rule keeps them longer (no rule, a longer age) moves them to
// NotOnRule.
func TestExpiredStockIsNotHiddenByARuleThatCollectsIt(t *testing.T) {
	ctx := context.Background()
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "s", ColumnFamilies: map[string]bigtable.Family{
		"strict": {GCPolicy: bigtable.UnionPolicy(bigtable.MaxAgePolicy(time.Second), bigtable.MaxVersionsPolicy(1))},
		"longer": {GCPolicy: bigtable.MaxAgePolicy(60 * 24 * time.Hour)},
		"none":   {},
	}}))
	now := h.Clock.Now()
	m := bigtable.NewMutation()
	for _, fam := range []string{"strict", "longer", "none"} {
		m.Set(fam, "c", bigtable.Time(now.Add(-time.Hour)), []byte("v"))
	}
	require.NoError(t, h.Raw.Open("s").Apply(ctx, "r", m))
	schema := strategy.Schema{"strict": strategy.OneSecond(), "longer": strategy.OneSecond(), "none": strategy.OneSecond()}
	rep, err := audit.Scan(ctx, h.Raw.Open("s"), "s", schema, bigtable.Time(now))
	require.NoError(t, err)
	fams, err := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance).Families(ctx, "s")
	require.NoError(t, err)
	rep.NoteGCRules(fams)
	got := map[string]audit.Family{}
	for _, f := range rep.Families {
		got[f.Family] = f
	}
	strict := got["strict"]
	assert.True(t, strict.NotOnItsRule(), "its rule is not the strategy's: still reported")
	assert.Equal(t, int64(1), strict.Expired, "its rule collects the expired cell: GC's stock")
	assert.Zero(t, strict.NotOnRule)
	for _, fam := range []string{"longer", "none"} {
		assert.Zero(t, got[fam].Expired, fam)
		assert.Equal(t, int64(1), got[fam].NotOnRule, "%s: its rule keeps the cell", fam)
	}
}
