package audit

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"cloud.google.com/go/bigtable"
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"

	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/auditrule"
	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/companion"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
)

// LargeRowBytes is the row size the report flags (Bigtable's hard limit is
// 256 MB; rows past 100 MB are already slow to read).
const LargeRowBytes = 100 << 20

// Cell points at one cell, as an example in a report.
type Cell struct {
	Row       string             `json:"row"`
	Column    string             `json:"column"`
	Timestamp bigtable.Timestamp `json:"timestamp"`
}

// Family is one family's counts. Bytes are value bytes. Cells, Bytes and
// every figure classifying them count data: in a write-time family
// (strategy.WithWriteTime) the companions and the other reserved
// qualifiers are counted apart (Companions, HiddenReserved).
type Family struct {
	Family   string `json:"family"`
	Strategy string `json:"strategy"`
	// Versions is the N kept per column (sequence, or an age family's
	// max-versions union; zero when none).
	Versions int   `json:"versions,omitempty"`
	Cells    int64 `json:"cells"`
	Bytes    int64 `json:"bytes"`
	Live     int64 `json:"live_cells"`
	// Expired: cells of an age family expired at now, still stored, in a
	// family whose GC rule is the one its strategy needs, or another that
	// collects them as soon (an age as short, beside a versions rule), or
	// was not read: the stock GC is to collect.
	Expired      int64 `json:"expired_cells"`
	ExpiredBytes int64 `json:"expired_bytes"`
	// OldestExpiry is the earliest expiry instant among them (zero: none).
	OldestExpiry bigtable.Timestamp `json:"oldest_expiry,omitempty"`
	// NotOnRule: cells of an age family that its strategy reads as expired
	// at now, in a family whose GC rule was read and is not the one the
	// strategy needs and keeps them longer (another rule, or none): not stock GC failed to
	// collect, since GC follows the family's rule, not the schema's. They
	// are real write times of legacy writers, cells of a migration under
	// way, or, with no rule at all, cells never collected
	// (docs/design.md#not-on-rule). Report.NoteGCRules moves them here
	// from Expired; they are counted in neither Expired nor Live.
	NotOnRule      int64 `json:"not_on_rule_cells"`
	NotOnRuleBytes int64 `json:"not_on_rule_bytes"`
	// AtOrBeforeNow: cells of a one-second family whose timestamps are at
	// or before now, as real or server timestamps are: a one-second
	// adoption deletes them at once.
	AtOrBeforeNow        int64 `json:"at_or_before_now_cells"`
	AtOrBeforeNowExample *Cell `json:"at_or_before_now_example,omitempty"`
	// BeyondKept: cells of a sequence family beyond the N highest
	// timestamps of their column.
	BeyondKept      int64 `json:"beyond_kept_cells"`
	BeyondKeptBytes int64 `json:"beyond_kept_bytes"`
	// NotSequence: cells of a sequence family whose timestamps are not
	// sequence numbers (seq*1000, seq >= 1, before
	// strategy.RealTimeFloor); RealTimes of them are real times, as cbt
	// and server timestamps write, which outrank every sequence number:
	// reads return them instead of new writes, which max versions
	// collects. A sequence adoption is safe only without them.
	NotSequence        int64 `json:"not_sequence_cells"`
	RealTimes          int64 `json:"real_time_cells"`
	NotSequenceExample *Cell `json:"not_sequence_example,omitempty"`
	NotSequenceBytes   int64 `json:"not_sequence_bytes"`
	// SequenceNumbers: cells of an age family (one-second, default
	// expiry) whose timestamps are before strategy.RealTimeFloor, as
	// sequence numbers are: the age rule deletes them at the next
	// compaction (they also count as expired).
	SequenceNumbers        int64 `json:"sequence_number_cells"`
	SequenceNumbersExample *Cell `json:"sequence_number_example,omitempty"`
	// Companions: write-time companions (strategy.WithWriteTime) of the
	// family's cells, CompanionBytes their value bytes: stored beside the
	// data, not data, so counted apart from every figure above (Cells
	// counts data only).
	Companions     int64 `json:"write_time_companion_cells"`
	CompanionBytes int64 `json:"write_time_companion_bytes"`
	// HiddenReserved: cells of a write-time family whose qualifiers start
	// 0xFF 0xFF (reserved) but are not companions of a cell of the row (a
	// column written before the family had write times, an orphaned or
	// forged companion): stored, hidden from every read through bttl, and
	// counted apart from Cells too.
	HiddenReserved        int64 `json:"hidden_reserved_cells"`
	HiddenReservedBytes   int64 `json:"hidden_reserved_bytes"`
	HiddenReservedExample *Cell `json:"hidden_reserved_example,omitempty"`

	// GCRule is the family's GC rule as the table carried it when the
	// report's caller read it (Report.NoteGCRules; gcrule.Describe's form,
	// "none" when the family has none), empty when not read. RuleMatches
	// says it is the rule the family's strategy needs: the family is
	// adopted, so its age figures are expiry (a one-second family's cells
	// at or before now are expired cells, not real timestamps). A managed
	// family with no rule keeps its expired cells for ever: GC never
	// collects them.
	GCRule      string `json:"gc_rule,omitempty"`
	RuleMatches bool   `json:"rule_matches,omitempty"`

	policy  strategy.Policy
	managed bool
}

