package ttlclient_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Open verifies the table's GC rules: an age rule on a sequence family
// would delete its versions, so the table does not open.
func ExampleClient_Verify_sequence() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx) // its client verifies with h.Admin
	if err != nil {
		panic(err)
	}
	defer h.Close()
	err = h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "docs", ColumnFamilies: map[string]bigtable.Family{
		"rev": {GCPolicy: bigtable.MaxAgePolicy(7 * 24 * time.Hour)},
	}})
	if err != nil {
		panic(err)
	}
	schema := ttlclient.Schema{"rev": strategy.Sequence(5)}
	_, err = h.Client.Open(ctx, "docs", schema)
	var ge *gcrule.MismatchError
	if errors.As(err, &ge) {
		fmt.Printf("%s: %s: expected %s, actual %s\n", ge.Family, ge.Kind, ge.Expected, ge.Actual)
	}
	fmt.Println(errors.Is(h.Client.Verify(ctx, "docs", schema), gcrule.ErrMismatch))
	// Output:
	// rev: age rule on a sequence family: expected max_versions=5, actual max_age=7d
	// true
}
