package migratejob

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// ReportVersion is the version of ShardReport's and JobResult's JSON
// schema. A field is only ever added; a change of meaning or a removal
// raises the version, and Merge refuses reports of another version.
const ReportVersion = 1

// Counts is Stats as the JSON reports write it: what a run (or, summed,
// a job) did to the cells it read. See Stats for each count's meaning.
type Counts struct {
	Rows           int64 `json:"rows"`
	Cells          int64 `json:"cells"`
	Moved          int64 `json:"moved"`
	MovedBefore    int64 `json:"moved_before"`
	OnTarget       int64 `json:"on_target"`
	ExpiredDeleted int64 `json:"expired_deleted"`
	DeletedBefore  int64 `json:"deleted_before"`
	ExpiredLeft    int64 `json:"expired_left"`
	Ambiguous      int64 `json:"ambiguous"`
	Changed        int64 `json:"changed"`
	Collisions     int64 `json:"collisions"`
	TooLargeToPin  int64 `json:"too_large_to_pin"`
	OutOfRange     int64 `json:"out_of_range"`
	NotRealTimes   int64 `json:"not_real_times"`
}

// CountsOf is s's counts.
func CountsOf(s Stats) Counts {
	return Counts{Rows: s.Rows, Cells: s.Cells, Moved: s.Moved, MovedBefore: s.MovedBefore, OnTarget: s.OnTarget,
		ExpiredDeleted: s.ExpiredDeleted, DeletedBefore: s.DeletedBefore, ExpiredLeft: s.ExpiredLeft, Ambiguous: s.Ambiguous,
		Changed: s.Changed, Collisions: s.Collisions, TooLargeToPin: s.TooLargeToPin, OutOfRange: s.OutOfRange, NotRealTimes: s.NotRealTimes}
}

func (c Counts) plus(o Counts) Counts {
	c.Rows += o.Rows
	c.Cells += o.Cells
	c.Moved += o.Moved
	c.MovedBefore += o.MovedBefore
	c.OnTarget += o.OnTarget
	c.ExpiredDeleted += o.ExpiredDeleted
	c.DeletedBefore += o.DeletedBefore
	c.ExpiredLeft += o.ExpiredLeft
	c.Ambiguous += o.Ambiguous
	c.Changed += o.Changed
	c.Collisions += o.Collisions
	c.TooLargeToPin += o.TooLargeToPin
	c.OutOfRange += o.OutOfRange
	c.NotRealTimes += o.NotRealTimes
	return c
}

// Unmoved is Stats.Unmoved of the counts.
func (c Counts) Unmoved() int64 {
	return c.Changed + c.Collisions + c.TooLargeToPin + c.OutOfRange + c.NotRealTimes + c.Ambiguous
}

// MovedByJob is every cell the job moved (or copied): by this run, by
// earlier attempts at ranges read again, and in ranges finished earlier
// (when the counts are a Total).
func (c Counts) MovedByJob() int64 { return c.Moved + c.MovedBefore }

// DeletedByJob is every expired cell the job deleted.
func (c Counts) DeletedByJob() int64 { return c.ExpiredDeleted + c.DeletedBefore }

// ReportCell is one cell in a JSON report: where it is, its timestamp
// (microseconds, and RFC 3339 UTC) and, for a moved cell, its new one.
// Row and Column are the key and qualifier; one that is not valid UTF-8
// (which JSON cannot carry) is written Go-quoted ("\xff..."), and
// Quoted says so: bttl migrate resolve takes both forms.
type ReportCell struct {
	Row       string `json:"row"`
	Family    string `json:"family"`
	Column    string `json:"column"`
	Quoted    bool   `json:"quoted,omitempty"`
	Timestamp int64  `json:"timestamp_micros"`
	Time      string `json:"time"`
	// NewTimestamp is the moved (or copied) cell's timestamp, 0 otherwise.
	NewTimestamp int64 `json:"new_timestamp_micros,omitempty"`
	// What: "moved", "deleted", "expired_kept" or "ambiguous".
	What string `json:"what"`
}

