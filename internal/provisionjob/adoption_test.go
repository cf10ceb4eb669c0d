package provisionjob_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	provision "github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/strategy"
)

// countCells counts every stored cell of the table.
func countCells(t *testing.T, h *bttestharness.Harness, table string) int {
	t.Helper()
	n := 0
	require.NoError(t, h.Raw.Open(table).ReadRows(context.Background(), bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		for _, items := range r {
			n += len(items)
		}
		return true
	}))
	return n
}

// writeSequenceCells writes rows x 3 versions of column "body" in family,
// at seq*1000 for seq 1..3, as a Sequence(3) family holds them.
func writeSequenceCells(t *testing.T, h *bttestharness.Harness, table, family string, rows int) {
	t.Helper()
	for r := 0; r < rows; r++ {
		m := bigtable.NewMutation()
		for seq := int64(1); seq <= 3; seq++ {
			m.Set(family, "body", bigtable.Timestamp(seq*1000), []byte(fmt.Sprintf("v%d", seq)))
		}
		require.NoError(t, h.Raw.Open(table).Apply(context.Background(), fmt.Sprintf("doc#%03d", r), m))
	}
}

// Acceptance 0 on bttest: a Sequence(3) family moved to DefaultExpiry(48h)
// would lose all 150 cells at the next compaction (their timestamps are
// seq*1000, 1970): refused, and the rule and cells stay.
func TestAgeRuleOverSequenceCellsRefused(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	// Created with its rule, never modified: bttest runs no GC, so a
	// wrongly allowed change would show in the rule, not in a race.
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"doc": {GCPolicy: bigtable.MaxVersionsPolicy(3)},
	}}))
	writeSequenceCells(t, h, "t", "doc", 50)
	require.Equal(t, 150, countCells(t, h, "t"))
	target := strategy.Schema{"doc": strategy.DefaultExpiry(48 * time.Hour)}

	var out bytes.Buffer
	p := newProvisioner(h, &out)
	plan, err := p.Plan(ctx, "t", target)
	require.NoError(t, err)
	require.Len(t, plan.Changes, 1)
	require.NotNil(t, plan.Changes[0].Impact)
	assert.Equal(t, int64(150), plan.Changes[0].Impact.Collectable)

	_, err = p.Apply(ctx, "t", target)
	require.ErrorIs(t, err, provision.ErrAgeOverSequence)
	require.ErrorIs(t, err, provision.ErrUnsafeAdoption)
	assert.NotErrorIs(t, err, provision.ErrRealTimestamps)
	var sc *provision.AdoptionError
	require.True(t, errors.As(err, &sc))
	assert.Equal(t, provision.ErrAgeOverSequence, sc.Err, "the first finding is the one named")
	assert.Equal(t, "doc", sc.Family)
	assert.Equal(t, int64(150), sc.Cells)
	assert.True(t, sc.Exact, "50 rows are within the sample")
	assert.Equal(t, "doc#000", sc.Row)
	assert.Equal(t, "body", sc.Column)
	assert.Equal(t, bigtable.Timestamp(3000), sc.Timestamp, "newest first")
	assert.Equal(t, "max_versions=3", sc.From)
	assert.Contains(t, err.Error(), `family "doc"`)
	assert.Contains(t, err.Error(), "150 cell(s)")
	assert.Contains(t, err.Error(), "timestamp 3000 (seq 3)")
	assert.Contains(t, err.Error(), "move them first, or force")
	assert.Empty(t, out.String(), "nothing carried out")
	require.NoError(t, verify(t, h, "t", strategy.Schema{"doc": strategy.Sequence(3)}), "the rule stays")
	assert.Equal(t, 150, countCells(t, h, "t"))

	out.Reset()
	_, err = newProvisioner(h, &out, provision.WithForce()).Apply(ctx, "t", target)
	require.NoError(t, err)
	assert.Contains(t, out.String(), "bttl: an age rule would delete a sequence family's cells")
	assert.Contains(t, out.String(), "forced: they are hidden from reads through bttl now and deleted at the next compaction")
	assert.NotContains(t, out.String(), "or force")
	require.NoError(t, verify(t, h, "t", target))
}

