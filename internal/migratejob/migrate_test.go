package migratejob_test

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
	migrate "github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/strategy"
)

// key is one stored cell: row, qualifier, timestamp.
type key struct {
	row, col string
	ts       bigtable.Timestamp
}

// stored is every cell of family fam in table, unfiltered (what is
// physically there), by key. A key seen twice fails the test: no cell
// may be duplicated.
func stored(t *testing.T, tbl *bigtable.Table, fam string) map[key]string {
	t.Helper()
	out := map[key]string{}
	err := tbl.ReadRows(context.Background(), bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		for _, it := range r[fam] {
			k := key{it.Row, it.Column[len(fam)+1:], it.Timestamp}
			if _, dup := out[k]; dup {
				t.Errorf("cell %v stored twice", k)
			}
			out[k] = string(it.Value)
		}
		return true
	}, bigtable.RowFilter(bigtable.FamilyFilter("^"+fam+"$")))
	require.NoError(t, err)
	return out
}

// load writes rows*cols cells of family fam with real timestamps spread
// over the last span (whole milliseconds, all distinct per column) and
// returns them.
func load(t *testing.T, tbl *bigtable.Table, fam string, rows, cols int, now time.Time, span time.Duration) map[key]string {
	t.Helper()
	ctx := context.Background()
	want := map[key]string{}
	const batch = 500
	for lo := 0; lo < rows; lo += batch {
		var keys []string
		var muts []*bigtable.Mutation
		for r := lo; r < min(lo+batch, rows); r++ {
			m := bigtable.NewMutation()
			row := fmt.Sprintf("row%07d", r)
			for c := 0; c < cols; c++ {
				ago := time.Duration(1+(r*cols+c)%int(span/time.Second)) * time.Second
				ts := bigtable.Time(now.Add(-ago)).TruncateToMilliseconds()
				col := fmt.Sprintf("c%02d", c)
				v := fmt.Sprintf("%s/%s", row, col)
				m.Set(fam, col, ts, []byte(v))
				want[key{row, col, ts}] = v
			}
			keys = append(keys, row)
			muts = append(muts, m)
		}
		errs, err := tbl.ApplyBulk(ctx, keys, muts)
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
	}
	return want
}

// shifted is model with every timestamp moved by d.
func shifted(model map[key]string, d time.Duration) map[key]string {
	out := make(map[key]string, len(model))
	for k, v := range model {
		k.ts += bigtable.Timestamp(d / time.Microsecond)
		out[k] = v
	}
	return out
}

const day = 24 * time.Hour

// rowTable is an in-process server with table "t", family "f" without a
// GC rule, its clock's now and at(d), now + d in whole milliseconds.
func rowTable(t *testing.T) (*bttestharness.Harness, *bigtable.Table, time.Time, func(time.Duration) bigtable.Timestamp) {
	t.Helper()
	h := bttestharness.New(t)
	require.NoError(t, h.CreateTable(context.Background(), "t", strategy.Schema{"f": strategy.Unmanaged()}))
	now := h.Clock.Now()
	return h, h.Raw.Open("t"), now, func(d time.Duration) bigtable.Timestamp { return bigtable.Time(now.Add(d)).TruncateToMilliseconds() }
}

// testSkew is the clock skew the tests allow: shorter than the second
// between the newest legacy cell load writes and the switch.
const testSkew = 500 * time.Millisecond

// inPlace is the plan real timestamps -> one-second in place with every
// writer switched at once, at switched.
func inPlace(switched time.Time, ttl time.Duration) migrate.Plan {
	return migrate.Plan{Family: "f", From: strategy.Unmanaged(), To: strategy.OneSecond(),
		TTL: migrate.TTLRules{{TTL: ttl}}, FirstSwitch: switched, WrittenBefore: switched, ClockSkew: testSkew}
}

