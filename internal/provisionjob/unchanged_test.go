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
	"github.com/bttl/bttl/ttlclient"
)

// A max-versions family holding real timestamps, declared sequence with the
// same N. The rule already matches, so there is no change to scan for; the
// server keeps no record of the strategy, so the adoption scan runs anyway and
// refuses, unless WithAssumeAdopted says the data was checked before. Before,
// Plan was empty, CheckAdoptions and Apply found nothing (issue 26 item 8).
func TestSequenceOverUnchangedRuleRefused(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"doc": {GCPolicy: bigtable.MaxVersionsPolicy(3)}, "clean": {GCPolicy: bigtable.MaxVersionsPolicy(3)},
	}}))
	m := bigtable.NewMutation()
	m.Set("doc", "body", bigtable.Time(h.Clock.Now()), []byte("legacy, a real time"))
	m.Set("clean", "body", 7000, []byte("seq 7"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "d1", m))

	var out bytes.Buffer
	p := newProvisioner(h, &out)
	plan, err := p.Plan(ctx, "t", strategy.Schema{"clean": strategy.Sequence(3)})
	require.NoError(t, err)
	assert.True(t, plan.Empty())
	require.Len(t, plan.Unchanged, 1)
	assert.Equal(t, provision.KeepRule, plan.Unchanged[0].Action)
	require.NoError(t, p.CheckAdoptions(ctx, plan), "seq*1000 cells fit")

	schema := strategy.Schema{"doc": strategy.Sequence(3)}
	require.NoError(t, verify(t, h, "t", schema), "the rule matches")
	plan, err = p.Plan(ctx, "t", schema)
	require.NoError(t, err)
	assert.True(t, plan.Empty(), "no rule to change")
	for _, check := range []func() error{
		func() error { return p.CheckAdoptions(ctx, plan) },
		func() error { return p.CheckUnchanged(ctx, plan) },
		func() error { _, err := p.Apply(ctx, "t", schema); return err },
	} {
		err := check()
		require.ErrorIs(t, err, provision.ErrNotSequenceNumbers)
		var ns *provision.AdoptionError
		require.True(t, errors.As(err, &ns))
		assert.Equal(t, provision.ErrNotSequenceNumbers, ns.Err, "the first finding is the one named")
		assert.Equal(t, int64(1), ns.RealTimes)
		assert.Equal(t, "d1", ns.Row)
	}

	out.Reset()
	assumed := newProvisioner(h, &out, provision.WithAssumeAdopted())
	plan, err = assumed.Plan(ctx, "t", schema)
	require.NoError(t, err)
	assert.Empty(t, plan.Unchanged)
	assert.Equal(t, []string{"doc"}, plan.Assumed)
	require.NoError(t, assumed.CheckAdoptions(ctx, plan))
	plan.Write(&out)
	assert.Contains(t, out.String(), `stored data of family(ies) "doc" not checked against the declared strategy (assumed adopted)`)

	out.Reset()
	_, err = newProvisioner(h, &out, provision.WithForce()).Apply(ctx, "t", schema)
	require.NoError(t, err)
	assert.Contains(t, out.String(), "forced: they outrank every sequence number")
}

// WithWriteTime added to a family that holds a column under the reserved
// qualifiers (written before the option, when it was an ordinary column) hides
// it from every read through bttl. The rule does not change, so before nothing
// refused it; the adoption scan now counts reserved qualifiers that are not
// companions of a cell of their row. Companions bttl wrote are not counted
// (issue 26 item 2).
func TestWriteTimeOverReservedColumnsRefused(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	withWT := strategy.Schema{"s": strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime())}
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"s": strategy.DefaultExpiry(time.Hour)}))

	// Before the option, "\xff\xffold" was an ordinary column (written
	// here with a plain client, as any writer of the family could).
	old := bigtable.NewMutation()
	old.Set("s", "\xff\xffold", bigtable.Time(h.Clock.Now()), []byte("live data"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r1", old))
	// Through bttl with it: a cell and its companion, which hide nothing.
	wt, err := h.Client.Open(context.Background(), "t", withWT)
	require.NoError(t, err)
	m := ttlclient.NewMutation()
	m.Set("s", "tok", bigtable.ServerTime, []byte("v"))
	require.NoError(t, wt.Apply(ctx, "r2", m))

	var out bytes.Buffer
	p := newProvisioner(h, &out)
	plan, err := p.Plan(ctx, "t", withWT)
	require.NoError(t, err)
	assert.True(t, plan.Empty(), "the option changes no rule")
	for _, check := range []func() error{
		func() error { return p.CheckAdoptions(ctx, plan) },
		func() error { return p.CheckUnchanged(ctx, plan) },
		func() error { _, err := p.Apply(ctx, "t", withWT); return err },
	} {
		err := check()
		require.ErrorIs(t, err, provision.ErrHiddenColumns)
		require.ErrorIs(t, err, provision.ErrUnsafeAdoption)
		var hc *provision.AdoptionError
		require.True(t, errors.As(err, &hc))
		assert.Equal(t, provision.ErrHiddenColumns, hc.Err, "the first finding is the one named")
		assert.Equal(t, int64(1), hc.Cells, "the companion of r2's cell is not counted")
		assert.Equal(t, "r1", hc.Row)
		assert.Equal(t, "\xff\xffold", hc.Column)
		assert.Contains(t, err.Error(), "rewrite them under qualifiers below 0xFF 0xFF first, drop write_time, or force")
	}

	// Once the column is gone, only companions remain: nothing refused.
	del := bigtable.NewMutation()
	del.DeleteCellsInColumn("s", "\xff\xffold")
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r1", del))
	plan, err = p.Plan(ctx, "t", withWT)
	require.NoError(t, err)
	require.NoError(t, p.CheckAdoptions(ctx, plan))

	// The same check when the option comes with a rule change.
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "u", ColumnFamilies: map[string]bigtable.Family{"s": {GCPolicy: bigtable.NoGcPolicy()}}}))
	raw := bigtable.NewMutation()
	raw.Set("s", "\xff\xffbttl.wt\x00tok", bigtable.Time(h.Clock.Now()), []byte("an orphan: no tok cell at its timestamp"))
	require.NoError(t, h.Raw.Open("u").Apply(ctx, "r", raw))
	_, err = p.Apply(ctx, "u", withWT)
	require.ErrorIs(t, err, provision.ErrHiddenColumns)
}
