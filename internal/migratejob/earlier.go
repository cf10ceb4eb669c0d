package migratejob

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ErrTTLChanged: an earlier run of the same migration (table, family,
// policies, in place or the same target) moved cells with other TTL
// rules. A second TTL silently gives the cells it moves another life than
// the first gave theirs (in a copy, each cell is copied again at its new
// timestamp, and the later copy outlives the first): refused unless the
// caller means it (see *TTLChangeError).
var ErrTTLChanged = errors.New("bttl: an earlier run of this migration used other TTL rules")

// TTLChangeError names the earlier run's record and both TTLs.
type TTLChangeError struct {
	Record       string   // where the earlier run's checkpoint is
	Updated      string   // when it was last written (RFC 3339)
	Earlier, Now []string // TTL rules (TTLRule.String)
	Moved        int64    // cells the earlier run recorded moving
}

func (e *TTLChangeError) Error() string {
	return fmt.Sprintf("%v: checkpoint %s (updated %s) moved %d cell(s) with TTL %s; this run's is %s: "+
		"cells would be given two different lives (docs/runbook.md#undoing-a-wrong-ttl)",
		ErrTTLChanged, e.Record, e.Updated, e.Moved, strings.Join(e.Earlier, "; "), strings.Join(e.Now, "; "))
}

func (e *TTLChangeError) Unwrap() error { return ErrTTLChanged }

// CheckEarlierRuns looks through checkpoint records and shard reports
// (ShardReport's JSON) by name (a file path, or a row key as
// scan.ReadBigtableRecords returns them) for a real run of this
// Migrator's migration on its table that moved cells with other TTL
// rules, and returns a *TTLChangeError (ErrTTLChanged) for the
// first in name order. Records of other tables, other migrations, dry
// runs, runs that moved nothing, unreadable ones (not a migration's
// checkpoint) and nil ones (claimed, not written) are skipped. Only what
// the records say is known: a run without a checkpoint left none.
func (m *Migrator) CheckEarlierRuns(records map[string][]byte) error {
	if !m.plan.fromReal() {
		return nil // only real timestamps take a TTL
	}
	job := m.Job()
	names := make([]string, 0, len(records))
	for k := range records {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		// A checkpoint record (scan's: table, job, ranges with their
		// results) or a shard's report (ShardReport: table, job, dry_run,
		// total).
		var rec struct {
			Table   string `json:"table"`
			Job     Job    `json:"job"`
			Updated string `json:"updated"`
			// Ranges: a checkpoint's list; a report's count.
			Ranges json.RawMessage `json:"ranges"`
			DryRun bool            `json:"dry_run"`
			Now    string          `json:"now"`
			Total  *Counts         `json:"total"`
		}
		if records[name] == nil || json.Unmarshal(records[name], &rec) != nil {
			continue
		}
		if rec.Table != m.table || rec.Job.Migrate != job.Migrate || rec.Job.DryRun || rec.DryRun || slices.Equal(rec.Job.TTL, job.TTL) {
			continue
		}
		var moved int64
		if rec.Total != nil {
			moved, rec.Updated = rec.Total.MovedByJob(), rec.Now
		}
		var ranges []struct {
			Result json.RawMessage `json:"result"`
		}
		if rec.Total == nil && json.Unmarshal(rec.Ranges, &ranges) != nil {
			continue // neither a checkpoint nor a report
		}
		for _, r := range ranges {
			var st Stats
			if len(r.Result) > 0 && json.Unmarshal(r.Result, &st) == nil {
				moved += st.Moved + st.MovedBefore
			}
		}
		if moved > 0 {
			return &TTLChangeError{Record: name, Updated: rec.Updated, Earlier: rec.Job.TTL, Now: job.TTL, Moved: moved}
		}
	}
	return nil
}
