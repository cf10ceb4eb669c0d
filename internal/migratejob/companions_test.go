package migratejob_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// A family with write times stores beside each cell its companion, a
// record under a reserved qualifier that reads through bttl skip. A copy
// from it copies the cells; into a family without write times a
// companion copied is no record but a column of data, served to readers.
func TestCopyServesNoCompanionAsData(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   strategy.Policy
	}{
		{"target without write times", strategy.DefaultExpiry(24 * time.Hour)},
		{"target with write times", strategy.DefaultExpiry(24*time.Hour, strategy.WithWriteTime())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bttestharness.New(t)
			ctx := context.Background()
			from := strategy.DefaultExpiry(48*time.Hour, strategy.WithWriteTime())
			schema := strategy.Schema{"f": from, "g": tc.to}
			tbl := h.MustTable(t, "t", schema)
			m := ttlclient.NewMutation()
			m.SetTTL("f", "c", 30*time.Hour, []byte("v"))
			require.NoError(t, tbl.Apply(ctx, "r", m))
			stored, err := h.Stored(ctx, "t", "r")
			require.NoError(t, err)
			require.Len(t, stored["f"], 2, "the cell and its companion")

			plan := migrate.Plan{Family: "f", From: from, To: tc.to, ToFamily: "g"}
			mg, err := migrate.New(h.Raw.Open("t"), "t", plan, migrate.WithClock(h.Clock))
			require.NoError(t, err)
			_, err = mg.Run(ctx)
			require.NoError(t, err)
			row, err := tbl.ReadRow(ctx, "r")
			require.NoError(t, err)
			var cols []string
			for _, it := range row["g"] {
				cols = append(cols, it.Column)
			}
			assert.Equal(t, []string{"g:c"}, cols, "the target serves the cell, no companion as data")
		})
	}
}
