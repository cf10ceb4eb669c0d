package audit

import (
	"context"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

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

// Family is one family's counts. Bytes are value bytes.
type Family struct {
	Family   string `json:"family"`
	Strategy string `json:"strategy"`
	// Versions is the N kept per column (sequence, or an age family's
	// max-versions union; zero when none).
	Versions int   `json:"versions,omitempty"`
	Cells    int64 `json:"cells"`
	Bytes    int64 `json:"bytes"`
	Live     int64 `json:"live_cells"`
	// Expired: cells of an age family expired at now, still stored.
	Expired      int64 `json:"expired_cells"`
	ExpiredBytes int64 `json:"expired_bytes"`
	// OldestExpiry is the earliest expiry instant among them (zero: none).
	OldestExpiry bigtable.Timestamp `json:"oldest_expiry,omitempty"`
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

	policy  strategy.Policy
	managed bool
}

// Report is one table's audit.
type Report struct {
	Table string             `json:"table"`
	Now   bigtable.Timestamp `json:"now"`
	Rows  int64              `json:"rows"`
	Cells int64              `json:"cells"`
	// RowsOver100MB counts rows whose size (key, qualifiers, values and
	// 8 bytes of timestamp per cell) exceeds LargeRowBytes.
	RowsOver100MB   int64    `json:"rows_over_100mb"`
	LargestRowBytes int64    `json:"largest_row_bytes"`
	Families        []Family `json:"families"`
}

// Progress is called during the scan, at most once per interval.
type Progress func(rows, cells int64)

// Options scope a scan.
type Options struct {
	// Rows is the row set to scan (default: the whole table).
	Rows bigtable.RowSet
	// Sample, in (0,1), reads that fraction of rows (RowSampleFilter).
	Sample float64
	// Limit stops after that many rows (0: no limit).
	Limit int64
	// Progress and ProgressEvery report progress (default every second).
	Progress      Progress
	ProgressEvery time.Duration
	// ProgressKey, when set, is called alongside Progress with the key of
	// the last row read, so a caller can place the scan among the table's
	// split points (SampleRowKeys) and estimate the fraction done.
	ProgressKey func(rows, cells int64, lastRowKey string)
}

// Scan reads the table and counts, at now, what schema's strategies make
// of its cells. Families not in schema are reported as "not in schema" and
// counted live.
func Scan(ctx context.Context, tbl *bigtable.Table, name string, schema strategy.Schema, now bigtable.Timestamp, opt Options) (*Report, error) {
	rep := &Report{Table: name, Now: now}
	fams := map[string]*Family{}
	family := func(f string) *Family {
		if s, ok := fams[f]; ok {
			return s
		}
		s := &Family{Family: f, Strategy: "not in schema"}
		if p, ok := schema[f]; ok {
			s.Strategy, s.policy, s.managed, s.Versions = p.String(), p, p.Managed(), p.Versions()
		}
		fams[f] = s
		return s
	}
	for f := range schema {
		family(f)
	}
	rows := opt.Rows
	if rows == nil {
		rows = bigtable.InfiniteRange("")
	}
	var ropts []bigtable.ReadOption
	if opt.Sample > 0 && opt.Sample < 1 {
		ropts = append(ropts, bigtable.RowFilter(bigtable.RowSampleFilter(opt.Sample)))
	}
	if opt.Limit > 0 {
		ropts = append(ropts, bigtable.LimitRows(opt.Limit))
	}
	every := opt.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	last := time.Now()
	err := tbl.ReadRows(ctx, rows, func(r bigtable.Row) bool {
		rep.Rows++
		size := int64(len(r.Key()))
		for f, items := range r {
			s := family(f)
			col, idx := "", 0
			for _, it := range items {
				n := int64(len(it.Value))
				size += n + int64(len(it.Column)-len(f)-1) + 8
				rep.Cells++
				s.Cells++
				s.Bytes += n
				if it.Column != col {
					col, idx = it.Column, 0
				}
				idx++ // cells of a column arrive newest first
				s.count(it, idx, n, now)
			}
		}
		if size > rep.LargestRowBytes {
			rep.LargestRowBytes = size
		}
		if size > LargeRowBytes {
			rep.RowsOver100MB++
		}
		if (opt.Progress != nil || opt.ProgressKey != nil) && time.Since(last) >= every {
			last = time.Now()
			if opt.Progress != nil {
				opt.Progress(rep.Rows, rep.Cells)
			}
			if opt.ProgressKey != nil {
				opt.ProgressKey(rep.Rows, rep.Cells, r.Key())
			}
		}
		return true
	}, ropts...)
	if err != nil {
		return nil, err
	}
	for _, s := range fams {
		rep.Families = append(rep.Families, *s)
	}
	sort.Slice(rep.Families, func(i, j int) bool { return rep.Families[i].Family < rep.Families[j].Family })
	return rep, nil
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
		if idx > p.Versions() {
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
	if p.Versions() > 0 && idx > p.Versions() {
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

func (s *Family) example(it bigtable.ReadItem) *Cell {
	return &Cell{Row: it.Row, Column: strings.TrimPrefix(it.Column, s.Family+":"), Timestamp: it.Timestamp}
}
