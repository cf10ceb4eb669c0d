package audit

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// ErrMerge reports reports that cannot be merged into one.
var ErrMerge = errors.New("bttl: audit reports cannot be merged")

// MergeError says why reports cannot be merged, usable with
// errors.Is(err, ErrMerge).
type MergeError struct {
	Table  string
	Reason string
}

func (e *MergeError) Error() string {
	return fmt.Sprintf("bttl: cannot merge the reports of table %q: %s", e.Table, e.Reason)
}
func (e *MergeError) Unwrap() error { return ErrMerge }

// Merge combines the reports of the shards of one scan (audit.Scan with
// scan.WithShard) into the report a single scan would have made: counts
// summed, the oldest expiry the earliest, each example the first in key
// order. The reports must be of one table, schema and clock time (Now),
// one per shard of the same count (each index i with 0 <= i < n, none
// twice, none missing), each covering non-empty key ranges, shard i's
// before shard i+1's, together covering the scanned range with no gap or
// overlap; otherwise nothing is merged and the error is a *MergeError.
func Merge(reports ...*Report) (*Report, error) {
	if len(reports) == 0 {
		return nil, &MergeError{Reason: "no reports"}
	}
	first := reports[0]
	bad := func(format string, a ...any) (*Report, error) {
		return nil, &MergeError{Table: first.Table, Reason: fmt.Sprintf(format, a...)}
	}
	count := 1
	if first.Shard != nil {
		count = first.Shard.Count
	}
	seen := map[int]bool{}
	var ranges []scan.Range
	for _, r := range reports {
		switch {
		case r == nil:
			return bad("a report is nil")
		case r.Table != first.Table:
			return bad("reports of tables %q and %q", first.Table, r.Table)
		case r.Now != first.Now:
			return bad("reports at different clock times, %s and %s (run every shard with the same -now)", rfc3339(first.Now), rfc3339(r.Now))
		case !maps.Equal(r.Schema, first.Schema):
			return bad("reports with different schemas: %s and %s", schemaString(first.Schema), schemaString(r.Schema))
		}
		sh := shardOf(r)
		// A report is read back from a file: its shard and ranges are
		// checked as input, not trusted as the scan wrote them.
		if sh.Count < 1 || sh.Index < 0 || sh.Index >= sh.Count {
			return bad("a report of shard %s, which no scan makes: want i/n with 0 <= i < n", sh)
		}
		if sh.Count != count {
			return bad("reports of %d and %d shards", count, sh.Count)
		}
		if seen[sh.Index] {
			return bad("two reports of shard %s", sh)
		}
		seen[sh.Index] = true
		if len(r.Ranges) == 0 {
			return bad("the report of shard %s covers no key range (stopped early, or written before reports said what they cover)", sh)
		}
		for _, rg := range r.Ranges {
			if rg.End != "" && rg.Start >= rg.End {
				return bad("the report of shard %s covers the key range %s, which is empty or inverted: no scan reads it", sh, rg)
			}
		}
		ranges = append(ranges, r.Ranges...)
	}
	var missing []string
	for i := 0; i < count; i++ {
		if !seen[i] {
			missing = append(missing, fmt.Sprintf("%d/%d", i, count))
		}
	}
	if len(missing) > 0 {
		return bad("missing shard(s) %s", strings.Join(missing, ", "))
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].Start < ranges[j].Start })
	for i := 1; i < len(ranges); i++ {
		if prev := ranges[i-1]; prev.End != ranges[i].Start {
			how := "a gap"
			if prev.End == "" || prev.End > ranges[i].Start {
				how = "an overlap"
			}
			return bad("%s between key ranges %s and %s (were the shards run with the same range and -shard-keys?)", how, prev, ranges[i])
		}
	}
	order := append([]*Report(nil), reports...)
	sort.Slice(order, func(i, j int) bool { return order[i].Ranges[0].Start < order[j].Ranges[0].Start })
	// Shard i's piece precedes shard i+1's (docs/design.md#scan-engine):
	// reports whose labels disagree with their ranges were not made by
	// one sharded scan.
	for i, r := range order {
		if sh := shardOf(r); sh.Index != i {
			return bad("the report of shard %s covers key range %s, where shard %d/%d's piece is (shard i reads the i-th piece in key order)", sh, r.Ranges[0], i, count)
		}
	}
	out := &Report{Table: first.Table, Now: first.Now, Schema: maps.Clone(first.Schema), Ranges: scan.Coalesce(ranges)}
	m := newMerger(out)
	for _, r := range order {
		m.add(r)
	}
	m.done()
	return out, nil
}