// ShardReport is one run of one shard of a migration job, as `bttl
// migrate -json` prints it; Merge combines the shards' reports into the
// job's result. Its schema is ReportVersion's.
type ShardReport struct {
	Version int    `json:"version"`
	Table   string `json:"table"`
	// Family is the source family; ToFamily the family copied into
	// ("" in place).
	Family   string `json:"family"`
	ToFamily string `json:"to_family,omitempty"`
	// Job is the plan (two reports are of one job when their Jobs are
	// equal); DryRun says the run wrote nothing.
	Job    Job        `json:"job"`
	DryRun bool       `json:"dry_run"`
	Shard  scan.Shard `json:"shard"`
	Piece  scan.Range `json:"piece"`
	// Now is the instant expiry was judged at (RFC 3339 UTC).
	Now string `json:"now"`
	// Ranges, RangesDone and RangesResumed are the shard's key ranges,
	// those finished (by any run) and those finished by an earlier run
	// and not read again.
	Ranges        int `json:"ranges"`
	RangesDone    int `json:"ranges_done"`
	RangesResumed int `json:"ranges_resumed"`
	// Complete: nothing in the shard is left to move (every cell read
	// was moved, on the target, expired, or deleted): the shard's part of
	// the job is done (for a dry run: would be).
	Complete bool `json:"complete"`
	// Run is this run's counts, Earlier those recorded for the ranges
	// finished earlier (not read again), Total their sum: the shard's.
	Run     Counts `json:"run"`
	Earlier Counts `json:"earlier"`
	Total   Counts `json:"total"`
	// Ambiguous is every ambiguous cell this run read (with
	// WithAllAmbiguous; ranges holding one are never finished, so a
	// resumed run reads them again and lists them all), never capped;
	// Examples the first changed cells.
	Ambiguous []ReportCell `json:"ambiguous"`
	Examples  []ReportCell `json:"examples"`
	// Witnesses are the last cell moved in each of the shard's finished
	// key ranges that moved one (by this run or, resumed, an earlier
	// one), as its checkpoint records them: while they are stored, the
	// report still describes the table (Witness.Stored); a restore from a
	// backup or a table re-created under the same name removes them.
	// Absent from reports of runs without a checkpoint and of dry runs.
	Witnesses []Witness `json:"witnesses,omitempty"`
}

// ShardReport is rep as a shard's JSON report, for the Migrator's plan on
// table.
func (m *Migrator) ShardReport(rep *Report) *ShardReport {
	out := &ShardReport{Version: ReportVersion, Table: m.table, Family: m.plan.Family, ToFamily: m.plan.ToFamily, Job: m.Job(), DryRun: m.dryRun, Now: formatTime(rep.Now),
		Run: CountsOf(rep.Stats), Earlier: CountsOf(rep.Earlier), Ambiguous: []ReportCell{}, Examples: []ReportCell{}}
	out.Job.DryRun = false // the plan; DryRun says how it ran
	out.Total = out.Run.plus(out.Earlier)
	out.Complete = out.Run.Unmoved() == 0
	if s := rep.Scan; s != nil {
		out.Shard, out.Piece, out.Ranges = s.Shard, s.Piece, len(s.Ranges)
		for _, r := range s.Ranges {
			if r.Done {
				out.RangesDone++
			}
			if r.Resumed {
				out.RangesResumed++
			}
		}
	}
	if s := rep.Scan; s != nil && !m.dryRun {
		for _, r := range s.Ranges {
			var rr rangeResult
			if r.Done && r.Result != nil && json.Unmarshal(r.Result, &rr) == nil && rr.Witness != nil {
				out.Witnesses = append(out.Witnesses, *rr.Witness)
			}
		}
	}
	for _, x := range rep.AmbiguousExamples {
		out.Ambiguous = append(out.Ambiguous, m.reportCell(x, "ambiguous"))
	}
	sortCells(out.Ambiguous) // found by concurrent workers: in key order
	for _, x := range rep.Examples {
		what := "moved"
		switch {
		case x.Deleted:
			what = "deleted"
		case x.Expired:
			what = "expired_kept"
		}
		out.Examples = append(out.Examples, m.reportCell(x, what))
	}
	return out
}

