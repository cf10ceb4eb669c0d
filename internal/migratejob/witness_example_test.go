package migratejob_test

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	migrate "github.com/bttl/bttl/internal/migratejob"
)

// A witness (the last cell a finished key range moved, as checkpoints and
// reports record it) is stored while the table still holds that cell:
// after a restore from a backup taken before the move, it is not.
func ExampleWitness_Stored() {
	ctx := context.Background()
	h, tbl, now := legacyTable(ctx)
	defer h.Close()
	w := migrate.Witness{Row: []byte("user#1"), Family: "f", Column: []byte("session"), TS: bigtable.Time(now.Add(-24 * time.Hour)).TruncateToMilliseconds()}
	stored, err := w.Stored(ctx, tbl)
	fmt.Println(stored, err)
	m := bigtable.NewMutation()
	m.DeleteCellsInColumn("f", "session")
	if err := tbl.Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}
	stored, err = w.Stored(ctx, tbl)
	fmt.Println(stored, err)
	// Output:
	// true <nil>
	// false <nil>
}