func TestRealToOneSecondInPlaceIsIdempotent(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "events", strategy.Schema{"f": strategy.Unmanaged()}))
	tbl := h.Raw.Open("events")
	const table = "events"
	now := h.Clock.Now()
	model := load(t, tbl, "f", 50, 4, now, 10*day)
	plan := inPlace(now, 30*day)
	h.Clock.Set(now.Add(time.Second)) // past WrittenBefore + ClockSkew

	dry, err := migrate.New(tbl, table, plan, migrate.WithClock(h.Clock), migrate.WithDryRun())
	require.NoError(t, err)
	rep, err := dry.Run(ctx)
	require.NoError(t, err)
	st := rep.Stats
	assert.Equal(t, int64(200), st.Moved, "dry run counts what it would move")
	assert.Len(t, st.Examples, 5)
	assert.Equal(t, model, stored(t, tbl, "f"), "a dry run writes nothing")

	m, err := migrate.New(tbl, table, plan, migrate.WithClock(h.Clock))
	require.NoError(t, err)
	rep, err = m.Run(ctx)
	require.NoError(t, err)
	st = rep.Stats
	assert.Equal(t, migrate.Stats{Rows: 50, Cells: 200, Moved: 200, Examples: st.Examples}, st)
	assert.Equal(t, shifted(model, 30*day), stored(t, tbl, "f"), "every cell at its old timestamp + 30 days")

	m2, err := migrate.New(tbl, table, plan, migrate.WithClock(h.Clock))
	require.NoError(t, err)
	rep, err = m2.Run(ctx)
	require.NoError(t, err)
	st = rep.Stats
	assert.Equal(t, int64(0), st.Changes(), "a second run changes nothing")
	assert.Equal(t, int64(200), st.OnTarget)
	assert.Equal(t, shifted(model, 30*day), stored(t, tbl, "f"))
}

// Cells already expired under the target (written more than the TTL ago,
// or bttl cells whose expiry passed) are kept by default, counted and
// shown; deleted only with DeleteExpired, ExpiredAsOf and the count the
// dry run reported, and a run expecting another count writes nothing.
func TestExpiredCellsKeptUnlessDeletionConfirmed(t *testing.T) {
	h, tbl, now, at := rowTable(t)
	ctx := context.Background()
	const table = "t"
	m := bigtable.NewMutation()
	m.Set("f", "old", at(-3*day), []byte("expired a day ago"))
	m.Set("f", "new", at(-day), []byte("live for a day"))
	m.Set("f", "bttl-expired", at(-time.Minute), []byte("a bttl write whose expiry passed"))
	m.Set("f", "bttl-live", at(time.Hour), []byte("a bttl write"))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	plan := inPlace(now.Add(-time.Hour), 2*day)

	run := func(p migrate.Plan, opts ...migrate.Option) (*migrate.Report, error) {
		mg, err := migrate.New(tbl, table, p, append([]migrate.Option{migrate.WithClock(h.Clock)}, opts...)...)
		require.NoError(t, err)
		return mg.Run(ctx)
	}
	dry, err := run(plan, migrate.WithDryRun())
	require.NoError(t, err)
	assert.Equal(t, int64(2), dry.ExpiredLeft, "the dry run counts them")
	assert.Equal(t, now, dry.Now)
	var shown []string
	for _, x := range dry.Examples {
		if x.Expired {
			shown = append(shown, x.Column)
		}
	}
	assert.ElementsMatch(t, []string{"old", "bttl-expired"}, shown)

	rep, err := run(plan)
	require.NoError(t, err)
	assert.Equal(t, dry.Stats.ExpiredLeft, rep.ExpiredLeft, "dry and real runs count the same")
	assert.Equal(t, int64(1), rep.Moved)
	assert.Equal(t, int64(1), rep.OnTarget)
	assert.Zero(t, rep.ExpiredDeleted, "kept by default")
	got := stored(t, tbl, "f")
	assert.Len(t, got, 4)
	assert.Equal(t, "expired a day ago", got[key{"r", "old", at(-3 * day)}])
	assert.Equal(t, "live for a day", got[key{"r", "new", at(day)}])

	del := plan
	del.Expired, del.ExpiredAsOf, del.ExpectExpired = migrate.DeleteExpired, dry.Now, 1
	h.Clock.Set(now.Add(time.Hour)) // later: more could have expired, not as of the dry run
	_, err = run(del)
	var ce *migrate.ExpiredCountError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, migrate.ErrExpiredCount)
	assert.Equal(t, int64(2), ce.Found)
	assert.Equal(t, got, stored(t, tbl, "f"), "a count mismatch writes nothing")

	del.ExpectExpired = 2
	rep, err = run(del)
	require.NoError(t, err)
	assert.Equal(t, int64(2), rep.ExpiredDeleted)
	got = stored(t, tbl, "f")
	assert.Equal(t, map[key]string{{"r", "new", at(day)}: "live for a day", {"r", "bttl-live", at(time.Hour)}: "a bttl write"}, got)
}

