package migrate_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/migrate"
	"github.com/bttl/bttl/scan"
	"github.com/bttl/bttl/strategy"
)

// Issue 35, 1: a checkpoint outlives the table it describes. The job
// finishes every key range; the table is then "restored" (deleted,
// re-created under the same name, and its cells from before the job
// written back with their timestamps, which is what a restore from a
// backup gives; the emulators cannot restore one); the same job, run
// again with the same checkpoint, moves what came back instead of
// resuming "every range finished" and moving nothing. A rerun without a
// restore still skips the ranges. With a file and with a Bigtable
// checkpoint, on both servers.
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
				assert.Equal(t, len(rep.Scan.Ranges), rep.Undone, "every finished range's last move is gone")
				assert.True(t, rep.Scan.Complete())
				assert.Equal(t, shifted(model, day), stored(t, raw, "f"), "every cell moved once, none left at its write time")
			})
		}
	})
}
