package gcrule_test

import (
	"fmt"
	"time"

	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// A max age of 1.5s is not the 1s a one-second family needs, although
// bigtable.FamilyInfo.FullGCPolicy would show it as 1s.
func ExampleCheck() {
	actual := &adminpb.ColumnFamily{GcRule: &adminpb.GcRule{Rule: &adminpb.GcRule_MaxAge{MaxAge: durationpb.New(1500 * time.Millisecond)}}}
	err := gcrule.Check("events", "session", strategy.OneSecond(), actual)
	fmt.Println(err.Kind)
	fmt.Println(err.Expected, "vs", err.Actual)
	fmt.Println(gcrule.Check("events", "session", strategy.DefaultExpiry(1500*time.Millisecond), actual) == nil)
	// Output:
	// wrong max age
	// max_age=1s vs max_age=1.5s
	// true
}
