package schemafile_test

import (
	"errors"
	"fmt"
	"sort"

	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
)

func ExampleParse() {
	schemas, err := schemafile.Parse([]byte(`
tables:
  events:
    clicks: {strategy: default-expiry, ttl: 2d}
    doc: {strategy: sequence, versions: 5}
`), false)
	if err != nil {
		panic(err)
	}
	fmt.Println(schemas["events"]["clicks"], schemas["events"]["doc"])
	// Output: default-expiry(D=48h0m0s) sequence(N=5)
}

// Load picks the format from the file name: JSON for .json, YAML
// otherwise. Each table's schema comes back validated.
func ExampleLoad() {
	schemas, err := schemafile.Load("testdata/events.yaml")
	if err != nil {
		panic(err)
	}
	schema := schemas["events"]
	families := make([]string, 0, len(schema))
	for f := range schema {
		families = append(families, f)
	}
	sort.Strings(families)
	for _, f := range families {
		fmt.Printf("%s: %s, default TTL %s\n", f, schema[f], schema[f].DefaultTTL())
	}
	// Output:
	// clicks: default-expiry(D=48h0m0s), default TTL 48h0m0s
	// doc: sequence(N=5), default TTL 0s
	// session: one-second, default TTL 30m0s
}

// Policy converts one entry, for a program that builds its file structure
// itself; a mistake wraps strategy.ErrInvalidPolicy.
func ExampleFamily_Policy() {
	p, err := schemafile.Family{Strategy: "default-expiry", TTL: "7d", MaxVersions: 3}.Policy()
	fmt.Println(p, err)

	_, err = schemafile.Family{Strategy: "sequence", TTL: "1h"}.Policy()
	fmt.Println(errors.Is(err, strategy.ErrInvalidPolicy))
	// Output:
	// default-expiry(D=168h0m0s)+maxversions(3) <nil>
	// true
}

// ParseDuration reads the file's durations: Go durations with days and
// weeks as further units, in any combination.
func ExampleParseDuration() {
	for _, s := range []string{"90s", "1h30m", "1500ms", "7d", "1d12h", "1w2d3h", "1.5d", "1y"} {
		d, err := schemafile.ParseDuration(s)
		fmt.Println(s, d, err)
	}
	// Output:
	// 90s 1m30s <nil>
	// 1h30m 1h30m0s <nil>
	// 1500ms 1.5s <nil>
	// 7d 168h0m0s <nil>
	// 1d12h 36h0m0s <nil>
	// 1w2d3h 219h0m0s <nil>
	// 1.5d 36h0m0s <nil>
	// 1y 0s bttl: invalid duration "1y": want a Go duration such as 90s or 1h30m, days and weeks allowed (1d12h, 2w)
}

// A mistake in a file is a *Error naming the position, the table, the
// family and the key; it wraps ErrInvalidFile.
func ExampleError() {
	_, err := schemafile.Parse([]byte(`
tables:
  events:
    doc: {strategy: sequence, versions: 2.9}
`), false)
	var e *schemafile.Error
	if errors.As(err, &e) {
		fmt.Println(e.Line, e.Column, e.Table, e.Family, e.Key)
	}
	fmt.Println(errors.Is(err, schemafile.ErrInvalidFile))
	fmt.Println(err)

	_, err = schemafile.Parse([]byte(`{"tables": {"events": {"doc": {"Strategy": "sequence"}}}}`), true)
	fmt.Println(err)
	// Output:
	// 4 41 events doc versions
	// true
	// bttl: invalid schema file at line 4, column 41: table "events", family "doc", key "versions": want a whole number in decimal, not 2.9
	// bttl: invalid schema file at line 1, column 32 (byte offset 31): table "events", family "doc", key "Strategy": unknown key: keys are case-sensitive, did you mean "strategy"?
}
