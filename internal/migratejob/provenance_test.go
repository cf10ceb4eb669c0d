package migratejob_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// onBothServers runs f on the in-process server and on cbtemulator (a
// subtest each; the emulator's skips, or fails in CI, without the binary).
func onBothServers(t *testing.T, f func(t *testing.T, h *bttestharness.Harness)) {
	t.Run("bttest", func(t *testing.T) { f(t, bttestharness.New(t)) })
	t.Run("cbtemulator", func(t *testing.T) { f(t, onEmulator(t, bttestharness.Config{})) })
}

// countsOf is st without its examples: what a dry run and a real run must
// agree on.
func countsOf(st migrate.Stats) migrate.Stats {
	st.Examples, st.AmbiguousExamples = nil, nil
	return st
}

// Acceptance (issue 29, 1): writers switched one by one. Writer A (bttl)
// writes a 1-minute token at t0, legacy writer B writes at t0+5m and
// switches at t0+10m; migrate runs at t0+20m with a 30-day TTL. The
// token, expired since t0+1m, is never revived: with write times recorded
// (and the operator vouching that every bttl writer records them) it is
// proven a bttl cell and kept expired while every legacy cell moves;
// without that evidence the token and B's t0+5m cell are ambiguous,
// reported and left as they are. A -written-before set too early deletes
// nothing. In each case a dry run reports the same counts as the run.
func TestStaggeredWritersNeverReviveAnExpiredToken(t *testing.T) {
	for _, tc := range []struct {
		name          string
		policy        strategy.Policy
		complete      bool
		writtenBefore time.Duration // after t0
		// want: moved (of legacy cells), ambiguous, expired kept
		moved, ambiguous, expired int64
	}{
		{"write times recorded", strategy.OneSecond(strategy.WithWriteTime()), true, 10 * time.Minute, 3, 0, 1},
		{"no evidence", strategy.OneSecond(), false, 10 * time.Minute, 2, 2, 0},
		// B's t0+5m cell then reads as a bttl expiry instant already
		// past: kept (never deleted by default), the token ambiguous.
		{"written-before too early", strategy.OneSecond(), false, 2 * time.Minute, 2, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onBothServers(t, func(t *testing.T, h *bttestharness.Harness) {
				ctx := context.Background()
				require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
				raw := h.Raw.Open("t")
				schema := ttlclient.Schema{"f": tc.policy}
				t0 := h.Clock.Now()
				legacyWrite := func(row string, at time.Time) bigtable.Timestamp {
					ts := bigtable.Time(at).TruncateToMilliseconds()
					m := bigtable.NewMutation()
					m.Set("f", "v", ts, []byte(row))
					require.NoError(t, raw.Apply(ctx, row, m))
					return ts
				}
				// B's history, before any writer switched.
				legacyWrite("b-1d", t0.Add(-day))
				legacyWrite("b-1h", t0.Add(-time.Hour))
				// A switched at t0: a 1-minute token.
				a, err := h.Client.Open(context.Background(), "t", schema, ttlclient.WithoutVerify())
				require.NoError(t, err)
				tok := ttlclient.NewMutation()
				tok.SetTTL("f", "v", time.Minute, []byte("token"))
				require.NoError(t, a.Apply(ctx, "token", tok))
				// B, still legacy, at t0+5m.
				h.Clock.Set(t0.Add(5 * time.Minute))
				b5 := legacyWrite("b-5m", h.Clock.Now())
				// B switched at t0+10m and writes through bttl at t0+12m.
				h.Clock.Set(t0.Add(12 * time.Minute))
				bw := ttlclient.NewMutation()
				bw.SetTTL("f", "v", time.Hour, []byte("b through bttl"))
				require.NoError(t, a.Apply(ctx, "b-bttl", bw))
				before := stored(t, raw, "f")

				h.Clock.Set(t0.Add(20 * time.Minute))
				plan := migrate.Plan{Family: "f", From: strategy.Unmanaged(), To: tc.policy, TTL: migrate.TTLRules{{TTL: 30 * day}},
					FirstSwitch: t0, WrittenBefore: t0.Add(tc.writtenBefore), WriteTimeComplete: tc.complete}
				dry, err := migrate.New(raw, "t", plan, migrate.WithClock(h.Clock), migrate.WithDryRun())
				require.NoError(t, err)
				drep, err := dry.Run(ctx)
				require.NoError(t, err)
				require.Equal(t, before, stored(t, raw, "f"), "a dry run writes nothing")
				m, err := migrate.New(raw, "t", plan, migrate.WithClock(h.Clock))
				require.NoError(t, err)
				rep, err := m.Run(ctx, scan.WithWorkers(2))
				require.NoError(t, err)
				t.Logf("%+v", countsOf(rep.Stats))
				assert.Equal(t, countsOf(drep.Stats), countsOf(rep.Stats), "a dry run and a real run report the same counts")
				assert.Equal(t, tc.moved, rep.Moved)
				assert.Equal(t, tc.ambiguous, rep.Ambiguous)
				assert.Equal(t, tc.expired, rep.ExpiredLeft)
				assert.Zero(t, rep.ExpiredDeleted, "nothing is deleted by default")
				assert.Equal(t, tc.ambiguous, rep.Unmoved(), "only ambiguous cells are left")
				for _, x := range rep.AmbiguousExamples {
					assert.Contains(t, []string{"token", "b-5m"}, x.Row, "ambiguous examples name row, column, timestamp")
					assert.Equal(t, "v", x.Column)
				}

				// The token is not readable through bttl, now or later.
				rd, err := h.Client.Open(context.Background(), "t", schema, ttlclient.WithoutVerify())
				require.NoError(t, err)
				r, err := rd.ReadRow(ctx, "token")
				require.NoError(t, err)
				assert.Empty(t, r, "the expired token stays expired")
				got := stored(t, raw, "f")
				for k, v := range got {
					if k.row == "token" && !isCompanion(k.col) {
						assert.Less(t, k.ts, bigtable.Time(t0.Add(2*time.Minute)), "the token keeps its expiry instant: %v", k)
					}
					_ = v
				}
				// Every legacy cell proven legacy is at its write time + 30 days.
				moved := map[string]bigtable.Timestamp{"b-1d": bigtable.Time(t0.Add(-day + 30*day)), "b-1h": bigtable.Time(t0.Add(-time.Hour + 30*day))}
				if tc.complete {
					moved["b-5m"] = b5 + bigtable.Timestamp(30*day/time.Microsecond)
				}
				for row, ts := range moved {
					assert.Equal(t, row, got[key{row, "v", ts}], "%s moved", row)
				}
				if !tc.complete {
					assert.Equal(t, "b-5m", got[key{"b-5m", "v", b5}], "B's cell in the window is left where it was")
				}
				assert.Len(t, got, len(before), "no cell lost or added")
			})
		})
	}
}

