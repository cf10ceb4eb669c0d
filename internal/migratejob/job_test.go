package migratejob_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
)

// bothServers runs f on the in-process server and on cbtemulator.
func bothServers(t *testing.T, f func(t *testing.T, h *bttestharness.Harness)) {
	t.Run("bttest", func(t *testing.T) { f(t, bttestharness.New(t)) })
	t.Run("cbtemulator", func(t *testing.T) { f(t, onEmulator(t, bttestharness.Config{})) })
}

// The copy procedure (copy, writers keep writing the old family, copy again)
// carries no deletion made in the old family after a row was copied: the new
// family then serves the deleted cell. Deletions built through migrate.Mirror
// (a delete of one cell, a column deleted to overwrite it, a value overwritten
// at its timestamp, an Expire re-stamping a cell earlier) reach the copies;
// CheckCopy lists exactly the copy of the one deletion made without the
// mirror, and nothing once it is resolved (issue 35 item 8).
func TestCopyCarriesMirroredDeletesAndCheckFindsTheOther(t *testing.T) {
	bothServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged(), "g": strategy.Unmanaged()}))
		tbl := h.Raw.Open("t")
		now := h.Clock.Now()
		at := func(d time.Duration) bigtable.Timestamp { return bigtable.Time(now.Add(d)).TruncateToMilliseconds() }
		shift := bigtable.Timestamp(24 * time.Hour / time.Microsecond) // D=48h -> D'=24h: ts + 24h keeps the expiry
		for _, row := range []string{"r1", "r2", "r3", "r4", "r5"} {
			m := bigtable.NewMutation()
			m.Set("f", "a", at(-time.Hour), []byte(row+"/a"))
			m.Set("f", "b", at(-2*time.Hour), []byte(row+"/b"))
			require.NoError(t, tbl.Apply(ctx, row, m))
		}
		plan := migrate.Plan{Family: "f", From: strategy.DefaultExpiry(48 * time.Hour), To: strategy.DefaultExpiry(24 * time.Hour), ToFamily: "g"}
		run := func() *migrate.Report {
			m, err := migrate.New(tbl, "t", plan, migrate.WithClock(h.Clock))
			require.NoError(t, err)
			rep, err := m.Run(ctx)
			require.NoError(t, err)
			return rep
		}
		check := func() *migrate.CopyCheck {
			m, err := migrate.New(tbl, "t", plan, migrate.WithClock(h.Clock), migrate.WithDryRun())
			require.NoError(t, err)
			c, err := m.CheckCopy(ctx)
			require.NoError(t, err)
			return c
		}
		require.Equal(t, int64(10), run().Moved, "step 2: every live cell copied")
		require.True(t, check().Clean())

		mirror, err := migrate.NewMirror(plan)
		require.NoError(t, err)
		apply := func(row string, m *bigtable.Mutation) { require.NoError(t, tbl.Apply(ctx, row, m)) }
		// A writer still on the old family, without the mirror: r1's a.
		plain := bigtable.NewMutation()
		plain.DeleteTimestampRange("f", "a", at(-time.Hour), at(-time.Hour)+1000)
		apply("r1", plain)
		// With the mirror: r2's a deleted, r3's column b deleted (an
		// overwrite), r4's a given a new value at its timestamp, r5's a
		// re-stamped an hour earlier (Expire shortening its life).
		m := bigtable.NewMutation()
		mirror.DeleteTimestampRange(m, "r2", "a", at(-time.Hour), at(-time.Hour)+1000)
		apply("r2", m)
		m = bigtable.NewMutation()
		mirror.DeleteCellsInColumn(m, "b")
		apply("r3", m)
		m = bigtable.NewMutation()
		mirror.Set(m, "r4", "a", at(-time.Hour), []byte("r4/a overwritten"))
		apply("r4", m)
		m = bigtable.NewMutation()
		mirror.DeleteTimestampRange(m, "r5", "a", at(-time.Hour), at(-time.Hour)+1000)
		m.Set("f", "a", at(-2*time.Hour-time.Minute), []byte("r5/a"))
		apply("r5", m)

		rep := run() // step 4: copy again
		assert.Equal(t, int64(2), rep.Moved, "r4's new value and r5's re-stamped cell")
		want := map[key]string{
			{"r1", "a", at(-time.Hour) + shift}:               "r1/a", // revived: its source was deleted without the mirror
			{"r1", "b", at(-2*time.Hour) + shift}:             "r1/b",
			{"r2", "b", at(-2*time.Hour) + shift}:             "r2/b",
			{"r3", "a", at(-time.Hour) + shift}:               "r3/a",
			{"r4", "a", at(-time.Hour) + shift}:               "r4/a overwritten",
			{"r4", "b", at(-2*time.Hour) + shift}:             "r4/b",
			{"r5", "a", at(-2*time.Hour-time.Minute) + shift}: "r5/a",
			{"r5", "b", at(-2*time.Hour) + shift}:             "r5/b",
		}
		assert.Equal(t, want, stored(t, tbl, "g"), "every mirrored deletion reached the copies")

		c := check()
		assert.Equal(t, int64(1), c.OnlyInTarget)
		assert.Zero(t, c.ValueDiffers)
		require.Len(t, c.Cells, 1)
		assert.Equal(t, migrate.ReportCell{Row: "r1", Family: "g", Column: "a", Timestamp: int64(at(-time.Hour) + shift),
			Time: c.Cells[0].Time, What: "only_in_target"}, c.Cells[0])

		// Resolved: the revived copy deleted, pinned.
		require.NoError(t, migrate.DeleteCell(ctx, tbl, migrate.CellRef{Row: "r1", Family: "g", Column: "a", Timestamp: at(-time.Hour) + shift}))
		assert.True(t, check().Clean())
		assert.Zero(t, run().Moved, "nothing copied back")
	})
}

