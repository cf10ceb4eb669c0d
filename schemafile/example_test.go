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

// ParseDuration reads the file's durations: Go durations, or whole days.
func ExampleParseDuration() {
	for _, s := range []string{"90s", "1h30m", "1500ms", "7d", "1.5d"} {
		d, err := schemafile.ParseDuration(s)
		fmt.Println(s, d, err)
	}
	// Output:
	// 90s 1m30s <nil>
	// 1h30m 1h30m0s <nil>
	// 1500ms 1.5s <nil>
	// 7d 168h0m0s <nil>
	// 1.5d 0s invalid duration "1.5d"
}
