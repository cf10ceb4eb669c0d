package auditrule_test

import (
	"fmt"
	"time"

	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bttl/bttl/internal/auditrule"
	"github.com/bttl/bttl/strategy"
)

// A one-second family whose rule is max age 1s beside max versions 1 is
// not on the rule its strategy needs, but that rule collects every cell
// the strategy reads as expired as soon: such cells are GC's stock. A
// legacy max age of 60 days keeps them: they are not on their rule yet.
func ExampleCollectsExpired() {
	maxAge := func(d time.Duration) *adminpb.GcRule {
		return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxAge{MaxAge: durationpb.New(d)}}
	}
	union := &adminpb.ColumnFamily{GcRule: &adminpb.GcRule{Rule: &adminpb.GcRule_Union_{Union: &adminpb.GcRule_Union{Rules: []*adminpb.GcRule{
		maxAge(time.Second), {Rule: &adminpb.GcRule_MaxNumVersions{MaxNumVersions: 1}},
	}}}}}
	legacy := &adminpb.ColumnFamily{GcRule: maxAge(60 * 24 * time.Hour)}
	fmt.Println(auditrule.CollectsExpired(union, strategy.OneSecond()), auditrule.CollectsExpired(legacy, strategy.OneSecond()))
	// Output: true false
}