// without is cells without those of row.
func without(cells map[key]string, row string) map[key]string {
	out := map[key]string{}
	for k, v := range cells {
		if k.row != row {
			out[k] = v
		}
	}
	return out
}

func isCompanion(col string) bool {
	return len(col) >= len(strategy.WriteTimePrefix) && col[:len(strategy.WriteTimePrefix)] == strategy.WriteTimePrefix
}

// Acceptance (issue 29, 2): a collision left by run 1 keeps its key range
// unfinished in the checkpoint: a rerun with the same checkpoint reads it
// again and, while the collision stays, still cannot move the cell (not
// complete, counted); once the collision is cleared, a rerun moves it, and
// the next one finds every range finished.
func TestCheckpointRevisitsACollision(t *testing.T) {
	onBothServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
		raw := h.Raw.Open("t")
		now := h.Clock.Now()
		model := load(t, raw, "f", 40, 2, now, day)
		old := bigtable.Time(now.Add(-time.Hour))
		m := bigtable.NewMutation()
		m.Set("f", "c", old, []byte("legacy"))
		m.Set("f", "c", old+bigtable.Timestamp(day/time.Microsecond), []byte("a bttl write at that very expiry"))
		require.NoError(t, raw.Apply(ctx, "row0000020x", m))
		h.Clock.Set(now.Add(time.Second))
		plan := inPlace(now, day)
		ckpt := filepath.Join(t.TempDir(), "ckpt")
		run := func() *migrate.Report {
			mg, err := migrate.New(raw, "t", plan, migrate.WithClock(h.Clock), migrate.WithCheckpoint(ckpt))
			require.NoError(t, err)
			rep, err := mg.Run(ctx, scan.WithRanges(8))
			require.NoError(t, err)
			return rep
		}
		rep := run()
		assert.Equal(t, int64(1), rep.Collisions)
		assert.Equal(t, int64(len(model)), rep.Moved)
		assert.False(t, rep.Scan.Complete(), "the range holding the collision is not finished")
		b, err := os.ReadFile(ckpt)
		require.NoError(t, err)
		assert.Contains(t, string(b), `"done": false`)

		rep = run()
		assert.Equal(t, int64(1), rep.Collisions, "a rerun still cannot move it, and says so")
		assert.Equal(t, int64(1), rep.Unmoved())
		assert.Less(t, rep.Rows, int64(41), "finished ranges are not read again")
		assert.False(t, rep.Scan.Complete())

		clear := bigtable.NewMutation()
		clear.DeleteTimestampRange("f", "c", old+bigtable.Timestamp(day/time.Microsecond), old+bigtable.Timestamp(day/time.Microsecond)+1000)
		require.NoError(t, raw.Apply(ctx, "row0000020x", clear))
		rep = run()
		assert.Equal(t, int64(1), rep.Moved, "the cleared collision is moved by the rerun")
		assert.Zero(t, rep.Unmoved())
		assert.True(t, rep.Scan.Complete())
		assert.Equal(t, "legacy", stored(t, raw, "f")[key{"row0000020x", "c", old + bigtable.Timestamp(day/time.Microsecond)}])

		rep = run()
		assert.Zero(t, rep.Rows, "every range finished")
		// A range read again counts what its last run did: the moves run 1
		// made there are on the target by then.
		assert.Positive(t, rep.Earlier.Moved)
		assert.Zero(t, rep.Earlier.Unmoved())
		assert.Equal(t, shifted(model, day), without(stored(t, raw, "f"), "row0000020x"), "every other cell moved once")
	})
}
