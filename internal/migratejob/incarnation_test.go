package migratejob_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
)

// A checkpoint outlives the table it describes. The job finishes every key
// range; the table is then "restored" (deleted, re-created under the same
// name, and its cells from before the job written back with their timestamps,
// which is what a restore from a backup gives; the emulators cannot restore
// one); the same job, run again with the same checkpoint, moves what came back
// instead of resuming "every range finished" and moving nothing. A rerun
// without a restore still skips the ranges. With a file and with a Bigtable
// checkpoint, on both servers (issue 35, 1).
func TestRestoredTableIsMigratedAgain(t *testing.T) {
	onBothServers(t, func(t *testing.T, h *bttestharness.Harness) {
		for _, store := range []string{"file", "bigtable"} {
			t.Run(store, func(t *testing.T) {
				ctx := context.Background()
				table := "restored_" + store
				schema := strategy.Schema{"f": strategy.Unmanaged()}
				require.NoError(t, h.CreateTable(ctx, table, schema))
				raw := h.Raw.Open(table)
				now := h.Clock.Now()
				model := load(t, raw, "f", 60, 3, now, day)
				h.Clock.Set(now.Add(time.Second))
				ckpt := filepath.Join(t.TempDir(), "ckpt")
				sopts := []scan.Option{scan.WithRanges(6)}
				if store == "bigtable" {
					ckpt = scan.BigtableScheme + "ck_" + store
					sopts = append(sopts, scan.WithBigtableCheckpoints(h.Raw, h.Admin))
				}
				run := func() *migrate.Report {
					mg, err := migrate.New(raw, table, inPlace(now, day), migrate.WithClock(h.Clock), migrate.WithCheckpoint(ckpt))
					require.NoError(t, err)
					rep, err := mg.Run(ctx, sopts...)
					require.NoError(t, err)
					return rep
				}
				rep := run()
				require.Equal(t, int64(len(model)), rep.Moved)
				require.True(t, rep.Scan.Complete())

				rep = run()
				assert.Zero(t, rep.Rows, "no restore: every finished range is skipped")
				assert.Zero(t, rep.Undone)

				require.NoError(t, h.Admin.DeleteTable(ctx, table))
				require.NoError(t, h.CreateTable(ctx, table, schema))
				assert.Equal(t, model, load(t, raw, "f", 60, 3, now, day), "the restore wrote back the cells from before the job")

				rep = run()
				assert.Equal(t, int64(len(model)), rep.Moved, "what the restore brought back is moved again")
				// The ranges are cut at the server's SampleRowKeys points,
				// which both emulators pick at random among the row keys:
				// when the first row is one, the range before it holds no
				// row, moved nothing and has no witness to find gone
				// (Unproven, read again).
				withRows := 0
				for _, r := range rep.Scan.Ranges {
					for k := range model {
						if r.Range.Contains(k.row) {
							withRows++
							break
						}
					}
				}
				assert.Equal(t, withRows, rep.Undone, "every finished range's last move is gone")
				assert.Equal(t, len(rep.Scan.Ranges)-withRows, rep.Unproven, "a range that held no row proves nothing")
				assert.True(t, rep.Scan.Complete())
				assert.Equal(t, shifted(model, day), stored(t, raw, "f"), "every cell moved once, none left at its write time")
			})
		}
	})
}