// A cell changed after the row was read is skipped and counted; a new
// timestamp another cell holds is not overwritten; a value too large to
// pin is counted and not moved. A rerun finds what is still to do.
func TestSkipsWhatItMustNotTouch(t *testing.T) {
	h, tbl, now, at := rowTable(t)
	ctx := context.Background()
	const table = "t"
	m := bigtable.NewMutation()
	m.Set("f", "changed", at(-time.Hour), []byte("old value"))
	m.Set("f", "collide", at(-time.Hour), []byte("legacy"))
	m.Set("f", "collide", at(-time.Hour+day), []byte("a bttl write at the very same expiry"))
	m.Set("f", "large", at(-time.Hour), bytes.Repeat([]byte("x"), 11<<10))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	plan := inPlace(now.Add(-time.Minute), day)
	mg, err := migrate.New(tbl, table, plan, migrate.WithClock(h.Clock))
	require.NoError(t, err)
	row, err := tbl.ReadRow(ctx, "r", bigtable.RowFilter(mg.Filter()))
	require.NoError(t, err)
	// A writer replaces the cell between the read and the move.
	w := bigtable.NewMutation()
	w.DeleteCellsInColumn("f", "changed")
	w.Set("f", "changed", at(-time.Hour), []byte("new value"))
	require.NoError(t, tbl.Apply(ctx, "r", w))
	require.NoError(t, mg.MigrateRow(ctx, row))
	st := mg.Stats()
	assert.Equal(t, int64(1), st.Changed)
	assert.Equal(t, int64(1), st.Collisions)
	assert.Equal(t, int64(1), st.TooLargeToPin)
	assert.Equal(t, int64(1), st.OnTarget)
	assert.Equal(t, int64(0), st.Moved)
	assert.Equal(t, int64(3), st.Unmoved())
	got := stored(t, tbl, "f")
	assert.Equal(t, "new value", got[key{"r", "changed", at(-time.Hour)}], "the writer's value is untouched")
	assert.Equal(t, "a bttl write at the very same expiry", got[key{"r", "collide", at(-time.Hour + day)}])
	assert.Equal(t, "legacy", got[key{"r", "collide", at(-time.Hour)}])
	assert.Len(t, got, 4)

	// A rerun moves the writer's value (it carries a real timestamp too).
	mg, err = migrate.New(tbl, table, plan, migrate.WithClock(h.Clock))
	require.NoError(t, err)
	rep, err := mg.Run(ctx)
	require.NoError(t, err)
	st = rep.Stats
	assert.Equal(t, int64(1), st.Moved)
	assert.Equal(t, "new value", stored(t, tbl, "f")[key{"r", "changed", at(-time.Hour + day)}])
}

