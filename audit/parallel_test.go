package audit_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
)

var mixedSchema = strategy.Schema{
	"session": strategy.OneSecond(),
	"clicks":  strategy.DefaultExpiry(time.Hour),
	"doc":     strategy.Sequence(2),
}

// loadMixed writes rows rows under binary hashed keys (spread over the key
// space, so every shard of the even split gets some), each with a finding
// that depends on the row: expired clicks, real times in session and doc,
// versions beyond N, sequence numbers in clicks.
func loadMixed(t *testing.T, h *bttestharness.Harness, rows int) (*bigtable.Table, bigtable.Timestamp) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTable(ctx, "t"))
	for f := range mixedSchema {
		require.NoError(t, h.Admin.CreateColumnFamily(ctx, "t", f))
	}
	tbl := h.Raw.Open("t")
	now := bigtable.Time(h.Clock.Now()).TruncateToMilliseconds()
	minute := bigtable.Timestamp(time.Minute / time.Microsecond)
	var keys []string
	var muts []*bigtable.Mutation
	for i := 0; i < rows; i++ {
		m := bigtable.NewMutation()
		m.Set("clicks", "c", now-bigtable.Timestamp(i%120)*minute, []byte("click")) // expired past 60 minutes
		if i%7 == 0 {
			m.Set("clicks", "seq", 5000, []byte("s"))
		}
		if i%5 == 0 {
			m.Set("session", "tok", now-bigtable.Timestamp(i)*minute, []byte("real time"))
		} else {
			m.Set("session", "tok", now+60*minute, []byte("expiry"))
		}
		for v := 1; v <= 1+i%3; v++ {
			m.Set("doc", "body", bigtable.Timestamp(v*1000), []byte(fmt.Sprint("v", v)))
		}
		if i%11 == 0 {
			m.Set("doc", "body", now, []byte("real"))
		}
		h := uint32(i) * 2654435761
		keys = append(keys, string([]byte{byte(h >> 24), byte(h >> 16), byte(h >> 8), byte(h), 'r'}))
		muts = append(muts, m)
	}
	errs, err := tbl.ApplyBulk(ctx, keys, muts)
	require.NoError(t, err)
	require.Nil(t, errs)
	return tbl, now
}

// Counts kept per range and merged in key order: four workers report what
// one does, examples included.
func TestScanWithWorkersEqualsOneWorker(t *testing.T) {
	h := bttestharness.New(t)
	tbl, now := loadMixed(t, h, 3000)
	ctx := context.Background()
	one, err := audit.Scan(ctx, tbl, "t", mixedSchema, now)
	require.NoError(t, err)
	four, err := audit.Scan(ctx, tbl, "t", mixedSchema, now, scan.WithWorkers(4), scan.WithRanges(16))
	require.NoError(t, err)
	assert.Equal(t, one, four)
	assert.EqualValues(t, 3000, one.Rows)
	assert.Equal(t, []scan.Range{{}}, one.Ranges, "a whole scan covers the table")
	assert.Nil(t, one.Shard)
	for _, f := range one.Families {
		t.Logf("%s: %+v", f.Family, f)
	}
	require.Len(t, one.Families, 3)
	assert.NotNil(t, one.Families[0].SequenceNumbersExample, "clicks")
	assert.NotNil(t, one.Families[1].NotSequenceExample, "doc")
	assert.NotNil(t, one.Families[2].AtOrBeforeNowExample, "session")
}

// Acceptance 3 in the library: the reports of three shards merge into the
// single scan's report; reports that do not fit together are refused.
func TestShardReportsMergeToTheWholeReport(t *testing.T) {
	h := bttestharness.New(t)
	tbl, now := loadMixed(t, h, 2000)
	ctx := context.Background()
	whole, err := audit.Scan(ctx, tbl, "t", mixedSchema, now)
	require.NoError(t, err)
	var shards []*audit.Report
	for i := 2; i >= 0; i-- { // any order
		r, err := audit.Scan(ctx, tbl, "t", mixedSchema, now, scan.WithShard(i, 3), scan.WithWorkers(2))
		require.NoError(t, err)
		require.Equal(t, &scan.Shard{Index: i, Count: 3}, r.Shard)
		require.Len(t, r.Ranges, 1)
		assert.NotZero(t, r.Rows, "shard %d", i)
		shards = append(shards, r)
	}
	merged, err := audit.Merge(shards...)
	require.NoError(t, err)
	assert.Equal(t, whole, merged)

	later, err := audit.Scan(ctx, tbl, "t", mixedSchema, now+1000, scan.WithShard(0, 3))
	require.NoError(t, err)
	other, err := audit.Scan(ctx, tbl, "t", strategy.Schema{"doc": strategy.Sequence(3)}, now, scan.WithShard(0, 3))
	require.NoError(t, err)
	narrow, err := audit.Scan(ctx, tbl, "t", mixedSchema, now, scan.WithRange("\x10", ""), scan.WithShard(0, 3))
	require.NoError(t, err)
	for _, c := range []struct {
		reports []*audit.Report
		reason  string
	}{
		{[]*audit.Report{shards[0], shards[1]}, "missing shard(s) 0/3"},
		{[]*audit.Report{shards[0], shards[1], shards[2], shards[2]}, "two reports of shard 0/3"},
		{[]*audit.Report{later, shards[1], shards[0]}, "different clock times"},
		{[]*audit.Report{other, shards[1], shards[0]}, "different schemas"},
		{[]*audit.Report{narrow, shards[1], shards[0]}, "an overlap between key ranges"},
		{[]*audit.Report{whole, shards[0]}, "reports of 1 and 3 shards"},
		{nil, "no reports"},
	} {
		_, err := audit.Merge(c.reports...)
		require.ErrorIs(t, err, audit.ErrMerge, c.reason)
		var merr *audit.MergeError
		require.True(t, errors.As(err, &merr))
		assert.Contains(t, merr.Reason, c.reason)
	}
}