// A deletion run stopped midway and restarted with the same flags and
// checkpoint resumes: it is no longer refused because fewer expired cells are
// left than the dry run counted (earlier runs deleted some). What is left plus
// what the checkpoint records deleted must stay within the count; in all,
// exactly the dry run's cells are deleted (issue 35, 4).
func TestRestartedDeletionRunResumes(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	raw := h.Raw.Open("t")
	now := h.Clock.Now()
	model := load(t, raw, "f", 1500, 1, now, 10*day) // written over the last 1500 s: with a 750 s TTL half expired
	h.Clock.Set(now.Add(time.Second))
	const ttl = 750 * time.Second
	plan := inPlace(now, ttl)
	dry, err := migrate.New(raw, "t", plan, migrate.WithClock(h.Clock), migrate.WithDryRun())
	require.NoError(t, err)
	drep, err := dry.Run(ctx)
	require.NoError(t, err)
	require.Positive(t, drep.ExpiredLeft)
	del := plan
	del.Expired, del.ExpiredAsOf, del.ExpectExpired = migrate.DeleteExpired, drep.Now, drep.ExpiredLeft
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	var current atomic.Pointer[migrate.Migrator] // the run in progress
	run := func(ctx context.Context, opts ...scan.Option) (*migrate.Report, error) {
		mg, err := migrate.New(raw, "t", del, migrate.WithClock(h.Clock), migrate.WithCheckpoint(ckpt))
		require.NoError(t, err)
		current.Store(mg)
		return mg.Run(ctx, append([]scan.Option{scan.WithRanges(8)}, opts...)...)
	}
	// Stopped, as a kill stops it, once the deleting pass (the second
	// scan: the count pass comes first) has deleted some cells and not
	// finished every range. (Stopping at a share of the ranges was flaky:
	// the expired cells are in the later rows, which the workers may not
	// have reached by then.)
	stopCtx, stop := context.WithCancel(ctx)
	first, err := run(stopCtx, scan.WithCellsPerSecond(5000), scan.WithProgress(time.Millisecond, func(p scan.Progress) {
		if current.Load().Stats().ExpiredDeleted > 0 && p.RangesDone < p.Ranges {
			stop()
		}
	}))
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, first.Scan.Complete())
	require.Positive(t, first.ExpiredDeleted)
	require.Less(t, first.ExpiredDeleted, del.ExpectExpired)

	second, err := run(ctx)
	require.NoError(t, err, "the restart resumes")
	assert.True(t, second.Scan.Complete())
	// A deletion in flight when the first run stopped may be applied
	// without being counted (its RPC returns the cancellation): the counts
	// never exceed the dry run's, and the cells stored show exactly its
	// cells deleted (below).
	assert.LessOrEqual(t, first.ExpiredDeleted+second.ExpiredDeleted, del.ExpectExpired, "never more than the dry run's cells are deleted, over both runs")
	assert.GreaterOrEqual(t, first.ExpiredDeleted+second.ExpiredDeleted, del.ExpectExpired-int64(migrate.DefaultInflight*scan.DefaultWorkers), "at most the deletions in flight at the stop go uncounted")
	live := map[key]string{}
	for k, v := range model {
		if k.ts.Time().Add(ttl).After(drep.Now) {
			k.ts += bigtable.Timestamp(ttl / time.Microsecond)
			live[k] = v
		}
	}
	assert.Equal(t, live, stored(t, raw, "f"), "the live cells moved, the expired ones deleted")

	// A job whose count no longer holds is still refused at restart: more
	// cells are expired than it confirmed.
	del.ExpectExpired = first.ExpiredDeleted // as if the dry run had counted fewer
	ckpt = filepath.Join(t.TempDir(), "ckpt2")
	require.NoError(t, h.Admin.DeleteTable(ctx, "t"))
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	load(t, raw, "f", 1500, 1, now, 10*day)
	_, err = run(ctx)
	require.ErrorIs(t, err, migrate.ErrExpiredCount, "the first run checks the count exactly")
}