func TestPlanValidate(t *testing.T) {
	now := time.Now()
	ok := migrate.Plan{Family: "f", From: strategy.Unmanaged(), To: strategy.OneSecond(), TTL: migrate.TTLRules{{TTL: day}},
		FirstSwitch: now.Add(-time.Hour), WrittenBefore: now.Add(-time.Minute)}
	require.NoError(t, ok.Validate())
	for name, c := range map[string]struct {
		field string
		edit  func(p *migrate.Plan)
	}{
		"no family":        {"Family", func(p *migrate.Plan) { p.Family = "" }},
		"bad family":       {"Family", func(p *migrate.Plan) { p.Family = "a b" }},
		"same family":      {"ToFamily", func(p *migrate.Plan) { p.ToFamily = "f" }},
		"sequence source":  {"From", func(p *migrate.Plan) { p.From = strategy.Sequence(2) }},
		"sequence target":  {"To", func(p *migrate.Plan) { p.To = strategy.Sequence(2) }},
		"unmanaged target": {"To", func(p *migrate.Plan) { p.To = strategy.Unmanaged() }},
		"no cutoff":        {"WrittenBefore", func(p *migrate.Plan) { p.WrittenBefore = time.Time{} }},
		"ancient cutoff":   {"WrittenBefore", func(p *migrate.Plan) { p.WrittenBefore = time.Unix(5, 0) }},
		"cutoff in a copy": {"WrittenBefore", func(p *migrate.Plan) { p.ToFamily = "g" }},
		"no first switch":  {"FirstSwitch", func(p *migrate.Plan) { p.FirstSwitch = time.Time{} }},
		"first after last": {"FirstSwitch", func(p *migrate.Plan) { p.FirstSwitch = now }},
		"negative skew":    {"ClockSkew", func(p *migrate.Plan) { p.ClockSkew = -time.Second }},
		"write time complete without write times": {"WriteTimeComplete", func(p *migrate.Plan) { p.WriteTimeComplete = true }},
		"delete without the dry run's instant":    {"ExpiredAsOf", func(p *migrate.Plan) { p.Expired = migrate.DeleteExpired }},
		"a count to keep":                         {"Expired", func(p *migrate.Plan) { p.ExpectExpired = 3 }},
		"delete in a copy": {"Expired", func(p *migrate.Plan) {
			p.ToFamily, p.FirstSwitch, p.WrittenBefore = "g", time.Time{}, time.Time{}
			p.Expired, p.ExpiredAsOf = migrate.DeleteExpired, now
		}},
		"default in place": {"ToFamily", func(p *migrate.Plan) { p.To = strategy.DefaultExpiry(day) }},
		"D to D' in place": {"ToFamily", func(p *migrate.Plan) {
			p.From, p.To, p.TTL = strategy.DefaultExpiry(day), strategy.DefaultExpiry(2*day), nil
		}},
		"TTL on an age source": {"TTL", func(p *migrate.Plan) {
			p.From = strategy.DefaultExpiry(day)
			p.ToFamily = "g"
			p.FirstSwitch, p.WrittenBefore = time.Time{}, time.Time{}
		}},
		"bad action": {"Expired", func(p *migrate.Plan) { p.Expired = 7 }},
	} {
		p := ok
		c.edit(&p)
		err := p.Validate()
		var pe *migrate.PlanError
		if assert.ErrorAs(t, err, &pe, name) {
			assert.ErrorIs(t, err, migrate.ErrInvalidPlan, name)
			assert.Equal(t, c.field, pe.Field, "%s: %v", name, err)
		}
	}
	p := ok
	p.TTL = migrate.TTLRules{{Prefix: "a", TTL: day}}
	assert.ErrorIs(t, p.Validate(), migrate.ErrInvalidTTLRule)
	for name, edit := range map[string]func(p *migrate.Plan){
		"a cutoff in the future":         func(p *migrate.Plan) { p.WrittenBefore = now.Add(time.Hour) },
		"a cutoff within the clock skew": func(p *migrate.Plan) { p.WrittenBefore = now.Add(-migrate.DefaultClockSkew / 2) },
	} {
		p = ok
		edit(&p)
		require.NoError(t, p.Validate(), name)
		_, err := migrate.New(nil, "t", p, migrate.WithClock(fixedClock(now)))
		var pe *migrate.PlanError
		require.True(t, errors.As(err, &pe), "%s: %v", name, err)
		assert.Equal(t, "WrittenBefore", pe.Field, "%s is refused", name)
	}
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// The window decides: a cell stamped at or before FirstSwitch - ClockSkew
// is a real write time and moves; one after WrittenBefore + ClockSkew is
// a bttl expiry instant and stays; one in between is ambiguous, counted
// with an example, untouched, and makes the run incomplete. A write-time
// companion proves a bttl cell inside the window.
func TestWindowBoundsDecideProvenance(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	wt := strategy.OneSecond(strategy.WithWriteTime())
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	tbl := h.Raw.Open("t")
	t1 := h.Clock.Now() // whole milliseconds
	t2 := t1.Add(10 * time.Minute)
	const skew = 2 * time.Second
	ms := func(tm time.Time) bigtable.Timestamp { return bigtable.Time(tm) }
	lo, hi := ms(t1.Add(-skew)), ms(t2.Add(skew))
	m := bigtable.NewMutation()
	m.Set("f", "at-lo", lo, []byte("legacy"))
	m.Set("f", "after-lo", lo+1000, []byte("?"))
	m.Set("f", "at-hi", hi, []byte("?"))
	m.Set("f", "after-hi", hi+1000, []byte("bttl"))
	m.Set("f", "proven", lo+5000, []byte("bttl with a companion"))
	m.Set("f", strategy.WriteTimeColumn("proven"), lo+5000, strategy.WriteTimeValue(lo+4000))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	before := stored(t, tbl, "f")
	h.Clock.Set(t2.Add(time.Minute))
	plan := migrate.Plan{Family: "f", From: strategy.Unmanaged(), To: wt, TTL: migrate.TTLRules{{TTL: day}},
		FirstSwitch: t1, WrittenBefore: t2, ClockSkew: skew}
	mg, err := migrate.New(tbl, "t", plan, migrate.WithClock(h.Clock))
	require.NoError(t, err)
	rep, err := mg.Run(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), rep.Moved)
	assert.Equal(t, int64(2), rep.Ambiguous)
	assert.Equal(t, int64(2), rep.ExpiredLeft, "after-hi and proven are bttl cells whose expiry passed: kept")
	assert.Equal(t, int64(2), rep.Unmoved())
	var amb []string
	for _, x := range rep.AmbiguousExamples {
		amb = append(amb, fmt.Sprintf("%s@%d", x.Column, x.Old))
	}
	assert.ElementsMatch(t, []string{fmt.Sprintf("after-lo@%d", lo+1000), fmt.Sprintf("at-hi@%d", hi)}, amb)
	want := map[key]string{}
	for k, v := range before {
		if k.col == "at-lo" {
			k.ts += bigtable.Timestamp(day / time.Microsecond)
		}
		want[k] = v
	}
	assert.Equal(t, want, stored(t, tbl, "f"))

	// The operator vouches that every bttl writer recorded write times:
	// the window's cells without a companion are legacy.
	plan.WriteTimeComplete = true
	mg, err = migrate.New(tbl, "t", plan, migrate.WithClock(h.Clock))
	require.NoError(t, err)
	rep, err = mg.Run(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), rep.Moved)
	assert.Zero(t, rep.Unmoved())
	got := stored(t, tbl, "f")
	assert.Equal(t, "?", got[key{"r", "after-lo", lo + 1000 + bigtable.Timestamp(day/time.Microsecond)}])
	assert.Equal(t, "bttl with a companion", got[key{"r", "proven", lo + 5000}])
}

