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

	bttestharness "github.com/bttl/bttl/bttest_harness"
	provision "github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/strategy"
)

// After a migration to one-second expiry, cells whose expiry instant has
// passed since look, by their timestamp alone, like real timestamps.
// WithWrittenBefore (no real timestamp stamped after T + skew) tells them
// apart: stamped after the bound and at or before now, they are counted as
// expiry instants already passed and the rule is applied; stamped at or before
// it, they are refused as before (issue 35, item 3).
func TestWrittenBeforeTellsPassedExpiriesFromRealTimestamps(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	now := h.Clock.Now()
	switched := now.Add(-time.Minute) // the last legacy writer stopped
	const skew = 5 * time.Second
	ms := func(t time.Time) bigtable.Timestamp { return bigtable.Time(t).TruncateToMilliseconds() }
	create := func(table string) {
		require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: table, ColumnFamilies: map[string]bigtable.Family{
			"f": {GCPolicy: bigtable.MaxAgePolicy(60 * 24 * time.Hour)},
		}}))
	}
	// "migrated": moved cells, one of whose expiry passed 10s ago (after
	// the bound), one live.
	create("migrated")
	m := bigtable.NewMutation()
	m.Set("f", "passed", ms(now.Add(-10*time.Second)), []byte("v"))
	m.Set("f", "live", ms(now.Add(time.Hour)), []byte("v"))
	require.NoError(t, h.Raw.Open("migrated").Apply(ctx, "r", m))
	// "legacy": also a real write time before the switch, and one exactly
	// on the bound (a legacy write at the switch on a clock skew ahead).
	create("legacy")
	m = bigtable.NewMutation()
	m.Set("f", "passed", ms(now.Add(-10*time.Second)), []byte("v"))
	m.Set("f", "old", ms(switched.Add(-time.Hour)), []byte("v"))
	m.Set("f", "edge", ms(switched.Add(skew)), []byte("v"))
	require.NoError(t, h.Raw.Open("legacy").Apply(ctx, "r", m))
	target := strategy.Schema{"f": strategy.OneSecond()}

	// Without the evidence: every cell at or before now is refused, with
	// the way to tell them apart named.
	var out bytes.Buffer
	_, err := newProvisioner(h, &out).PlanAndCheck(ctx, "migrated", target)
	var rt *provision.AdoptionError
	require.True(t, errors.As(err, &rt), "%v", err)
	assert.Equal(t, provision.ErrRealTimestamps, rt.Err, "the first finding is the one named")
	assert.Equal(t, int64(1), rt.Cells)
	assert.Contains(t, err.Error(), "-written-before")

	// With it: the passed cell is reported, not refused, and apply goes
	// ahead without force.
	p := newProvisioner(h, &out, provision.WithWrittenBefore(switched, skew))
	plan, err := p.PlanAndCheck(ctx, "migrated", target)
	require.NoError(t, err)
	require.Len(t, plan.Notes, 1)
	assert.Contains(t, plan.Notes[0], `family "f": 1 cell(s) stamped after`)
	assert.Contains(t, plan.Notes[0], "expiry instants already passed")
	out.Reset()
	require.NoError(t, p.Execute(ctx, plan, target))
	assert.Contains(t, out.String(), "expiry instants already passed")
	require.NoError(t, verify(t, h, "migrated", target))

	// Cells at or before the bound stay refused (the one on it too), the
	// passed one counted apart.
	_, err = p.Apply(ctx, "legacy", target)
	require.ErrorIs(t, err, provision.ErrRealTimestamps)
	require.True(t, errors.As(err, &rt))
	assert.Equal(t, int64(2), rt.Cells, "the old write time and the one on the bound")
	assert.Equal(t, int64(1), rt.Passed)
	assert.Equal(t, ms(switched.Add(skew)), rt.LegacyBound)
	assert.Error(t, verify(t, h, "legacy", target), "refused: the rule is unchanged")

	// Options it cannot act on are refused before any RPC.
	for _, o := range []provision.Option{provision.WithWrittenBefore(time.Time{}, skew), provision.WithWrittenBefore(switched, -time.Second)} {
		_, err := newProvisioner(h, &out, o).Plan(ctx, "no-such-table", target)
		assert.ErrorIs(t, err, provision.ErrInvalidOption)
	}
}
