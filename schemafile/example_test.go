package schemafile_test

import (
	"fmt"

	"github.com/bttl/bttl/schemafile"
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