func (m *Migrator) reportCell(x Example, what string) ReportCell {
	c := ReportCell{Row: x.Row, Family: m.plan.Family, Column: x.Column, Timestamp: int64(x.Old), Time: formatTimestamp(x.Old),
		NewTimestamp: int64(x.New), What: what}
	if !utf8.ValidString(c.Row) || !utf8.ValidString(c.Column) {
		c.Row, c.Column, c.Quoted = strconv.Quote(c.Row), strconv.Quote(c.Column), true
	}
	return c
}

// JobResult is the whole job's result, merged from every shard's report
// (Merge): as `bttl migrate merge -json` prints it.
type JobResult struct {
	Version  int    `json:"version"`
	Table    string `json:"table"`
	Family   string `json:"family"`
	ToFamily string `json:"to_family,omitempty"`
	// Now is the latest of the shards' Now.
	Now    string `json:"now"`
	Job    Job    `json:"job"`
	DryRun bool   `json:"dry_run"`
	Shards int    `json:"shards"`
	// Complete: every shard is complete: the job is done (a dry run's:
	// would be); only then is the step after the migration due.
	Complete bool `json:"complete"`
	// Incomplete lists the shards ("i/n") with something left to move.
	Incomplete []string `json:"incomplete"`
	// Total sums the shards' totals.
	Total Counts `json:"total"`
	// Ambiguous is every shard's ambiguous cells.
	Ambiguous []ReportCell `json:"ambiguous"`
}

// ErrMerge reports shard reports that do not make one job's result.
var ErrMerge = errors.New("bttl: migration reports cannot be merged")

// MergeError says why (errors.Is(err, ErrMerge)).
type MergeError struct{ Reason string }

func (e *MergeError) Error() string {
	return fmt.Sprintf("%v: %s", ErrMerge, e.Reason)
}

func (e *MergeError) Unwrap() error { return ErrMerge }