// A write landing on a cell's new timestamp after the row was read is not
// replaced by the move: the predicate also requires the target slot to be
// empty. The old cell stays, counted as changed meanwhile.
func TestWriteOnTheNewTimestampMeanwhileIsKept(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	tbl := h.Raw.Open("t")
	now := h.Clock.Now()
	old := bigtable.Time(now.Add(-time.Hour))
	m := bigtable.NewMutation()
	m.Set("f", "c", old, []byte("legacy"))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	mg, err := migrate.New(tbl, "t", inPlace(now.Add(-time.Minute), day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	row, err := tbl.ReadRow(ctx, "r", bigtable.RowFilter(mg.Filter()))
	require.NoError(t, err)
	w := bigtable.NewMutation()
	w.Set("f", "c", old+bigtable.Timestamp(day/time.Microsecond), []byte("a bttl write at that very expiry"))
	require.NoError(t, tbl.Apply(ctx, "r", w))
	require.NoError(t, mg.MigrateRow(ctx, row))
	assert.Equal(t, int64(1), mg.Stats().Changed)
	assert.Equal(t, int64(0), mg.Stats().Moved)
	assert.Equal(t, map[key]string{
		{"r", "c", old}: "legacy",
		{"r", "c", old + bigtable.Timestamp(day/time.Microsecond)}: "a bttl write at that very expiry",
	}, stored(t, tbl, "f"))
}

// A FirstSwitch before 1678 (a year typed wrong) is before RealTimeFloor
// and refused, as any ancient one is. Fails before the fix: the check went
// through time.Time.UnixNano, which wraps such a year decades ahead (1500
// to 2084), so it passed, and the window then made every cell up to
// WrittenBefore a legacy write: a bttl cell whose expiry had passed was
// re-stamped TTL later, live again.
func TestFirstSwitchBeforeNanosecondRangeIsRefused(t *testing.T) {
	h, tbl, now, at := rowTable(t)
	ctx := context.Background()
	m := bigtable.NewMutation()
	// Stamped between the writers' switches: its expiry, two hours ago.
	m.Set("f", "bttl-expired", at(-2*time.Hour), []byte("a bttl write whose expiry passed"))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	before := stored(t, tbl, "f")
	plan := inPlace(now.Add(-time.Hour), 2*day)
	plan.FirstSwitch = time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)
	mg, err := migrate.New(tbl, "t", plan, migrate.WithClock(h.Clock))
	if err == nil {
		_, err := mg.Run(ctx)
		require.NoError(t, err)
		t.Fatalf("FirstSwitch %s accepted; the table went from %v to %v", plan.FirstSwitch, before, stored(t, tbl, "f"))
	}
	var pe *migrate.PlanError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "FirstSwitch", pe.Field)
}

