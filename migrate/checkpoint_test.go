package migrate_test

import (
	"context"
	"path/filepath"
	"testing"

	"cloud.google.com/go/bigtable"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/migrate"
	"github.com/bttl/bttl/scan"
)

// TestScanCheckpointRecordsThePlan: a checkpoint given as a scan option
// (scan.WithCheckpoint, the public scan package's form, which takes no
// job) records the plan as migrate.WithCheckpoint's does, so a dry run's
// checkpoint is refused by the run that writes instead of being resumed:
// resumed, it would skip every range the dry run finished and move
// nothing.
func TestScanCheckpointRecordsThePlan(t *testing.T) {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	path := filepath.Join(t.TempDir(), "events.checkpoint")

	dry, err := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithDryRun())
	require.NoError(t, err)
	rep, err := dry.Run(ctx, scan.WithCheckpoint(path))
	require.NoError(t, err)
	require.Equal(t, int64(2), rep.Moved, "the dry run counts the moves it would make")

	m, err := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	rep, err = m.Run(ctx, scan.WithCheckpoint(path))
	require.ErrorIs(t, err, scan.ErrCheckpoint, "the dry run's checkpoint is not this run's")
	var ce *scan.CheckpointError
	assert.ErrorAs(t, err, &ce)
	if rep != nil {
		assert.Zero(t, rep.Moved)
	}

	// Given the same checkpoint both ways, one plan resumes it.
	both := filepath.Join(t.TempDir(), "both.checkpoint")
	m1, err := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock), migrate.WithCheckpoint(both))
	require.NoError(t, err)
	_, err = m1.Run(ctx)
	require.NoError(t, err)
	m2, err := migrate.New(tbl, "events", realToOneSecond(now), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	rep, err = m2.Run(ctx, scan.WithCheckpoint(both))
	require.NoError(t, err)
	assert.Zero(t, rep.Rows, "every range was finished by the run that wrote the checkpoint")
	assert.Equal(t, int64(2), rep.Earlier.Moved)
}

// TestCheckCopyRefusesACheckpoint: CheckCopy is a proof read whole every
// time; a checkpoint (a scan option) would have a second check skip the
// ranges the first finished and call a target clean that it never read.
func TestCheckCopyRefusesACheckpoint(t *testing.T) {
	ctx := context.Background()
	h, tbl, p := copyTable(ctx)
	defer h.Close()
	base := at(h, 0)
	copyOnce(ctx, h, tbl, p, "user#1", base)
	m, err := migrate.New(tbl, "clicks", p, migrate.WithClock(h.Clock))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "check.checkpoint")

	chk, err := m.CheckCopy(ctx, scan.WithCheckpoint(path))
	require.ErrorIs(t, err, scan.ErrOption)
	var oe *scan.OptionError
	require.ErrorAs(t, err, &oe)
	assert.Nil(t, chk)

	mut := bigtable.NewMutation()
	mut.DeleteTimestampRange("clicks", "cart", base, base+1000) // not mirrored
	require.NoError(t, tbl.Apply(ctx, "user#1", mut))
	chk, err = m.CheckCopy(ctx, scan.WithCheckpoint(path))
	require.ErrorIs(t, err, scan.ErrOption)
	assert.Nil(t, chk, "no check, rather than one that skipped what an earlier one read")
}