// Each way an age rule meets cells it would delete at once, and the cases
// it must let through.
func TestAgeRuleAdoptionCases(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"seqnogc":  {GCPolicy: bigtable.NoGcPolicy()},         // sequence numbers, no rule
		"versions": {GCPolicy: bigtable.MaxVersionsPolicy(2)}, // real times, max versions
		"fresh":    {GCPolicy: bigtable.MaxVersionsPolicy(2)}, // real times within the new age
		"real":     {GCPolicy: bigtable.NoGcPolicy()},         // old real times, no rule: a lowering, not a refusal
		"oneseq":   {GCPolicy: bigtable.NoGcPolicy()},         // sequence numbers under one-second
	}}))
	now := h.Clock.Now()
	m := bigtable.NewMutation()
	m.Set("seqnogc", "c", 2000, []byte("x"))
	m.Set("versions", "c", bigtable.Time(now.Add(-72*time.Hour)), []byte("x"))
	m.Set("fresh", "c", bigtable.Time(now.Add(-time.Hour)), []byte("x"))
	m.Set("real", "c", bigtable.Time(now.Add(-72*time.Hour)), []byte("x"))
	m.Set("oneseq", "c", 5000, []byte("x"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", m))

	p := newProvisioner(h, &bytes.Buffer{})
	for fam, want := range map[string]error{
		"seqnogc":  provision.ErrAgeOverSequence,
		"versions": provision.ErrAgeOverSequence,
		"fresh":    nil,
		"real":     nil,
	} {
		plan, err := p.Plan(ctx, "t", strategy.Schema{fam: strategy.DefaultExpiry(48 * time.Hour)})
		require.NoError(t, err, fam)
		err = p.CheckAdoptions(ctx, plan)
		if want == nil {
			assert.NoError(t, err, fam)
			continue
		}
		assert.ErrorIs(t, err, want, fam)
	}
	// One-second over sequence numbers: they are not real timestamps,
	// but they are deleted all the same.
	plan, err := p.Plan(ctx, "t", strategy.Schema{"oneseq": strategy.OneSecond()})
	require.NoError(t, err)
	err = p.CheckAdoptions(ctx, plan)
	require.ErrorIs(t, err, provision.ErrAgeOverSequence)
	assert.NotErrorIs(t, err, provision.ErrRealTimestamps)
}

// Acceptance 1 on bttest: three server-timestamped cells (as cbt writes)
// in a family about to get Sequence(3) would outrank every sequence number
// and hide new writes: refused; forced, the message says so.
func TestSequenceAdoptionOverRealTimestampsRefused(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"doc": {GCPolicy: bigtable.NoGcPolicy()}, "clean": {GCPolicy: bigtable.NoGcPolicy()}, "odd": {GCPolicy: bigtable.NoGcPolicy()},
	}}))
	// Real write times, as cbt or a plain client leaves them (the
	// cbtemulator test writes them with cbt itself).
	m := bigtable.NewMutation()
	for i := 0; i < 3; i++ {
		m.Set("doc", "body", bigtable.Time(h.Clock.Now().Add(-time.Duration(i)*time.Minute)), []byte(fmt.Sprintf("legacy-%d", i)))
	}
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "d1", m))
	m = bigtable.NewMutation()
	m.Set("clean", "body", 1000, []byte("seq 1"))
	m.Set("clean", "body", 2000, []byte("seq 2"))
	m.Set("odd", "body", 0, []byte("seq 0: not a sequence number")) // Bigtable stores milliseconds, so 0 is the only non-seq*1000 below 1000
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "d2", m))

	var out bytes.Buffer
	p := newProvisioner(h, &out)
	plan, err := p.Plan(ctx, "t", strategy.Schema{"clean": strategy.Sequence(3)})
	require.NoError(t, err)
	require.NoError(t, p.CheckAdoptions(ctx, plan), "seq*1000 cells are what the strategy expects")

	plan, err = p.Plan(ctx, "t", strategy.Schema{"odd": strategy.Sequence(3)})
	require.NoError(t, err)
	err = p.CheckAdoptions(ctx, plan)
	require.ErrorIs(t, err, provision.ErrNotSequenceNumbers)
	var ns *provision.AdoptionError
	require.True(t, errors.As(err, &ns))
	assert.Equal(t, provision.ErrNotSequenceNumbers, ns.Err, "the first finding is the one named")
	assert.Equal(t, int64(1), ns.Cells)
	assert.Equal(t, int64(0), ns.RealTimes)

	schema := strategy.Schema{"doc": strategy.Sequence(3)}
	_, err = p.Apply(ctx, "t", schema)
	require.ErrorIs(t, err, provision.ErrNotSequenceNumbers)
	require.ErrorIs(t, err, provision.ErrUnsafeAdoption)
	require.True(t, errors.As(err, &ns))
	assert.Equal(t, "doc", ns.Family)
	assert.Equal(t, int64(3), ns.Cells)
	assert.Equal(t, int64(3), ns.RealTimes)
	assert.Equal(t, "d1", ns.Row)
	assert.Equal(t, "body", ns.Column)
	assert.GreaterOrEqual(t, ns.Timestamp, strategy.RealTimeFloor)
	assert.Contains(t, err.Error(), "3 of them real times")
	assert.Contains(t, err.Error(), "rewrite them as seq*1000 first, or force")
	assert.Empty(t, out.String())
	require.Error(t, verify(t, h, "t", schema), "the rule did not change")
	assert.Equal(t, 6, countCells(t, h, "t"))

	_, err = newProvisioner(h, &out, provision.WithForce()).Apply(ctx, "t", schema)
	require.NoError(t, err)
	assert.Contains(t, out.String(), "bttl: the family holds timestamps that are not sequence numbers")
	assert.Contains(t, out.String(), "forced: they outrank every sequence number, so reads through bttl return them and hide new writes")
	assert.NotContains(t, out.String(), "or force")
	require.NoError(t, verify(t, h, "t", schema))
}

