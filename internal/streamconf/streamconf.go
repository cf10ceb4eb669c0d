// Package streamconf holds the one rule for a table's change-stream
// retention, for the schema file (schemafile) and provisioning
// (provision): Bigtable's bounds, from the field doc of
// ChangeStreamConfig.retention_period in google/bigtable/admin/v2/table.proto
// ("Values must be at least 1 day and at most 7 days, and will be truncated
// to microsecond granularity").
package streamconf

import (
	"fmt"
	"time"

	"github.com/bttl/bttl/internal/timefmt"
)

const (
	// MinRetention and MaxRetention bound a change stream's retention.
	MinRetention = 24 * time.Hour
	MaxRetention = 7 * 24 * time.Hour
)

// Check returns nil for a retention Bigtable accepts, else an error saying
// the bounds (without the "bttl: " prefix: callers wrap it in their own
// error). Durations are truncated to microseconds first, as Bigtable
// truncates them.
func Check(d time.Duration) error {
	if d = d.Truncate(time.Microsecond); d < MinRetention || d > MaxRetention {
		return fmt.Errorf("change stream retention %s is out of range: Bigtable keeps a change stream between 1d and 7d", timefmt.Duration(d))
	}
	return nil
}