// A cell a writer deletes between the read and the move leaves nothing to do:
// counted Gone, not Changed, not in Unmoved, so a run beside a live writer
// that deletes is complete (its range finished, exit 0). A cell a writer
// rewrote at the same timestamp still needs its move: Changed, in Unmoved
// (issue 35, 4).
func TestACellDeletedByAWriterLeavesNothingToDo(t *testing.T) {
	h, tbl, now, at := rowTable(t)
	ctx := context.Background()
	m := bigtable.NewMutation()
	for _, c := range []string{"a", "deleted", "rewritten"} {
		m.Set("f", c, at(-time.Hour), []byte("legacy "+c))
	}
	require.NoError(t, tbl.Apply(ctx, "r", m))
	mg, err := migrate.New(tbl, "t", inPlace(now.Add(-time.Minute), day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	row, err := tbl.ReadRow(ctx, "r", bigtable.RowFilter(mg.Filter()))
	require.NoError(t, err)
	w := bigtable.NewMutation()
	w.DeleteCellsInColumn("f", "deleted")
	require.NoError(t, tbl.Apply(ctx, "r", w))
	require.NoError(t, mg.MigrateRow(ctx, row))
	st := mg.Stats()
	assert.Equal(t, int64(2), st.Moved)
	assert.Equal(t, int64(1), st.Gone)
	assert.Zero(t, st.Changed)
	assert.Zero(t, st.Unmoved(), "nothing left to do")

	m = bigtable.NewMutation()
	m.Set("f", "late", at(-time.Hour), []byte("legacy"))
	require.NoError(t, tbl.Apply(ctx, "r2", m))
	mg, err = migrate.New(tbl, "t", inPlace(now.Add(-time.Minute), day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	row, err = tbl.ReadRow(ctx, "r2", bigtable.RowFilter(mg.Filter()))
	require.NoError(t, err)
	w = bigtable.NewMutation()
	w.Set("f", "late", at(-time.Hour), []byte("a writer's value"))
	require.NoError(t, tbl.Apply(ctx, "r2", w))
	require.NoError(t, mg.MigrateRow(ctx, row))
	st = mg.Stats()
	assert.Equal(t, int64(1), st.Changed, "rewritten in place: still to move")
	assert.Zero(t, st.Gone)
	assert.Equal(t, int64(1), st.Unmoved())
}
