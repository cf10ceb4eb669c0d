package migratejob_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// A copy from a family keeping n versions per column reads every stored
// cell, the versions its rule made dead (hidden by the TTL filter, left
// by GC until it runs) included, and copies them: a target keeping more
// versions (or all) served them again, and a Mirror cannot carry the
// versions a writer's new Set pushes out of the source's n. Such a plan
// is refused; a target keeping at most n serves what the source served.
func TestCopyFromAVersionsLimitedFamilyServesNoDeadVersion(t *testing.T) {
	from := strategy.DefaultExpiry(48*time.Hour, strategy.WithMaxVersions(1))
	for _, tc := range []struct {
		name    string
		to      strategy.Policy
		refused bool
	}{
		{"all versions", strategy.DefaultExpiry(24 * time.Hour), true},
		{"more versions", strategy.DefaultExpiry(24*time.Hour, strategy.WithMaxVersions(2)), true},
		{"as many", strategy.DefaultExpiry(24*time.Hour, strategy.WithMaxVersions(1)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true}) // GC is lazy: the dead version is stored
			require.NoError(t, err)
			t.Cleanup(func() { _ = h.Close() })
			ctx := context.Background()
			schema := strategy.Schema{"f": from, "g": tc.to}
			require.NoError(t, h.CreateTable(ctx, "t", schema))
			raw := h.Raw.Open("t")
			now := h.Clock.Now()
			at := func(d time.Duration) bigtable.Timestamp { return bigtable.Time(now.Add(d)).TruncateToMilliseconds() }
			m := bigtable.NewMutation()
			m.Set("f", "c", at(-2*time.Hour), []byte("old"))
			m.Set("f", "c", at(-time.Hour), []byte("new"))
			require.NoError(t, raw.Apply(ctx, "r", m))
			tbl, err := h.Client.Open(ctx, "t", schema)
			require.NoError(t, err)
			served := func(fam string) []string {
				row, err := tbl.ReadRow(ctx, "r")
				require.NoError(t, err)
				var out []string
				for _, it := range row[fam] {
					out = append(out, string(it.Value))
				}
				return out
			}
			require.Equal(t, []string{"new"}, served("f"), "the source serves its one version")

			plan := migrate.Plan{Family: "f", From: from, To: tc.to, ToFamily: "g"}
			if err := plan.Validate(); err != nil || tc.refused {
				require.ErrorIs(t, err, migrate.ErrInvalidPlan, "a target keeping more versions than the source")
				var pe *migrate.PlanError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, "To", pe.Field)
				_, err = migrate.NewMirror(plan)
				assert.ErrorIs(t, err, migrate.ErrInvalidPlan)
				return
			}
			mg, err := migrate.New(raw, "t", plan, migrate.WithClock(h.Clock))
			require.NoError(t, err)
			rep, err := mg.Run(ctx)
			require.NoError(t, err)
			assert.Equal(t, []string{"new"}, served("g"), "the target serves what the source served (copied %d)", rep.Moved)
		})
	}
}

