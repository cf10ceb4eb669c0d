package provision_test

import (
	"context"
	"fmt"
	"os"
	"time"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/provision"
	"github.com/bttl/bttl/strategy"
)

// Apply creates what is missing; a second run changes nothing and says so.
func ExampleProvisioner_Apply() {
	ctx := context.Background()
	h, err := bttestharness.Start(ctx) // the in-process emulator
	if err != nil {
		panic(err)
	}
	defer h.Close()
	admin := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance)
	p := provision.New(admin, h.Raw, provision.WithOutput(os.Stdout))
	schema := strategy.Schema{"clicks": strategy.DefaultExpiry(48 * time.Hour), "doc": strategy.Sequence(3)}
	for i := 0; i < 2; i++ {
		if _, err := p.Apply(ctx, "example-events", schema); err != nil {
			panic(err)
		}
	}
	fmt.Println(admin.Verify(ctx, "example-events", schema))
	// Output:
	// table "example-events":
	//   create table "example-events"
	//   create family "clicks" with max_age=48h0m0s (default-expiry(D=48h0m0s))
	//   create family "doc" with max_versions=3 (sequence(N=3))
	// table "example-events": no change (every family matches the schema)
	// <nil>
}