// Report is one table's audit.
type Report struct {
	Table string             `json:"table"`
	Now   bigtable.Timestamp `json:"now"`
	Rows  int64              `json:"rows"`
	// Cells is every cell read, write-time companions included.
	Cells int64 `json:"cells"`
	// RowsOver100MB counts rows whose size (key, qualifiers, values and
	// 8 bytes of timestamp per cell) exceeds LargestRowBytes.
	RowsOver100MB   int64    `json:"rows_over_100mb"`
	LargestRowBytes int64    `json:"largest_row_bytes"`
	Families        []Family `json:"families"`
	// Schema is each schema family's strategy, as Family.Strategy names
	// it: what Merge checks reports agree on.
	Schema map[string]string `json:"schema,omitempty"`
	// Shard is the shard this report covers, when the scan was one of
	// several (scan.WithShard); nil for a whole scan or a merged report.
	Shard *scan.Shard `json:"shard,omitempty"`
	// Ranges are the key ranges the report covers, coalesced: one range
	// for a complete scan (the scanned range, or the shard's piece of it).
	Ranges []scan.Range `json:"ranges,omitempty"`
}

// checkpointJob identifies an audit in its checkpoint (scan.WithJob): a
// restart must classify at the same clock time, with the same schema. The
// checkpoint records a sample (scan.WithFilter) itself.
type checkpointJob struct {
	Kind   string             `json:"kind"`
	Now    bigtable.Timestamp `json:"now"`
	Schema map[string]string  `json:"schema"`
}

// Scan reads the table and counts, at now, what schema's strategies make
// of its cells. Families not in schema are reported as "not in schema" and
// counted live. The table is read by the scan engine (package scan), with
// its options: scan.WithRange and scan.WithLimit scope the scan,
// scan.WithFilter(bigtable.RowSampleFilter(f)) samples rows,
// scan.WithProgress reports progress, scan.WithCheckpoint(path) keeps
// a checkpoint (the audit records its clock time and schema in it, so a
// restart with others is refused), scan.WithWorkers reads in parallel.
// Counts are kept per key range and merged in key order, so the report
// does not depend on the workers' order.
func Scan(ctx context.Context, tbl *bigtable.Table, name string, schema strategy.Schema, now bigtable.Timestamp, opts ...scan.Option) (*Report, error) {
	rep := &Report{Table: name, Now: now, Schema: map[string]string{}}
	for f, p := range schema {
		rep.Schema[f] = p.String()
	}
	var mu sync.Mutex
	parts := map[scan.Range]*tally{}
	perRange := func(rg scan.Range) (scan.RowFunc, func() (json.RawMessage, error)) {
		t := newTally(schema, now)
		mu.Lock()
		parts[rg] = t // a range read again after a restart starts over
		mu.Unlock()
		return t.row, func() (json.RawMessage, error) { return json.Marshal(t.report()) }
	}
	job := scan.WithJob(checkpointJob{Kind: "audit", Now: now, Schema: rep.Schema})
	sum, err := scan.RunRanges(ctx, tbl, name, perRange, append(append([]scan.Option(nil), opts...), job)...)
	if err != nil {
		return nil, err
	}
	m := newMerger(rep)
	for f := range schema {
		m.family(newFamily(f, schema))
	}
	for _, r := range sum.Ranges {
		var part *Report
		switch {
		case r.Resumed:
			part = &Report{}
			if err := json.Unmarshal(r.Result, part); err != nil {
				return nil, bttlerr.Wrap(err, "audit checkpoint: range %s", r.Range)
			}
		case parts[r.Range] != nil: // read by this run (also a range a limit stopped)
			part = parts[r.Range].report()
		default:
			continue
		}
		m.add(part)
	}
	m.done()
	if sum.Shard.Count > 1 {
		sh := sum.Shard
		rep.Shard = &sh
	}
	rep.Ranges = sum.Covered()
	return rep, nil
}