// A range left unfinished twice (a cell there cannot be moved) carries its
// first run's deletions over as DeletedBefore; a restart must still count
// them among the deletions the checkpoint records, or its bound on what is
// left to delete grows by them: a cell that became expired since the dry
// run (a legacy write with an old timestamp) would then be deleted too,
// more than -expect-expired in all.
func TestRestartedDeletionRunCountsDeletionsCarriedOver(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	raw := h.Raw.Open("t")
	now := h.Clock.Now()
	load(t, raw, "f", 40, 1, now, 10*day)
	const ttl = 20 * time.Second // load's cells are 1..40 s old: half expired
	// A cell stamped before 2000 is no write time: never moved, so the
	// range is never finished.
	m := bigtable.NewMutation()
	m.Set("f", "c00", bigtable.Timestamp(1000), []byte("seq"))
	require.NoError(t, raw.Apply(ctx, "row0000005", m))
	h.Clock.Set(now.Add(time.Second))
	plan := inPlace(now, ttl)
	dry, err := migrate.New(raw, "t", plan, migrate.WithClock(h.Clock), migrate.WithDryRun())
	require.NoError(t, err)
	drep, err := dry.Run(ctx)
	require.NoError(t, err)
	require.Positive(t, drep.ExpiredLeft)
	del := plan
	del.Expired, del.ExpiredAsOf, del.ExpectExpired = migrate.DeleteExpired, drep.Now, drep.ExpiredLeft
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	run := func() (*migrate.Report, error) {
		mg, err := migrate.New(raw, "t", del, migrate.WithClock(h.Clock), migrate.WithCheckpoint(ckpt))
		require.NoError(t, err)
		return mg.Run(ctx, scan.WithRanges(1))
	}
	first, err := run()
	require.NoError(t, err)
	require.Equal(t, del.ExpectExpired, first.ExpiredDeleted)
	require.Equal(t, int64(1), first.NotRealTimes)
	require.False(t, first.Scan.Complete(), "the range holding the sequence number is left unfinished")
	second, err := run()
	require.NoError(t, err)
	require.Zero(t, second.ExpiredDeleted)
	require.Equal(t, del.ExpectExpired, second.DeletedBefore, "the first run's deletions carried over")

	// A legacy writer adds a cell already expired as of the job's instant.
	late := bigtable.Time(now.Add(-2 * ttl)).TruncateToMilliseconds()
	m = bigtable.NewMutation()
	m.Set("f", "c00", late, []byte("late"))
	require.NoError(t, raw.Apply(ctx, "row9999999", m))
	third, err := run()
	require.ErrorIs(t, err, migrate.ErrExpiredCount, "1 expired cell left + %d deleted exceeds the job's %d", del.ExpectExpired, del.ExpectExpired)
	assert.Zero(t, third.ExpiredDeleted)
	assert.Contains(t, stored(t, raw, "f"), key{"row9999999", "c00", late}, "nothing beyond the dry run's count is deleted")
}

// A range an earlier run left unfinished (a cell there cannot be moved)
// hands its recorded moves to the run that reads it again, as
// MovedBefore: unless the table was restored since, which undid them. The
// last cell moved there (its witness) is then gone, and the rerun, which
// moves the restored cells again, does not count them twice.
func TestRestoreUndoesTheMovesOfAnUnfinishedRange(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	schema := strategy.Schema{"f": strategy.Unmanaged()}
	require.NoError(t, h.CreateTable(ctx, "t", schema))
	raw := h.Raw.Open("t")
	now := h.Clock.Now()
	fill := func() map[key]string {
		model := load(t, raw, "f", 30, 2, now, day)
		m := bigtable.NewMutation()
		m.Set("f", "seq", bigtable.Timestamp(1000), []byte("n")) // no write time: never moved
		require.NoError(t, raw.Apply(ctx, "row0000003", m))
		return model
	}
	model := fill()
	h.Clock.Set(now.Add(time.Second))
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	run := func() *migrate.Report {
		mg, err := migrate.New(raw, "t", inPlace(now, day), migrate.WithClock(h.Clock), migrate.WithCheckpoint(ckpt))
		require.NoError(t, err)
		rep, err := mg.Run(ctx, scan.WithRanges(1))
		require.NoError(t, err)
		return rep
	}
	first := run()
	require.Equal(t, int64(len(model)), first.Moved)
	require.False(t, first.Scan.Complete())

	second := run() // no restore: the earlier moves are carried over
	assert.Zero(t, second.Moved)
	assert.Equal(t, int64(len(model)), second.MovedBefore)

	require.NoError(t, h.Admin.DeleteTable(ctx, "t"))
	require.NoError(t, h.CreateTable(ctx, "t", schema))
	fill()
	third := run()
	assert.Equal(t, int64(len(model)), third.Moved, "what the restore brought back is moved again")
	assert.Zero(t, third.MovedBefore, "the moves the restore undid are not counted")
	assert.Equal(t, int64(len(model)), third.Moved+third.MovedBefore, "the job moved each cell of the table once")
}

