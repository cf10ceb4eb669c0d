package schemafile_test

import (
	"fmt"

	"github.com/bttl/bttl/schemafile"
)

// ParseTables also returns the policy of the families a table's schema does
// not name, given under "*"; a table without "*" has none (strict).
func ExampleParseTables() {
	tables, err := schemafile.ParseTables([]byte(`
tables:
  wide:
    session: {strategy: one-second}
    "*": {strategy: unmanaged}
  strict:
    doc: {strategy: sequence, versions: 5}
`), false)
	if err != nil {
		panic(err)
	}
	fmt.Println(tables["wide"].Schema, *tables["wide"].Unlisted)
	fmt.Println(tables["strict"].Schema, tables["strict"].Unlisted)
	// Output:
	// map[session:one-second] unmanaged
	// map[doc:sequence(N=5)] <nil>
}

// LoadTables reads a file as Load does; Table.Unlisted goes to
// ttlclient.WithUnlistedFamilies or wireguard.WithUnlistedFamilies.
func ExampleLoadTables() {
	tables, err := schemafile.LoadTables("testdata/wide.yaml")
	if err != nil {
		panic(err)
	}
	wide := tables["wide"]
	fmt.Println(len(wide.Schema), "family named; the others pass as", *wide.Unlisted)
	// Output: 1 family named; the others pass as unmanaged
}
