package filters_test

import (
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// Why a read does not return a value: classify a row read with no filter.
func ExampleExplain() {
	now := bigtable.Time(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	schema := strategy.Schema{"session": strategy.OneSecond(strategy.WithMaxVersions(1))}
	row := bigtable.Row{"session": {
		{Column: "session:tok", Timestamp: now + 3600_000_000, Value: []byte("current")},
		{Column: "session:tok", Timestamp: now + 60_000_000, Value: []byte("previous")},
		{Column: "session:tok", Timestamp: now - 60_000_000, Value: []byte("logged-out")},
	}}
	for _, c := range filters.Explain(schema, row, now) {
		fmt.Printf("%s: %s (%s)\n", c.Value, c.Visibility, c.Reason)
	}
	// Output:
	// current: returned (live until 2026-11-27T13:00:00Z (1h0m0s left))
	// previous: excess-version (version 2 of the column's live cells; the family keeps the newest 1)
	// logged-out: expired (expired at 2026-11-27T11:59:00Z (1m0s ago); a complete GC would have removed it)
}