// A writer that deletes the cells a range's earlier run moved (its witness
// among them) undoes none of that run's deletions: the run that reads the
// range again drops the moves it carried over, not the deletions, which a
// later restart still counts against -expect-expired.
func TestAGoneWitnessKeepsTheDeletionsCarriedOver(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	raw := h.Raw.Open("t")
	now := h.Clock.Now()
	load(t, raw, "f", 40, 1, now, 10*day)
	const ttl = 20 * time.Second
	m := bigtable.NewMutation()
	m.Set("f", "c00", bigtable.Timestamp(1000), []byte("seq")) // never moved: the range is never finished
	require.NoError(t, raw.Apply(ctx, "row0000005", m))
	h.Clock.Set(now.Add(time.Second))
	plan := inPlace(now, ttl)
	dry, err := migrate.New(raw, "t", plan, migrate.WithClock(h.Clock), migrate.WithDryRun())
	require.NoError(t, err)
	drep, err := dry.Run(ctx)
	require.NoError(t, err)
	del := plan
	del.Expired, del.ExpiredAsOf, del.ExpectExpired = migrate.DeleteExpired, drep.Now, drep.ExpiredLeft
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	run := func() (*migrate.Report, error) {
		mg, err := migrate.New(raw, "t", del, migrate.WithClock(h.Clock), migrate.WithCheckpoint(ckpt))
		require.NoError(t, err)
		return mg.Run(ctx, scan.WithRanges(1))
	}
	first, err := run()
	require.NoError(t, err)
	require.Equal(t, del.ExpectExpired, first.ExpiredDeleted)
	require.Positive(t, first.Moved)

	// A writer deletes every moved cell.
	for k := range stored(t, raw, "f") {
		if k.ts > bigtable.Time(now) {
			m := bigtable.NewMutation()
			m.DeleteTimestampRange("f", k.col, k.ts, k.ts+1000)
			require.NoError(t, raw.Apply(ctx, k.row, m))
		}
	}
	second, err := run()
	require.NoError(t, err)
	assert.Zero(t, second.MovedBefore, "the moves whose witness is gone are not carried over")
	assert.Equal(t, del.ExpectExpired, second.Stats.DeletedBefore, "the deletions are")

	late := bigtable.Time(now.Add(-2 * ttl)).TruncateToMilliseconds()
	m = bigtable.NewMutation()
	m.Set("f", "c00", late, []byte("late"))
	require.NoError(t, raw.Apply(ctx, "row9999999", m))
	_, err = run()
	require.ErrorIs(t, err, migrate.ErrExpiredCount, "the deletions recorded still bound the restart")
	assert.Contains(t, stored(t, raw, "f"), key{"row9999999", "c00", late})
}

// A finished range that moved nothing (every cell there was expired and
// deleted) has no witness, so a restart reads it again: the deletions its
// record held must stay counted, or the next restart's bound on what is
// left to delete grows by them.
func TestAFinishedRangeReadAgainKeepsItsDeletions(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	raw := h.Raw.Open("t")
	now := h.Clock.Now()
	load(t, raw, "f", 40, 1, now, 10*day)
	const ttl = 500 * time.Millisecond // every cell expired
	h.Clock.Set(now.Add(time.Second))
	plan := inPlace(now, ttl)
	dry, err := migrate.New(raw, "t", plan, migrate.WithClock(h.Clock), migrate.WithDryRun())
	require.NoError(t, err)
	drep, err := dry.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(40), drep.ExpiredLeft)
	del := plan
	del.Expired, del.ExpiredAsOf, del.ExpectExpired = migrate.DeleteExpired, drep.Now, drep.ExpiredLeft
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	run := func() (*migrate.Report, error) {
		mg, err := migrate.New(raw, "t", del, migrate.WithClock(h.Clock), migrate.WithCheckpoint(ckpt))
		require.NoError(t, err)
		return mg.Run(ctx, scan.WithRanges(1))
	}
	first, err := run()
	require.NoError(t, err)
	require.Equal(t, del.ExpectExpired, first.ExpiredDeleted)
	require.True(t, first.Scan.Complete())
	second, err := run() // the job restarted: its range proves nothing, and is read again
	require.NoError(t, err)
	assert.Equal(t, 1, second.Unproven)
	assert.Equal(t, del.ExpectExpired, second.Stats.DeletedBefore, "the deletions recorded are carried over")

	late := bigtable.Time(now.Add(-time.Minute)).TruncateToMilliseconds()
	m := bigtable.NewMutation()
	m.Set("f", "c00", late, []byte("late"))
	require.NoError(t, raw.Apply(ctx, "row9999999", m))
	_, err = run()
	require.ErrorIs(t, err, migrate.ErrExpiredCount, "the deletions recorded still bound the restart")
	assert.Contains(t, stored(t, raw, "f"), key{"row9999999", "c00", late})
}
