package migratejob_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	migrate "github.com/bttl/bttl/internal/migratejob"
)

// An expired cell too large to pin was counted expired by the dry run (the
// count -expect-expired takes) but could never be deleted pinned, so the
// deleting run's count never matched. It is counted too large to pin by both,
// and the deletion of the others goes through (issue 35 item 7).
func TestExpiredTooLargeToPinCountsTheSameInDryAndDeletingRuns(t *testing.T) {
	h, tbl, now, at := rowTable(t)
	ctx := context.Background()
	m := bigtable.NewMutation()
	m.Set("f", "old", at(-3*day), []byte("expired a day ago"))
	m.Set("f", "large", at(-3*day), bytes.Repeat([]byte("x"), 11<<10))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	plan := inPlace(now.Add(-time.Hour), 2*day)
	run := func(p migrate.Plan, opts ...migrate.Option) (*migrate.Report, error) {
		mg, err := migrate.New(tbl, "t", p, append([]migrate.Option{migrate.WithClock(h.Clock)}, opts...)...)
		require.NoError(t, err)
		return mg.Run(ctx)
	}
	dry, err := run(plan, migrate.WithDryRun())
	require.NoError(t, err)
	assert.Equal(t, int64(1), dry.ExpiredLeft, "only the cell that can be deleted pinned")
	assert.Equal(t, int64(1), dry.TooLargeToPin)

	del := plan
	del.Expired, del.ExpiredAsOf, del.ExpectExpired = migrate.DeleteExpired, dry.Now, dry.ExpiredLeft
	rep, err := run(del)
	require.NoError(t, err, "the dry run's count is the deleting run's")
	assert.Equal(t, int64(1), rep.ExpiredDeleted)
	assert.Equal(t, int64(1), rep.TooLargeToPin)
	got := stored(t, tbl, "f")
	assert.Len(t, got, 1, "the large cell stays: never deleted unpinned")
}