// A value overwritten at its timestamp without the mirror is found by
// the check (the copy holds the old value).
func TestCheckCopyFindsAnOverwriteWithoutTheMirror(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged(), "g": strategy.Unmanaged()}))
	tbl := h.Raw.Open("t")
	ts := bigtable.Time(h.Clock.Now().Add(-time.Hour)).TruncateToMilliseconds()
	m := bigtable.NewMutation()
	m.Set("f", "a", ts, []byte("old"))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	plan := migrate.Plan{Family: "f", From: strategy.DefaultExpiry(48 * time.Hour), To: strategy.DefaultExpiry(24 * time.Hour), ToFamily: "g"}
	mg, err := migrate.New(tbl, "t", plan, migrate.WithClock(h.Clock))
	require.NoError(t, err)
	_, err = mg.Run(ctx)
	require.NoError(t, err)
	m = bigtable.NewMutation()
	m.Set("f", "a", ts, []byte("new"))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	c, err := mg.CheckCopy(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), c.ValueDiffers)
	assert.False(t, c.Clean())
}

func TestMirrorRefusesAnInPlacePlan(t *testing.T) {
	_, err := migrate.NewMirror(inPlace(time.Now(), day))
	assert.ErrorIs(t, err, migrate.ErrInvalidPlan)
}

// A range left unfinished (a collision) is read again by the rerun, which
// finds the cells the first run moved there on the target: the counts carried
// over from the checkpoint (MovedBefore) make the job's total what was moved,
// every cell once (issue 35 item 5).
func TestResumedCountsAddUpToWhatWasMoved(t *testing.T) {
	h, tbl, now, at := rowTable(t)
	ctx := context.Background()
	model := load(t, tbl, "f", 40, 5, now, 5*day)
	old := at(-time.Hour)
	taken := old + bigtable.Timestamp(30*day/time.Microsecond)
	m := bigtable.NewMutation()
	m.Set("f", "x", old, []byte("legacy"))
	m.Set("f", "x", taken, []byte("a bttl write on its very expiry"))
	require.NoError(t, tbl.Apply(ctx, "row0000010", m))
	h.Clock.Set(now.Add(time.Second))
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	run := func() *migrate.ShardReport {
		mg, err := migrate.New(tbl, "t", inPlace(now, 30*day), migrate.WithClock(h.Clock), migrate.WithCheckpoint(ckpt))
		require.NoError(t, err)
		rep, err := mg.Run(ctx)
		require.NoError(t, err)
		return mg.ShardReport(rep)
	}
	first := run()
	assert.Equal(t, int64(len(model)), first.Total.MovedByJob())
	assert.Equal(t, int64(1), first.Total.Collisions)
	assert.False(t, first.Complete)

	second := run()
	assert.Zero(t, second.Run.Moved)
	assert.Equal(t, int64(len(model)), second.Total.MovedByJob(), "the first run's moves in the ranges read again are carried over")
	assert.False(t, second.Complete)

	clear := bigtable.NewMutation()
	clear.DeleteTimestampRange("f", "x", taken, taken+1000)
	require.NoError(t, tbl.Apply(ctx, "row0000010", clear))
	third := run()
	assert.Equal(t, int64(1), third.Run.Moved)
	assert.Equal(t, int64(len(model)+1), third.Total.MovedByJob(), "every cell the job moved, once")
	assert.True(t, third.Complete)
}