// Reports read back from files are input. Forged shard indexes (outside 0 <= i
// < n), labels that disagree with the ranges, and empty or inverted ranges are
// refused; before, shards 0/2, 1/2 and 7/2 merged into one report with the
// third's counts added, and a report of the inverted range ["m", "c") merged
// (issue 26 item 7).
func TestMergeRefusesForgedReports(t *testing.T) {
	h := bttestharness.New(t)
	tbl, now := loadMixed(t, h, 300)
	ctx := context.Background()
	var shards []*audit.Report
	for i := 0; i < 2; i++ {
		r, err := audit.Scan(ctx, tbl, "t", mixedSchema, now, scan.WithShard(i, 2))
		require.NoError(t, err)
		shards = append(shards, r)
	}
	_, err := audit.Merge(shards...)
	require.NoError(t, err, "the genuine shards merge")
	relabel := func(r *audit.Report, sh *scan.Shard) *audit.Report {
		c := *r
		c.Shard = sh
		return &c
	}
	cover := func(r *audit.Report, rg ...scan.Range) *audit.Report {
		c := *r
		c.Ranges = rg
		return &c
	}
	whole, err := audit.Scan(ctx, tbl, "t", mixedSchema, now)
	require.NoError(t, err)
	for _, c := range []struct {
		name    string
		reports []*audit.Report
		reason  string
	}{
		{"index past n", []*audit.Report{shards[0], shards[1], relabel(shards[1], &scan.Shard{Index: 7, Count: 2})}, "a report of shard 7/2, which no scan makes"},
		{"negative index", []*audit.Report{shards[0], shards[1], relabel(shards[1], &scan.Shard{Index: -1, Count: 2})}, "a report of shard -1/2, which no scan makes"},
		{"zero shards", []*audit.Report{relabel(whole, &scan.Shard{Index: 0, Count: 0})}, "a report of shard 0/0, which no scan makes"},
		{"inverted range", []*audit.Report{cover(whole, scan.Range{Start: "m", End: "c"})}, `covers the key range ["m", "c"), which is empty or inverted`},
		{"empty range", []*audit.Report{cover(whole, scan.Range{Start: "m", End: "m"})}, `covers the key range ["m", "m"), which is empty or inverted`},
		{"labels swapped", []*audit.Report{relabel(shards[0], &scan.Shard{Index: 1, Count: 2}), relabel(shards[1], &scan.Shard{Index: 0, Count: 2})}, "where shard 0/2's piece is"},
		{"a gap", []*audit.Report{cover(whole, scan.Range{Start: "", End: "c"}, scan.Range{Start: "m", End: ""})}, "a gap between key ranges"},
	} {
		_, err := audit.Merge(c.reports...)
		require.ErrorIs(t, err, audit.ErrMerge, c.name)
		var merr *audit.MergeError
		require.True(t, errors.As(err, &merr), c.name)
		assert.Contains(t, merr.Reason, c.reason, c.name)
	}
}

// A scan cancelled mid-way and restarted from its checkpoint reports what
// an uninterrupted scan does: finished ranges' counts come from the
// checkpoint, unfinished ones are counted again from their start.
func TestScanResumedFromCheckpointEqualsUninterrupted(t *testing.T) {
	h := bttestharness.New(t)
	tbl, now := loadMixed(t, h, 4000)
	ctx := context.Background()
	want, err := audit.Scan(ctx, tbl, "t", mixedSchema, now)
	require.NoError(t, err)

	path := filepath.Join(t.TempDir(), "audit.checkpoint")
	cctx, cancel := context.WithCancel(ctx)
	var stoppedAt scan.Progress
	_, err = audit.Scan(cctx, tbl, "t", mixedSchema, now,
		scan.WithCheckpoint(path, nil), scan.WithProgress(time.Millisecond, func(p scan.Progress) {
			if p.RangesDone >= 4 && stoppedAt.Ranges == 0 {
				stoppedAt = p
				cancel()
			}
		}),
		scan.WithWorkers(2), scan.WithRanges(20),
	)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, stoppedAt.RangesDone, stoppedAt.Ranges, "stopped before the end")

	_, err = audit.Scan(ctx, tbl, "t", mixedSchema, now+1, scan.WithCheckpoint(path, nil))
	require.ErrorIs(t, err, scan.ErrCheckpoint, "another clock time: refused")
	var rows int64
	got, err := audit.Scan(ctx, tbl, "t", mixedSchema, now,
		scan.WithCheckpoint(path, nil), scan.WithProgress(time.Hour, func(p scan.Progress) { rows = p.Rows }),
		scan.WithWorkers(2), scan.WithRanges(20))
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Less(t, rows, int64(4000), "the restart read only the unfinished ranges")
	t.Logf("stopped at %d of %d ranges; the restart read %d rows", stoppedAt.RangesDone, stoppedAt.Ranges, rows)
}
