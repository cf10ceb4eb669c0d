package filters_test

import (
	"encoding/json"
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
		{Column: "session:old", Timestamp: now - 60_000_000, Value: []byte("logged-out")},
	}}
	for _, c := range filters.Explain(schema, row, now) {
		fmt.Printf("%s: %s (%s)\n", c.Value, c.Visibility, c.Reason)
	}
	// Output:
	// logged-out: expired (expired at 2026-11-27T11:59:00.000000Z (1m ago); a complete GC would have removed it)
	// current: returned (live until 2026-11-27T13:00:00.000000Z (1h left))
	// previous: excess-version (version 2 of the column's cells; the family keeps the newest 1)
}

// Which cells a read leaves out.
func ExampleCellReport_Hidden() {
	now := bigtable.Time(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	row := bigtable.Row{"s": {
		{Column: "s:a", Timestamp: now + 1000_000, Value: []byte("live")},
		{Column: "s:b", Timestamp: now - 1000_000, Value: []byte("gone")},
	}}
	for _, c := range filters.Explain(strategy.Schema{"s": strategy.OneSecond()}, row, now) {
		fmt.Println(string(c.Value), c.Hidden())
	}
	// Output:
	// live false
	// gone true
}

// The JSON form bttl lookup -json prints: times in RFC 3339 UTC at fixed
// width, durations in days and smaller units, a qualifier that is not
// UTF-8 in base64.
func ExampleCellReport_MarshalJSON() {
	now := bigtable.Time(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	row := bigtable.Row{"s": {{Column: "s:tok", Timestamp: now + 60_000_000, Value: []byte("v")}}}
	c := filters.Explain(strategy.Schema{"s": strategy.OneSecond()}, row, now)[0]
	b, err := json.Marshal(c)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	// Output:
	// {"family":"s","column":"tok","timestamp":1795780860000000,"value":"dg==","strategy":"one-second","listed":true,"visibility":"returned","reason":"live until 2026-11-27T12:01:00.000000Z (1m left)","expiry":"2026-11-27T12:01:00.000000Z","remaining_ttl":"1m"}
}

// Reading bttl lookup -json back gives the library's classification.
func ExampleCellReport_UnmarshalJSON() {
	var c filters.CellReport
	err := json.Unmarshal([]byte(`{"family":"s","column":"tok","timestamp":1795780800000000,"value":"dg==","strategy":"one-second","listed":true,"visibility":"expired","reason":"expired","expiry":"2026-11-27T12:00:00Z","remaining_ttl":"-1m0s"}`), &c)
	fmt.Println(err, c.Family, c.Column, c.Visibility, c.Remaining, c.Hidden())
	// Output:
	// <nil> s tok expired -1m0s true
}