// In place, a legacy family whose GC rule keeps n versions per column
// stores, until GC runs, the versions the rule made dead; moved to their
// expiry instant they were live again under the one-second rule (an
// overwritten value served for its whole TTL). They are left where they
// are and counted as expired: the current rule collects them, or the
// one-second rule once applied, or -expired delete with the dry run's
// count.
func TestInPlaceMoveLeavesTheVersionsTheSourceRuleMadeDead(t *testing.T) {
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true}) // GC is lazy: the dead version is stored
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	// The legacy family keeps one version, as `cbt createfamily` with
	// maxversions=1 makes it (created with the rule: bttest runs no GC).
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t",
		ColumnFamilies: map[string]bigtable.Family{"f": {GCPolicy: bigtable.MaxVersionsGCPolicy(1)}}}))
	raw := h.Raw.Open("t")
	now := h.Clock.Now()
	at := func(d time.Duration) bigtable.Timestamp { return bigtable.Time(now.Add(d)).TruncateToMilliseconds() }
	m := bigtable.NewMutation()
	m.Set("f", "c", at(-2*time.Hour), []byte("old"))
	m.Set("f", "c", at(-time.Hour), []byte("new"))
	m.Set("f", "d", at(-time.Hour), []byte("only"))
	require.NoError(t, raw.Apply(ctx, "r", m))
	h.Clock.Set(now.Add(time.Second))

	plan := inPlace(now, 30*day)
	plan.SourceMaxVersions = 1
	run := func(p migrate.Plan, opts ...migrate.Option) *migrate.Report {
		mg, err := migrate.New(raw, "t", p, append([]migrate.Option{migrate.WithClock(h.Clock)}, opts...)...)
		require.NoError(t, err)
		rep, err := mg.Run(ctx)
		require.NoError(t, err)
		return rep
	}
	dry := run(plan, migrate.WithDryRun())
	assert.Equal(t, int64(2), dry.Moved)
	assert.Equal(t, int64(1), dry.ExpiredLeft, "the dead version is counted as expired")
	rep := run(plan)
	assert.Equal(t, int64(2), rep.Moved)

	// Read as the schema's rule will serve it once applied (one-second,
	// every version kept; not applied here, so nothing is collected).
	tbl, err := h.Client.Open(ctx, "t", strategy.Schema{"f": strategy.OneSecond()}, ttlclient.WithoutVerify())
	require.NoError(t, err)
	row, err := tbl.ReadRow(ctx, "r")
	require.NoError(t, err)
	var served []string
	for _, it := range row["f"] {
		served = append(served, string(it.Value))
	}
	assert.Equal(t, []string{"new", "only"}, served, "the overwritten value stays dead")

	// Deleting the expired cells deletes the dead version, counted.
	del := plan
	del.Expired, del.ExpiredAsOf, del.ExpectExpired = migrate.DeleteExpired, dry.Now, dry.ExpiredLeft
	rep = run(del)
	assert.Equal(t, int64(1), rep.ExpiredDeleted)
	stored, err := h.Stored(ctx, "t", "r")
	require.NoError(t, err)
	assert.Len(t, stored["f"], 2, "the two live cells, moved")
}

// In a single-value family every Set through bttl (or the wire guard)
// deletes the column's older cells first. The Mirror carried only the
// Set's own slot to the other family: a source Set left the copies of
// the source's deleted versions in the target (served there), and a
// switched writer's SetTarget left the source's other versions, which the
// next copy run copied back over the last write. The Mirror deletes the
// other family's column too.
func TestMirrorCarriesASingleValueSetsColumnDelete(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to strategy.Policy
		target   bool // the writer is switched to the target family
	}{
		{"single-value source", strategy.DefaultExpiry(48*time.Hour, strategy.SingleValue()), strategy.DefaultExpiry(24 * time.Hour), false},
		{"single-value target", strategy.DefaultExpiry(48 * time.Hour), strategy.DefaultExpiry(24*time.Hour, strategy.SingleValue()), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bttestharness.New(t)
			ctx := context.Background()
			schema := strategy.Schema{"f": tc.from, "g": tc.to}
			require.NoError(t, h.CreateTable(ctx, "t", schema))
			raw := h.Raw.Open("t")
			now := h.Clock.Now()
			at := func(d time.Duration) bigtable.Timestamp { return bigtable.Time(now.Add(d)).TruncateToMilliseconds() }
			m := bigtable.NewMutation()
			m.Set("f", "c", at(-2*time.Hour), []byte("v1"))
			m.Set("f", "c", at(-time.Hour), []byte("v2"))
			require.NoError(t, raw.Apply(ctx, "r", m)) // legacy history, before single value
			plan := migrate.Plan{Family: "f", From: tc.from, To: tc.to, ToFamily: "g"}
			copyRun := func() {
				mg, err := migrate.New(raw, "t", plan, migrate.WithClock(h.Clock))
				require.NoError(t, err)
				_, err = mg.Run(ctx)
				require.NoError(t, err)
			}
			copyRun()
			mirror, err := migrate.NewMirror(plan)
			require.NoError(t, err)
			tbl, err := h.Client.Open(ctx, "t", schema)
			require.NoError(t, err)

			// The last write, through bttl, which adds the single-value
			// delete of its column.
			w := bigtable.NewMutation()
			fam := "f"
			if tc.target {
				fam = "g"
				mirror.SetTarget(w, "r", "c", at(0), []byte("last"))
			} else {
				mirror.Set(w, "r", "c", at(0), []byte("last"))
			}
			require.NoError(t, tbl.API().Apply(ctx, "r", w))
			copyRun() // step 6: copy again
			served := func(fam string) []string {
				row, err := tbl.ReadRow(ctx, "r")
				require.NoError(t, err)
				var out []string
				for _, it := range row[fam] {
					out = append(out, string(it.Value))
				}
				return out
			}
			require.Equal(t, []string{"last"}, served(fam), "the family written serves the last write only")
			assert.Equal(t, []string{"last"}, served("g"), "the target serves the last write only")
		})
	}
}