// The existing guard under force says what is deleted, not "or force".
func TestForcedOneSecondAdoptionSaysWhatIsDeleted(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"s": {GCPolicy: bigtable.NoGcPolicy()},
	}}))
	m := bigtable.NewMutation()
	m.Set("s", "c", bigtable.Time(h.Clock.Now().Add(-time.Minute)), []byte("x"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", m))
	var out bytes.Buffer
	_, err := newProvisioner(h, &out, provision.WithForce()).Apply(ctx, "t", strategy.Schema{"s": strategy.OneSecond()})
	require.NoError(t, err)
	assert.Contains(t, out.String(), "bttl: one-second expiry would delete cells with real timestamps")
	assert.Contains(t, out.String(), "forced: they are hidden from reads through bttl now and deleted at the next compaction")
	assert.NotContains(t, out.String(), "move them first")
}

// Acceptance 2 on bttest: lowering max age from 30 days to 48h over 1,000
// cells 72h old makes all of them collectable at once; Plan counts them
// exactly, reading every row (issue 27 item 6: the count was a sample's
// lower bound, never scaled), and Write says so.
func TestPlanCountsWhatALoweringMakesCollectable(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"ev":  {GCPolicy: bigtable.MaxAgePolicy(30 * 24 * time.Hour)},
		"seq": {GCPolicy: bigtable.MaxVersionsPolicy(5)},
	}}))
	old := bigtable.Time(h.Clock.Now().Add(-72 * time.Hour))
	var keys []string
	var muts []*bigtable.Mutation
	for i := 0; i < 1000; i++ {
		m := bigtable.NewMutation()
		m.Set("ev", "e", old, []byte("12345"))
		m.Set("ev", "f", bigtable.Time(h.Clock.Now()), []byte("fresh"))
		keys, muts = append(keys, fmt.Sprintf("ev#%04d", i)), append(muts, m)
	}
	m := bigtable.NewMutation()
	for seq := int64(1); seq <= 5; seq++ {
		m.Set("seq", "body", bigtable.Timestamp(seq*1000), []byte("v"))
	}
	keys, muts = append(keys, "seq#1"), append(muts, m)
	errs, err := h.Raw.Open("t").ApplyBulk(ctx, keys, muts)
	require.NoError(t, err)
	require.Nil(t, errs)
	schema := strategy.Schema{"ev": strategy.DefaultExpiry(48 * time.Hour), "seq": strategy.Sequence(3)}

	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			plan, err := newProvisioner(h, &bytes.Buffer{}, provision.WithWorkers(workers)).Plan(ctx, "t", schema)
			require.NoError(t, err)
			require.Len(t, plan.Changes, 2)
			ev := plan.Changes[0].Impact
			require.NotNil(t, ev)
			assert.Equal(t, int64(1000), ev.Collectable, "the fresh cells stay")
			assert.Equal(t, int64(5000), ev.CollectableBytes)
			assert.Equal(t, int64(1000), ev.Rows, "rows holding the family only")
			assert.Equal(t, int64(2000), ev.Cells)
			assert.Equal(t, "ev#0000", ev.Row, "the first in key order, whatever the workers' order")
			assert.Equal(t, old, ev.Timestamp)
			sq := plan.Changes[1].Impact
			require.NotNil(t, sq)
			assert.Equal(t, int64(2), sq.Collectable, "seq 1 and 2 are beyond the 3 kept")
			assert.Equal(t, bigtable.Timestamp(2000), sq.Timestamp)
			var w bytes.Buffer
			plan.Write(&w)
			assert.Contains(t, w.String(), "collectable at once, and invisible through bttl: 1000 cell(s), 5000 byte(s)")
			assert.Contains(t, w.String(), "exact: read all 1000 row(s) of the family")
			assert.NotContains(t, w.String(), "sample")
			assert.Contains(t, w.String(), "timestamp "+old.Time().UTC().Format(time.RFC3339Nano), "RFC 3339 UTC")
		})
	}

	// A raising change counts nothing: it makes nothing collectable.
	raise, err := newProvisioner(h, &bytes.Buffer{}).Plan(ctx, "t", strategy.Schema{"ev": strategy.DefaultExpiry(60 * 24 * time.Hour)})
	require.NoError(t, err)
	assert.Nil(t, raise.Changes[0].Impact)
}