// tally counts one key range.
type tally struct {
	rep    Report
	fams   map[string]*Family
	schema strategy.Schema
	now    bigtable.Timestamp
}

func newTally(schema strategy.Schema, now bigtable.Timestamp) *tally {
	return &tally{fams: map[string]*Family{}, schema: schema, now: now}
}

func (t *tally) family(f string) *Family {
	if s, ok := t.fams[f]; ok {
		return s
	}
	s := newFamily(f, t.schema)
	t.fams[f] = s
	return s
}

func newFamily(f string, schema strategy.Schema) *Family {
	s := &Family{Family: f, Strategy: notInSchema}
	if p, ok := schema[f]; ok {
		s.Strategy, s.policy, s.managed, s.Versions = p.String(), p, p.Managed(), p.VersionLimit()
	}
	return s
}

// notInSchema is the Strategy of a family the schema does not name.
const notInSchema = "not in schema"

// row counts one row; rows of a range come one at a time, in key order.
func (t *tally) row(_ context.Context, r bigtable.Row) error {
	rep := &t.rep
	rep.Rows++
	size := int64(len(r.Key()))
	for f, items := range r {
		s := t.family(f)
		var kinds []companion.Kind
		if s.managed && s.policy.HasCompanions() {
			kinds = companion.Classify(f, items)
		}
		col, idx := "", 0
		for i, it := range items {
			n := int64(len(it.Value))
			size += n + int64(len(it.Column)-len(f)-1) + 8
			rep.Cells++
			if kinds != nil && kinds[i] != companion.Data {
				s.countReserved(it, kinds[i], n)
				continue
			}
			s.Cells++
			s.Bytes += n
			if it.Column != col {
				col, idx = it.Column, 0
			}
			idx++ // cells of a column arrive newest first
			s.count(it, idx, n, t.now)
		}
	}
	if size > rep.LargestRowBytes {
		rep.LargestRowBytes = size
	}
	if size > LargeRowBytes {
		rep.RowsOver100MB++
	}
	return nil
}

// report is the range's counts, families sorted.
func (t *tally) report() *Report {
	r := t.rep
	r.Families = nil
	for _, f := range t.fams {
		r.Families = append(r.Families, *f)
	}
	sort.Slice(r.Families, func(i, j int) bool { return r.Families[i].Family < r.Families[j].Family })
	return &r
}

// count classifies one cell, the idx-th newest of its column.
func (s *Family) count(it bigtable.ReadItem, idx int, n int64, now bigtable.Timestamp) {
	if !s.managed {
		s.Live++
		return
	}
	p := s.policy
	switch p.Kind() {
	case strategy.KindSequence:
		if ts := it.Timestamp; ts < 1000 || ts%1000 != 0 || ts >= strategy.RealTimeFloor {
			if s.NotSequence == 0 {
				s.NotSequenceExample = s.example(it)
			}
			s.NotSequence++
			s.NotSequenceBytes += n
			if ts >= strategy.RealTimeFloor {
				s.RealTimes++
			}
		}
		if idx > p.VersionLimit() {
			s.BeyondKept++
			s.BeyondKeptBytes += n
			return
		}
		s.Live++
		return
	case strategy.KindOneSecond:
		if it.Timestamp <= now {
			if s.AtOrBeforeNow == 0 {
				s.AtOrBeforeNowExample = s.example(it)
			}
			s.AtOrBeforeNow++
		}
	}
	if it.Timestamp < strategy.RealTimeFloor && !p.IsLive(it.Timestamp, now) {
		if s.SequenceNumbers == 0 {
			s.SequenceNumbersExample = s.example(it)
		}
		s.SequenceNumbers++
	}
	// An age family with a max-versions union keeps only the N newest
	// live cells; the newer cells of a column expire later, so the
	// (idx)th newest is beyond N whatever its age.
	if p.VersionLimit() > 0 && idx > p.VersionLimit() {
		s.BeyondKept++
		s.BeyondKeptBytes += n
		return
	}
	if p.IsLive(it.Timestamp, now) {
		s.Live++
		return
	}
	s.Expired++
	s.ExpiredBytes += n
	if e := p.Expiry(it.Timestamp); s.OldestExpiry == 0 || e < s.OldestExpiry {
		s.OldestExpiry = e
	}
}