// Every ambiguous cell is in the JSON report, however few -examples.
func TestShardReportListsEveryAmbiguousCell(t *testing.T) {
	h, tbl, now, at := rowTable(t)
	ctx := context.Background()
	m := bigtable.NewMutation()
	for i := 0; i < 7; i++ {
		m.Set("f", fmt.Sprintf("c%d", i), at(-time.Duration(i+1)*time.Minute), []byte("stamped while writers switched"))
	}
	require.NoError(t, tbl.Apply(ctx, "r", m))
	p := inPlace(now, 30*day)
	p.FirstSwitch = now.Add(-time.Hour)
	h.Clock.Set(now.Add(time.Second))
	mg, err := migrate.New(tbl, "t", p, migrate.WithClock(h.Clock), migrate.WithExamples(2), migrate.WithAllAmbiguous())
	require.NoError(t, err)
	rep, err := mg.Run(ctx)
	require.NoError(t, err)
	sr := mg.ShardReport(rep)
	assert.Equal(t, int64(7), sr.Total.Ambiguous)
	require.Len(t, sr.Ambiguous, 7)
	assert.Equal(t, "c0", sr.Ambiguous[0].Column)
	assert.Equal(t, "ambiguous", sr.Ambiguous[0].What)
	assert.Equal(t, int64(at(-time.Minute)), sr.Ambiguous[0].Timestamp)
	assert.False(t, sr.Complete)

	// Without WithAllAmbiguous, WithExamples caps them.
	mg, err = migrate.New(tbl, "t", p, migrate.WithClock(h.Clock), migrate.WithExamples(2), migrate.WithDryRun())
	require.NoError(t, err)
	rep, err = mg.Run(ctx)
	require.NoError(t, err)
	assert.Len(t, rep.AmbiguousExamples, 2)
}

// MoveCell and DeleteCell change one cell, pinned: a target slot taken,
// a cell not stored, or bad input change nothing.
func TestMoveAndDeleteOneCell(t *testing.T) {
	_, tbl, _, at := rowTable(t)
	ctx := context.Background()
	m := bigtable.NewMutation()
	m.Set("f", "a", at(-time.Minute), []byte("one"))
	m.Set("f", "a", at(-2*time.Minute), []byte("two"))
	m.Set("f", "a", at(day), []byte("taken"))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	c := migrate.CellRef{Row: "r", Family: "f", Column: "a", Timestamp: at(-time.Minute)}

	err := migrate.MoveCell(ctx, tbl, c, at(day))
	assert.ErrorIs(t, err, migrate.ErrCellChanged, "the target slot holds a cell: never overwritten")
	var ce *migrate.CellError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, c, ce.Cell)
	assert.ErrorIs(t, migrate.MoveCell(ctx, tbl, c, at(day)+1), migrate.ErrInvalidCell, "not whole milliseconds")
	assert.ErrorIs(t, migrate.DeleteCell(ctx, tbl, migrate.CellRef{Row: "r", Family: "f", Column: "a", Timestamp: at(-3 * time.Minute)}), migrate.ErrNoSuchCell)
	assert.ErrorIs(t, migrate.DeleteCell(ctx, tbl, migrate.CellRef{Family: "f", Column: "a"}), migrate.ErrInvalidCell)
	assert.Len(t, stored(t, tbl, "f"), 3, "nothing changed")

	require.NoError(t, migrate.MoveCell(ctx, tbl, c, at(2*day)))
	require.NoError(t, migrate.DeleteCell(ctx, tbl, migrate.CellRef{Row: "r", Family: "f", Column: "a", Timestamp: at(-2 * time.Minute)}))
	assert.Equal(t, map[key]string{{"r", "a", at(2 * day)}: "one", {"r", "a", at(day)}: "taken"}, stored(t, tbl, "f"),
		"one cell moved, one deleted, the other version untouched")
}