// shardOf is the shard a report says it covers (0/1: the whole scan).
func shardOf(r *Report) scan.Shard {
	if r.Shard != nil {
		return *r.Shard
	}
	return scan.Shard{Index: 0, Count: 1}
}

func schemaString(s map[string]string) string {
	var parts []string
	for _, f := range sortedKeys(s) {
		parts = append(parts, f+"="+s[f])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// merger adds reports, in key order, into one.
type merger struct {
	rep  *Report
	fams map[string]*Family
}

func newMerger(rep *Report) *merger { return &merger{rep: rep, fams: map[string]*Family{}} }

func (m *merger) family(f *Family) *Family {
	if s, ok := m.fams[f.Family]; ok {
		return s
	}
	s := &Family{Family: f.Family, Strategy: f.Strategy, Versions: f.Versions, policy: f.policy, managed: f.managed,
		GCRule: f.GCRule, RuleMatches: f.RuleMatches}
	m.fams[f.Family] = s
	return s
}

// add adds part, which covers keys after those added before.
func (m *merger) add(part *Report) {
	r := m.rep
	r.Rows += part.Rows
	r.Cells += part.Cells
	r.RowsOver100MB += part.RowsOver100MB
	r.LargestRowBytes = max(r.LargestRowBytes, part.LargestRowBytes)
	for i := range part.Families {
		m.family(&part.Families[i]).add(&part.Families[i])
	}
}

// done writes the families, sorted, into the report.
func (m *merger) done() {
	m.rep.Families = m.rep.Families[:0]
	for _, f := range m.fams {
		m.rep.Families = append(m.rep.Families, *f)
	}
	sort.Slice(m.rep.Families, func(i, j int) bool { return m.rep.Families[i].Family < m.rep.Families[j].Family })
}

// add adds o's counts; o covers keys after those counted so far, so an
// example is kept if there is one already.
func (s *Family) add(o *Family) {
	if s.GCRule != o.GCRule || s.RuleMatches != o.RuleMatches {
		s.GCRule, s.RuleMatches = "", false // shards that read different rules: unknown
	}
	s.Cells += o.Cells
	s.Bytes += o.Bytes
	s.Live += o.Live
	s.Expired += o.Expired
	s.ExpiredBytes += o.ExpiredBytes
	if o.OldestExpiry != 0 && (s.OldestExpiry == 0 || o.OldestExpiry < s.OldestExpiry) {
		s.OldestExpiry = o.OldestExpiry
	}
	s.NotOnRule += o.NotOnRule
	s.NotOnRuleBytes += o.NotOnRuleBytes
	s.AtOrBeforeNow += o.AtOrBeforeNow
	s.BeyondKept += o.BeyondKept
	s.BeyondKeptBytes += o.BeyondKeptBytes
	s.NotSequence += o.NotSequence
	s.RealTimes += o.RealTimes
	s.NotSequenceBytes += o.NotSequenceBytes
	s.SequenceNumbers += o.SequenceNumbers
	s.Companions += o.Companions
	s.CompanionBytes += o.CompanionBytes
	s.HiddenReserved += o.HiddenReserved
	s.HiddenReservedBytes += o.HiddenReservedBytes
	for _, x := range []struct {
		dst **Cell
		src *Cell
	}{
		{&s.AtOrBeforeNowExample, o.AtOrBeforeNowExample},
		{&s.NotSequenceExample, o.NotSequenceExample},
		{&s.SequenceNumbersExample, o.SequenceNumbersExample},
		{&s.HiddenReservedExample, o.HiddenReservedExample},
	} {
		if *x.dst == nil {
			*x.dst = x.src // the first in key order
		}
	}
}

func rfc3339(t bigtable.Timestamp) string { return t.Time().UTC().Format(time.RFC3339Nano) }