// countReserved counts a cell of a write-time family's reserved range.
func (s *Family) countReserved(it bigtable.ReadItem, k companion.Kind, n int64) {
	if k == companion.Companion {
		s.Companions++
		s.CompanionBytes += n
		return
	}
	if s.HiddenReserved == 0 {
		s.HiddenReservedExample = s.example(it)
	}
	s.HiddenReserved++
	s.HiddenReservedBytes += n
}

func (s *Family) example(it bigtable.ReadItem) *Cell {
	return &Cell{Row: it.Row, Column: strings.TrimPrefix(it.Column, s.Family+":"), Timestamp: it.Timestamp}
}

// NoGCRule is Family.GCRule of a family that has no GC rule.
const NoGCRule = "none"

// NoteGCRules records on each family of r the GC rule the table carries
// (families, as gcrule.Admin.Families reads them) and whether it is the
// one the family's strategy needs, so that findings are classified by the
// family's adopted state (see Family.GCRule): in an age family not on its
// rule, the cells counted Expired move to NotOnRule (GC keeps them by the
// family's own rule). A family missing from families (created after the
// read) is left unknown.
func (r *Report) NoteGCRules(families map[string]*adminpb.ColumnFamily) {
	for i := range r.Families {
		f := &r.Families[i]
		cf, ok := families[f.Family]
		if !ok {
			continue
		}
		f.GCRule = NoGCRule
		if rule := cf.GetGcRule(); rule != nil && rule.GetRule() != nil {
			f.GCRule = gcrule.Describe(rule)
		}
		f.RuleMatches = f.managed && gcrule.Check(r.Table, f.Family, f.policy, cf) == nil
		if !auditrule.CollectsExpired(cf, f.policy) {
			f.classifyByRule()
		}
	}
}

// classifyByRule moves the cells an age family's strategy reads as expired
// from Expired to NotOnRule when the family's rule was read and is not the
// one the strategy needs: GC collects by the rule the family carries, so
// they are no GC lag (docs/design.md#not-on-rule). Idempotent.
func (f *Family) classifyByRule() {
	if !f.NotOnItsRule() || f.Expired == 0 {
		return
	}
	if k := f.kind(); k != strategy.KindOneSecond.String() && k != strategy.KindDefaultExpiry.String() {
		return
	}
	f.NotOnRule += f.Expired
	f.NotOnRuleBytes += f.ExpiredBytes
	f.Expired, f.ExpiredBytes, f.OldestExpiry = 0, 0, 0
}

// NotOnItsRule reports whether the family is managed and its GC rule was
// read and is not the one its strategy needs (another rule, or none): a
// family before or during a migration, or one whose rule was changed or
// lost.
func (f *Family) NotOnItsRule() bool {
	return f.GCRule != "" && !f.RuleMatches && f.Strategy != notInSchema && f.kind() != strategy.KindUnmanaged.String()
}

// Adopted reports whether the family's GC rule was read and is the one its
// strategy needs.
func (f *Family) Adopted() bool { return f.GCRule != "" && f.RuleMatches }

// NeverCollected reports whether the family is managed and carries no GC
// rule: its expired cells are never collected.
func (f *Family) NeverCollected() bool {
	return f.GCRule == NoGCRule && f.Strategy != notInSchema && f.kind() != strategy.KindUnmanaged.String()
}