// A second run of a migration with another TTL is refused from the
// checkpoint the first one left; the same TTL, or a first run, is not.
func TestCheckEarlierRunsRefusesAnotherTTL(t *testing.T) {
	h, tbl, now, _ := rowTable(t)
	ctx := context.Background()
	load(t, tbl, "f", 10, 2, now, day)
	h.Clock.Set(now.Add(time.Second))
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	mg, err := migrate.New(tbl, "t", inPlace(now, 30*day), migrate.WithClock(h.Clock), migrate.WithCheckpoint(ckpt))
	require.NoError(t, err)
	require.NoError(t, mg.CheckEarlierRuns(nil), "no record: nothing known")
	_, err = mg.Run(ctx)
	require.NoError(t, err)
	rec, err := os.ReadFile(ckpt)
	require.NoError(t, err)
	records := map[string][]byte{ckpt: rec, "other": []byte("not a checkpoint"), "claimed": nil}

	require.NoError(t, mg.CheckEarlierRuns(records), "the same TTL")
	longer, err := migrate.New(tbl, "t", inPlace(now, 60*day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	err = longer.CheckEarlierRuns(records)
	require.ErrorIs(t, err, migrate.ErrTTLChanged)
	var te *migrate.TTLChangeError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, []string{"ttl=720h0m0s"}, te.Earlier)
	assert.Equal(t, []string{"ttl=1440h0m0s"}, te.Now)
	assert.Equal(t, int64(20), te.Moved)
	assert.Equal(t, ckpt, te.Record)
	otherTable, err := migrate.New(tbl, "t2", inPlace(now, 60*day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	assert.NoError(t, otherTable.CheckEarlierRuns(records), "another table's record")
}

func shardReport(i, n int, start, end string, moved int64, complete bool) *migrate.ShardReport {
	return &migrate.ShardReport{Version: migrate.ReportVersion, Table: "t", Family: "f", Job: migrate.Job{Migrate: "m", TTL: []string{"ttl=24h0m0s"}, Expired: "keep"},
		Shard: scan.Shard{Index: i, Count: n}, Piece: scan.Range{Start: start, End: end}, Now: "2026-01-02T03:04:05Z",
		Complete: complete, Total: migrate.Counts{Moved: moved, Cells: moved}}
}

func TestMergeShardReports(t *testing.T) {
	a, b := shardReport(0, 2, "", "m", 3, true), shardReport(1, 2, "m", "", 4, true)
	res, err := migrate.Merge(b, a)
	require.NoError(t, err)
	assert.True(t, res.Complete)
	assert.Equal(t, int64(7), res.Total.MovedByJob())
	assert.Equal(t, 2, res.Shards)

	c := shardReport(1, 2, "m", "", 4, false)
	res, err = migrate.Merge(a, c)
	require.NoError(t, err)
	assert.False(t, res.Complete)
	assert.Equal(t, []string{"1/2"}, res.Incomplete)

	ttl := shardReport(1, 2, "m", "", 4, true)
	ttl.Job.TTL = []string{"ttl=48h0m0s"}
	dry := shardReport(1, 2, "m", "", 4, true)
	dry.DryRun = true
	gap := shardReport(1, 2, "n", "", 4, true)
	v2 := shardReport(1, 2, "m", "", 4, true)
	v2.Version = 2
	three := shardReport(1, 3, "m", "", 4, true)
	for name, tc := range map[string]struct {
		reports []*migrate.ShardReport
		want    string
	}{
		"missing":  {[]*migrate.ShardReport{a}, "missing the report of shard(s) 1/2"},
		"twice":    {[]*migrate.ShardReport{a, a, b}, "two reports of shard 0/2"},
		"ttl":      {[]*migrate.ShardReport{a, ttl}, "reports of two jobs"},
		"dry":      {[]*migrate.ShardReport{a, dry}, "dry run"},
		"gap":      {[]*migrate.ShardReport{a, gap}, "a gap between"},
		"version":  {[]*migrate.ShardReport{a, v2}, "schema version 2"},
		"count":    {[]*migrate.ShardReport{a, three}, "reports of 2 and 3 shards"},
		"nothing":  {nil, "no reports"},
		"overlaps": {[]*migrate.ShardReport{a, shardReport(1, 2, "a", "", 1, true)}, "an overlap"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := migrate.Merge(tc.reports...)
			require.ErrorIs(t, err, migrate.ErrMerge)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestWriteMetrics(t *testing.T) {
	res, err := migrate.Merge(shardReport(0, 2, "", "m", 3, true), shardReport(1, 2, "m", "", 4, false))
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, migrate.WriteMetrics(&b, res.Series()))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b.Bytes()))
	require.NoError(t, err, b.String())
	value := func(name string, labels map[string]string) float64 {
		f := fams[name]
		require.NotNil(t, f, "%s in %s", name, b.String())
	metrics:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			return m.GetGauge().GetValue()
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	l := map[string]string{"table": "t", "family": "f", "target": "f", "shard": "all"}
	assert.Equal(t, 7.0, value(migrate.MetricCells, map[string]string{"shard": "all", "outcome": "moved"}))
	assert.Equal(t, 0.0, value(migrate.MetricComplete, l))
	assert.Equal(t, 0.0, value(migrate.MetricDryRun, l))
	assert.Equal(t, float64(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Unix()), value(migrate.MetricTimestamp, l))
	assert.ErrorIs(t, migrate.WriteMetrics(&b, res.Series(), res.Series()), migrate.ErrMetrics)

	js, err := json.Marshal(res)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"moved":7`)
}

// A writer already switched to the target deletes or overwrites a copied
// cell: the copy run after the switch (step 6) copied its source back
// (the deletion undone, the overwrite a collision) unless the change went
// through the Mirror, which also removes the source.
func TestSwitchedWriterChangesSurviveTheLastCopy(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged(), "g": strategy.Unmanaged()}))
	tbl := h.Raw.Open("t")
	ts := bigtable.Time(h.Clock.Now().Add(-time.Hour)).TruncateToMilliseconds()
	shift := bigtable.Timestamp(24 * time.Hour / time.Microsecond)
	for _, row := range []string{"plain", "mirrored", "overwritten"} {
		m := bigtable.NewMutation()
		m.Set("f", "a", ts, []byte(row))
		require.NoError(t, tbl.Apply(ctx, row, m))
	}
	plan := migrate.Plan{Family: "f", From: strategy.DefaultExpiry(48 * time.Hour), To: strategy.DefaultExpiry(24 * time.Hour), ToFamily: "g"}
	run := func() migrate.Stats {
		mg, err := migrate.New(tbl, "t", plan, migrate.WithClock(h.Clock))
		require.NoError(t, err)
		rep, err := mg.Run(ctx)
		require.NoError(t, err)
		return rep.Stats
	}
	require.Equal(t, int64(3), run().Moved)
	mirror, err := migrate.NewMirror(plan)
	require.NoError(t, err)
	plain := bigtable.NewMutation()
	plain.DeleteTimestampRange("g", "a", ts+shift, ts+shift+1000)
	require.NoError(t, tbl.Apply(ctx, "plain", plain))
	m := bigtable.NewMutation()
	mirror.DeleteTargetTimestampRange(m, "mirrored", "a", ts+shift, ts+shift+1000)
	require.NoError(t, tbl.Apply(ctx, "mirrored", m))
	m = bigtable.NewMutation()
	mirror.SetTarget(m, "overwritten", "a", ts+shift, []byte("new"))
	require.NoError(t, tbl.Apply(ctx, "overwritten", m))

	st := run()
	assert.Equal(t, int64(1), st.Moved, "the plain deletion is undone by the copy")
	assert.Zero(t, st.Collisions, "the mirrored overwrite left no source to collide")
	assert.Equal(t, map[key]string{{"plain", "a", ts + shift}: "plain", {"overwritten", "a", ts + shift}: "new"}, stored(t, tbl, "g"))
}

// A shard's report records its run too (-report without a checkpoint).
func TestCheckEarlierRunsReadsReports(t *testing.T) {
	h, tbl, now, _ := rowTable(t)
	ctx := context.Background()
	load(t, tbl, "f", 10, 2, now, day)
	h.Clock.Set(now.Add(time.Second))
	mg, err := migrate.New(tbl, "t", inPlace(now, 30*day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	rep, err := mg.Run(ctx)
	require.NoError(t, err)
	b, err := json.Marshal(mg.ShardReport(rep))
	require.NoError(t, err)
	longer, err := migrate.New(tbl, "t", inPlace(now, 60*day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	err = longer.CheckEarlierRuns(map[string][]byte{"report": b})
	require.ErrorIs(t, err, migrate.ErrTTLChanged, "%s", b)
	var te *migrate.TTLChangeError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, int64(20), te.Moved)
}