// Merge combines the reports of every shard of one job into its result.
// The reports must be of ReportVersion, one table, one Job, all dry runs
// or none, one per shard of the same count (none missing, none twice),
// whose pieces follow each other in shard order with no gap or overlap;
// otherwise nothing is merged and the error is a *MergeError naming what
// differs. A shard that is not complete is merged and listed in
// Incomplete (the job is not done); its report is still its latest run's.
func Merge(reports ...*ShardReport) (*JobResult, error) {
	bad := func(format string, a ...any) (*JobResult, error) {
		return nil, &MergeError{Reason: fmt.Sprintf(format, a...)}
	}
	if len(reports) == 0 {
		return bad("no reports")
	}
	first := reports[0]
	for _, r := range reports {
		switch {
		case r == nil:
			return bad("a report is nil")
		case r.Version != ReportVersion:
			return bad("a report of schema version %d (shard %s); this bttl merges version %d", r.Version, r.Shard, ReportVersion)
		case r.Table != first.Table:
			return bad("reports of tables %q and %q", first.Table, r.Table)
		case r.Family != first.Family || r.ToFamily != first.ToFamily:
			return bad("reports of families %q -> %q and %q -> %q", first.Family, first.ToFamily, r.Family, r.ToFamily)
		case !first.Job.equal(r.Job):
			return bad("reports of two jobs: shard %s ran %s and shard %s ran %s (every shard must run the same flags)",
				first.Shard, first.Job, r.Shard, r.Job)
		case r.DryRun != first.DryRun:
			return bad("shard %s's report is of a dry run and shard %s's of a real run", dryShard(reports), realShard(reports))
		case r.Shard.Count < 1 || r.Shard.Index < 0 || r.Shard.Index >= r.Shard.Count:
			return bad("a report of shard %s, which no run makes: want i/n with 0 <= i < n", r.Shard)
		case r.Shard.Count != first.Shard.Count:
			return bad("reports of %d and %d shards", first.Shard.Count, r.Shard.Count)
		}
	}
	n := first.Shard.Count
	byIndex := make([]*ShardReport, n)
	for _, r := range reports {
		if byIndex[r.Shard.Index] != nil {
			return bad("two reports of shard %s", r.Shard)
		}
		byIndex[r.Shard.Index] = r
	}
	var missing []string
	for i, r := range byIndex {
		if r == nil {
			missing = append(missing, fmt.Sprintf("%d/%d", i, n))
		}
	}
	if len(missing) > 0 {
		return bad("missing the report of shard(s) %s: the job's result needs every shard's", strings.Join(missing, ", "))
	}
	for i := 1; i < n; i++ {
		prev, cur := byIndex[i-1].Piece, byIndex[i].Piece
		if prev.End == "" || prev.End != cur.Start {
			how := "a gap"
			if prev.End == "" || prev.End > cur.Start {
				how = "an overlap"
			}
			return bad("%s between shard %d/%d's keys %s and shard %d/%d's %s (were the shards run with the same -shard-keys and range?)", how, i-1, n, prev, i, n, cur)
		}
	}
	out := &JobResult{Version: ReportVersion, Table: first.Table, Family: first.Family, ToFamily: first.ToFamily, Job: first.Job, DryRun: first.DryRun, Shards: n,
		Incomplete: []string{}, Ambiguous: []ReportCell{}}
	var latest time.Time
	for _, r := range byIndex {
		out.Total = out.Total.plus(r.Total)
		if t, err := time.Parse(time.RFC3339Nano, r.Now); err == nil && t.After(latest) {
			latest, out.Now = t, r.Now
		}
		out.Ambiguous = append(out.Ambiguous, r.Ambiguous...)
		if !r.Complete {
			out.Incomplete = append(out.Incomplete, r.Shard.String())
		}
	}
	out.Complete = len(out.Incomplete) == 0
	return out, nil
}

func dryShard(rs []*ShardReport) scan.Shard {
	for _, r := range rs {
		if r.DryRun {
			return r.Shard
		}
	}
	return scan.Shard{}
}

func realShard(rs []*ShardReport) scan.Shard {
	for _, r := range rs {
		if !r.DryRun {
			return r.Shard
		}
	}
	return scan.Shard{}
}

// equal compares the plans (DryRun apart: ShardReport.DryRun says it).
func (j Job) equal(o Job) bool {
	a, b := j, o
	return a.Migrate == b.Migrate && slices.Equal(a.TTL, b.TTL) && a.FirstSwitch == b.FirstSwitch && a.WrittenBefore == b.WrittenBefore &&
		a.ClockSkew == b.ClockSkew && a.WriteTimeComplete == b.WriteTimeComplete && a.Expired == b.Expired && a.ExpiredAsOf == b.ExpiredAsOf
}

func (j Job) String() string {
	s := j.Migrate
	if len(j.TTL) > 0 {
		s += " with TTL " + strings.Join(j.TTL, "; ")
	}
	if j.FirstSwitch != "" {
		s += fmt.Sprintf(", window %s..%s (skew %s)", j.FirstSwitch, j.WrittenBefore, j.ClockSkew)
	}
	if j.WriteTimeComplete {
		s += ", write times complete"
	}
	s += ", expired " + j.Expired
	if j.ExpiredAsOf != "" {
		s += " as of " + j.ExpiredAsOf
	}
	return s
}

// sortCells orders cells by row, column and timestamp.
func sortCells(cs []ReportCell) {
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.Row != b.Row {
			return a.Row < b.Row
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Timestamp > b.Timestamp
	})
}
