package ttlclient_test

import (
	"errors"
	"fmt"

	"github.com/bttl/bttl/ttlclient"
)

// A test in the user's module: fails when a dependency upgrade raises
// cloud.google.com/go/bigtable to a version bttl cannot read, and says
// what would then fail.
func ExampleCheckCompatibility() {
	err := ttlclient.CheckCompatibility()
	var ce *ttlclient.CompatibilityError
	if errors.As(err, &ce) {
		for _, f := range ce.Failed {
			fmt.Printf("%s: %v; %s\n", f.Check, f.Err, f.Effect)
		}
		return
	}
	fmt.Println("this build's cloud.google.com/go/bigtable passes every check")
	// Output: this build's cloud.google.com/go/bigtable passes every check
}
