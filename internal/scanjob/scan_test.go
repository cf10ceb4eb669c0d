package scanjob_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	scan "github.com/bttl/bttl/internal/scanjob"
)

// hashedKey spreads keys over the key space, as binary hashed row keys
// are.
func hashedKey(i int) string {
	h := uint32(i) * 2654435761
	return string([]byte{byte(h >> 24), byte(h >> 16), byte(h >> 8), byte(h)})
}

// load writes rows rows of cols cells each, keyed by key.
func load(t *testing.T, tbl *bigtable.Table, rows, cols int, key func(int) string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	var muts []*bigtable.Mutation
	flush := func() {
		errs, err := tbl.ApplyBulk(ctx, keys[len(keys)-len(muts):], muts)
		require.NoError(t, err)
		require.Nil(t, errs)
		muts = muts[:0]
	}
	for i := 0; i < rows; i++ {
		m := bigtable.NewMutation()
		for c := 0; c < cols; c++ {
			m.Set("f", fmt.Sprintf("c%d", c), 1000, []byte("v"))
		}
		keys = append(keys, key(i))
		muts = append(muts, m)
		if len(muts) == 500 {
			flush()
		}
	}
	if len(muts) > 0 {
		flush()
	}
	sort.Strings(keys)
	return keys
}

func newTable(t *testing.T) *bigtable.Table {
	t.Helper()
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTable(ctx, "t"))
	require.NoError(t, h.Admin.CreateColumnFamily(ctx, "t", "f"))
	return h.Raw.Open("t")
}

// counter counts deliveries per row key, safely from the workers.
type counter struct {
	mu   sync.Mutex
	seen map[string]int
}

func newCounter() *counter { return &counter{seen: map[string]int{}} }

func (c *counter) row(_ context.Context, r bigtable.Row) error {
	c.mu.Lock()
	c.seen[r.Key()]++
	c.mu.Unlock()
	return nil
}

func TestRunDeliversEveryRowOnceWithWorkers(t *testing.T) {
	tbl := newTable(t)
	keys := load(t, tbl, 3000, 2, func(i int) string { return fmt.Sprintf("row%06d", i) })
	c := newCounter()
	var inFlight, peak atomic.Int32
	sum, err := scan.Run(context.Background(), tbl, "t", func(ctx context.Context, r bigtable.Row) error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(50 * time.Microsecond) // overlap the workers' calls
		return c.row(ctx, r)
	}, scan.WithWorkers(4), scan.WithRanges(8))
	require.NoError(t, err)
	require.Len(t, c.seen, len(keys))
	for _, k := range keys {
		require.Equal(t, 1, c.seen[k], k)
	}
	assert.EqualValues(t, 3000, sum.Rows)
	assert.EqualValues(t, 6000, sum.Cells)
	assert.True(t, sum.Complete())
	assert.LessOrEqual(t, len(sum.Ranges), 8)
	assert.Greater(t, len(sum.Ranges), 1, "bttest samples about 1%% of rows: several ranges")
	assert.Equal(t, []scan.Range{{}}, sum.Covered(), "the ranges tile the whole table")
	assert.Equal(t, "", sum.Ranges[0].Range.Start, "first range open-ended")
	assert.Equal(t, "", sum.Ranges[len(sum.Ranges)-1].Range.End, "last range open-ended")
	assert.LessOrEqual(t, peak.Load(), int32(4), "at most WithWorkers calls at once")
	assert.Greater(t, peak.Load(), int32(1), "the workers run concurrently")
}

// Shards computed by separate runs (each with its own SampleRowKeys
// answer, which bttest draws at random) are disjoint and cover every row:
// their boundaries depend on the options only.
func TestShardsAreDisjointAndCoverEveryRow(t *testing.T) {
	tbl := newTable(t)
	keys := load(t, tbl, 2000, 1, hashedKey)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts []scan.Option
	}{
		{"even key-space split", nil},
		{"key range", []scan.Option{scan.WithRange("\x40", "\xc0")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 3
			all := newCounter()
			var pieces []scan.Range
			for i := 0; i < n; i++ {
				for run := 0; run < 2; run++ { // twice: the same piece each time
					sc := newCounter()
					sum, err := scan.Run(ctx, tbl, "t", sc.row, append(c.opts, scan.WithShard(i, n), scan.WithWorkers(2))...)
					require.NoError(t, err)
					if run == 0 {
						pieces = append(pieces, sum.Piece)
						for k := range sc.seen {
							all.seen[k]++
						}
					} else {
						assert.Equal(t, pieces[i], sum.Piece, "shard %d: same piece in another run", i)
					}
					for k := range sc.seen {
						assert.True(t, sum.Piece.Contains(k), "shard %d delivered %q outside its piece %s", i, k, sum.Piece)
					}
				}
			}
			start, end := "", ""
			if len(c.opts) > 0 {
				start, end = "\x40", "\xc0"
			}
			assert.Equal(t, []scan.Range{{Start: start, End: end}}, scan.Coalesce(pieces), "the pieces tile the scanned range")
			want := 0
			for _, k := range keys {
				if (scan.Range{Start: start, End: end}).Contains(k) {
					want++
					require.Equal(t, 1, all.seen[k], "row %q delivered once over all shards", k)
				}
			}
			assert.Len(t, all.seen, want)
			for i, p := range pieces {
				assert.NotZero(t, countIn(keys, p), "shard %d of spread keys is not empty", i)
			}
		})
	}
}

func countIn(keys []string, r scan.Range) int {
	n := 0
	for _, k := range keys {
		if r.Contains(k) {
			n++
		}
	}
	return n
}

// A run cancelled mid-scan and restarted with its checkpoint delivers every
// row at least once, and does not read again the ranges the first run
// finished.
func TestCheckpointResumeAfterCancel(t *testing.T) {
	tbl := newTable(t)
	keys := load(t, tbl, 6000, 1, func(i int) string { return fmt.Sprintf("row%06d", i) })
	path := filepath.Join(t.TempDir(), "ck.json")
	ctx, cancel := context.WithCancel(context.Background())
	first := newCounter()
	var n atomic.Int64
	sum1, err := scan.Run(ctx, tbl, "t", func(ctx context.Context, r bigtable.Row) error {
		if n.Add(1) == 3000 {
			cancel() // about half way
		}
		return first.row(ctx, r)
	}, scan.WithWorkers(2), scan.WithRanges(20), scan.WithCheckpoint(path, map[string]string{"job": "test"}))
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, sum1.Complete())
	var finished []scan.Range
	for _, r := range sum1.Ranges {
		if r.Done {
			finished = append(finished, r.Range)
		}
	}
	require.NotEmpty(t, finished, "some ranges finished before the cancel")
	require.Less(t, len(finished), len(sum1.Ranges))

	second := newCounter()
	sum2, err := scan.Run(context.Background(), tbl, "t", second.row,
		scan.WithWorkers(2), scan.WithRanges(20), scan.WithCheckpoint(path, map[string]string{"job": "test"}))
	require.NoError(t, err)
	require.True(t, sum2.Complete())
	require.Equal(t, len(sum1.Ranges), len(sum2.Ranges), "the ranges are the first run's")
	for i := range sum1.Ranges {
		assert.Equal(t, sum1.Ranges[i].Range, sum2.Ranges[i].Range)
		assert.Equal(t, sum1.Ranges[i].Done, sum2.Ranges[i].Resumed, "range %d resumed iff finished before", i)
	}
	for _, k := range keys {
		require.GreaterOrEqual(t, first.seen[k]+second.seen[k], 1, "row %q delivered at least once", k)
	}
	for k := range second.seen {
		for _, f := range finished {
			require.False(t, f.Contains(k), "row %q of finished range %s read again", k, f)
		}
	}
	assert.Less(t, len(second.seen), len(keys), "the restart skipped rows")
	t.Logf("first run: %d rows, %d of %d ranges finished; restart: %d rows", len(first.seen), len(finished), len(sum1.Ranges), len(second.seen))

	// The checkpoint fits only its own scan.
	for _, opts := range [][]scan.Option{
		{scan.WithCheckpoint(path, map[string]string{"job": "other"})},
		{scan.WithCheckpoint(path, map[string]string{"job": "test"}), scan.WithShard(1, 2)},
		{scan.WithCheckpoint(path, map[string]string{"job": "test"}), scan.WithRange("a", "b")},
	} {
		_, err := scan.Run(context.Background(), tbl, "t", second.row, opts...)
		require.ErrorIs(t, err, scan.ErrCheckpoint)
		var cerr *scan.CheckpointError
		require.ErrorAs(t, err, &cerr)
		assert.Equal(t, path, cerr.Path)
	}
	// A job that differs says how, readably: "->", not "-\u003e".
	_, err = scan.Run(context.Background(), tbl, "t", second.row, scan.WithCheckpoint(path, map[string]string{"job": "a->b"}))
	require.ErrorIs(t, err, scan.ErrCheckpoint)
	assert.Contains(t, err.Error(), `{"job":"a->b"}`)
	assert.NotContains(t, err.Error(), `\u003e`)
	_, err = scan.Run(context.Background(), tbl, "other", second.row, scan.WithCheckpoint(path, map[string]string{"job": "test"}))
	require.ErrorIs(t, err, scan.ErrCheckpoint)
	require.NoError(t, os.WriteFile(path, []byte("{"), 0o600))
	_, err = scan.Run(context.Background(), tbl, "t", second.row, scan.WithCheckpoint(path, nil))
	require.ErrorIs(t, err, scan.ErrCheckpoint)
}

// RunRanges's per-range results: those of finished ranges come back from
// the checkpoint, so a resumed count equals an uninterrupted one.
func TestRunRangesResultsSurviveRestart(t *testing.T) {
	tbl := newTable(t)
	load(t, tbl, 4000, 3, func(i int) string { return fmt.Sprintf("row%06d", i) })
	path := filepath.Join(t.TempDir(), "ck.json")
	counting := func(stopAfter int64, cancel func()) scan.RangeFunc {
		var total atomic.Int64
		return func(scan.Range) (scan.RowFunc, func() (json.RawMessage, error)) {
			var rows int64
			return func(ctx context.Context, r bigtable.Row) error {
					rows++
					if total.Add(1) == stopAfter {
						cancel()
					}
					return nil
				}, func() (json.RawMessage, error) {
					return json.Marshal(rows)
				}
		}
	}
	sumRows := func(s *scan.Summary) (n int64) {
		for _, r := range s.Ranges {
			if r.Done {
				var v int64
				require.NoError(t, json.Unmarshal(r.Result, &v))
				n += v
			}
		}
		return n
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := scan.RunRanges(ctx, tbl, "t", counting(2000, cancel), scan.WithWorkers(3), scan.WithCheckpoint(path, nil))
	require.ErrorIs(t, err, context.Canceled)
	sum, err := scan.RunRanges(context.Background(), tbl, "t", counting(-1, nil), scan.WithWorkers(3), scan.WithCheckpoint(path, nil))
	require.NoError(t, err)
	assert.EqualValues(t, 4000, sumRows(sum), "each row counted once over both runs")
	assert.Less(t, sum.Rows, int64(4000), "the restart read fewer rows than the table holds")
}

func TestCallbackErrorStopsScanNamingRange(t *testing.T) {
	tbl := newTable(t)
	load(t, tbl, 1000, 1, func(i int) string { return fmt.Sprintf("row%06d", i) })
	boom := errors.New("boom")
	_, err := scan.Run(context.Background(), tbl, "t", func(ctx context.Context, r bigtable.Row) error {
		if r.Key() == "row000500" {
			return boom
		}
		return nil
	}, scan.WithWorkers(3))
	require.ErrorIs(t, err, boom)
	var rerr *scan.RangeError
	require.ErrorAs(t, err, &rerr)
	assert.True(t, rerr.Range.Contains("row000500"), "%s", rerr.Range)
	assert.Contains(t, err.Error(), "boom")
}

// Invalid options fail before any RPC: the table does not exist, so an
// RPC would fail otherwise.
func TestInvalidOptionsFailBeforeAnyRPC(t *testing.T) {
	h := bttestharness.New(t)
	tbl := h.Raw.Open("missing")
	for _, c := range []struct {
		option string
		opts   []scan.Option
	}{
		{"workers", []scan.Option{scan.WithWorkers(0)}},
		{"shard", []scan.Option{scan.WithShard(2, 2)}},
		{"shard", []scan.Option{scan.WithShard(0, 0)}},
		{"shard keys", []scan.Option{scan.WithShard(0, 3), scan.WithShardKeys("b", "a")}},
		{"shard keys", []scan.Option{scan.WithShard(0, 3), scan.WithShardKeys("b")}},
		{"shard keys", []scan.Option{scan.WithShard(0, 2), scan.WithRange("c", "d"), scan.WithShardKeys("e")}},
		{"range", []scan.Option{scan.WithRange("b", "a")}},
		{"cells per second", []scan.Option{scan.WithCellsPerSecond(-1)}},
		{"limit", []scan.Option{scan.WithLimit(-1)}},
		{"progress", []scan.Option{scan.WithProgress(0, func(scan.Progress) {})}},
	} {
		_, err := scan.Run(context.Background(), tbl, "missing", func(context.Context, bigtable.Row) error { return nil }, c.opts...)
		require.ErrorIs(t, err, scan.ErrOption, c.option)
		var oerr *scan.OptionError
		require.ErrorAs(t, err, &oerr)
		assert.Equal(t, c.option, oerr.Option)
	}
	_, err := scan.Run(context.Background(), tbl, "missing", func(context.Context, bigtable.Row) error { return nil })
	require.Error(t, err)
	assert.NotErrorIs(t, err, scan.ErrOption, "valid options: the RPC fails")
}

func TestLimitWithOneWorkerReadsTheFirstRows(t *testing.T) {
	tbl := newTable(t)
	keys := load(t, tbl, 500, 1, func(i int) string { return fmt.Sprintf("row%06d", i) })
	var got []string
	sum, err := scan.Run(context.Background(), tbl, "t", func(_ context.Context, r bigtable.Row) error {
		got = append(got, r.Key())
		return nil
	}, scan.WithLimit(42))
	require.NoError(t, err)
	assert.Equal(t, keys[:42], got)
	assert.True(t, sum.Limited)
	assert.False(t, sum.Complete())
}

func TestCellsPerSecondLimitsTheRate(t *testing.T) {
	tbl := newTable(t)
	load(t, tbl, 300, 10, func(i int) string { return fmt.Sprintf("row%06d", i) }) // 3,000 cells
	start := time.Now()
	_, err := scan.Run(context.Background(), tbl, "t", func(context.Context, bigtable.Row) error { return nil },
		scan.WithWorkers(3), scan.WithCellsPerSecond(2000))
	require.NoError(t, err)
	// A second's allowance (the burst) at once, the other 1,000 cells at
	// 2,000 cells/s.
	elapsed := time.Since(start)
	assert.GreaterOrEqual(t, elapsed, 450*time.Millisecond)
	t.Logf("3,000 cells at 2,000 cells/s: %s", elapsed)
}

// pacerStub stops the scan once it paced limit cells.
type pacerStub struct {
	mu    sync.Mutex
	cells int
	limit int
}

var errPaceRefused = errors.New("pace refused")

func (p *pacerStub) WaitN(_ context.Context, n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cells+n > p.limit {
		return errPaceRefused
	}
	p.cells += n
	return nil
}

// WithPacer paces every cell delivered, each row before its callback, in
// place of WithCellsPerSecond's fixed rate; its error stops the scan,
// naming the range.
func TestPacerPacesEveryCellAndItsErrorStopsTheScan(t *testing.T) {
	tbl := newTable(t)
	load(t, tbl, 300, 4, func(i int) string { return fmt.Sprintf("row%06d", i) }) // 1,200 cells
	p := &pacerStub{limit: 1 << 30}
	var delivered atomic.Int64
	sum, err := scan.Run(context.Background(), tbl, "t", func(_ context.Context, r bigtable.Row) error {
		delivered.Add(int64(len(r["f"])))
		return nil
	}, scan.WithWorkers(3), scan.WithPacer(p), scan.WithCellsPerSecond(1)) // the pacer, not 1 cell/s
	require.NoError(t, err)
	assert.Equal(t, 1200, p.cells)
	assert.EqualValues(t, 1200, delivered.Load())
	assert.EqualValues(t, 1200, sum.Cells)

	stop := &pacerStub{limit: 400}
	delivered.Store(0)
	_, err = scan.Run(context.Background(), tbl, "t", func(_ context.Context, r bigtable.Row) error {
		delivered.Add(int64(len(r["f"])))
		return nil
	}, scan.WithPacer(stop))
	require.ErrorIs(t, err, errPaceRefused)
	var rerr *scan.RangeError
	require.ErrorAs(t, err, &rerr)
	assert.EqualValues(t, 400, delivered.Load(), "no row past the refusal reaches the callback")
}

func TestProgressReachesOne(t *testing.T) {
	tbl := newTable(t)
	load(t, tbl, 2000, 1, func(i int) string { return fmt.Sprintf("row%06d", i) })
	var mu sync.Mutex
	var seen []scan.Progress
	_, err := scan.Run(context.Background(), tbl, "t", func(context.Context, bigtable.Row) error { return nil },
		scan.WithWorkers(2), scan.WithProgress(time.Millisecond, func(p scan.Progress) {
			mu.Lock()
			seen = append(seen, p)
			mu.Unlock()
		}))
	require.NoError(t, err)
	require.NotEmpty(t, seen)
	last := seen[len(seen)-1]
	assert.Equal(t, 1.0, last.Fraction)
	assert.Equal(t, last.Ranges, last.RangesDone)
	assert.EqualValues(t, 2000, last.Rows)
	for i := 1; i < len(seen); i++ {
		assert.GreaterOrEqual(t, seen[i].Fraction, seen[i-1].Fraction, "monotonic")
	}
}

// SuggestShardKeys gives balanced shards for keys that share a prefix,
// which the even key-space split puts in one shard.
func TestSuggestShardKeysBalancesPrefixedKeys(t *testing.T) {
	tbl := newTable(t)
	keys := load(t, tbl, 20000, 1, func(i int) string { return fmt.Sprintf("user#%06d", i) })
	ctx := context.Background()
	sk, err := scan.SuggestShardKeys(ctx, tbl, "", "", 4)
	require.NoError(t, err)
	require.Len(t, sk, 3)
	piece := func(i int, opts ...scan.Option) scan.Range {
		sum, err := scan.Run(ctx, tbl, "t", func(context.Context, bigtable.Row) error { return nil },
			append(opts, scan.WithShard(i, 4), scan.WithLimit(1))...)
		require.NoError(t, err)
		return sum.Piece
	}
	for i := 0; i < 4; i++ {
		// bttest samples each row with probability 1%: about 50 sample
		// intervals a shard, so a shard's size varies by about 15%.
		assert.InDelta(t, 5000, countIn(keys, piece(i, scan.WithShardKeys(sk...))), 2500, "shard %d of 4: about a quarter", i)
	}
	// The even split's boundaries are 0x40, 0x80, 0xc0: "u" (0x75) is in
	// shard 1.
	assert.Equal(t, len(keys), countIn(keys, piece(1)), "the even split puts every \"user#\" key in one shard")
}

// The checkpoint records WithCheckpoint's and WithJob's jobs and the
// filters: a run with another job, no job or other filters is refused, as
// its results would not be the recorded ones.
func TestCheckpointRecordsJobsAndFilters(t *testing.T) {
	tbl := newTable(t)
	load(t, tbl, 200, 1, func(i int) string { return fmt.Sprintf("row%04d", i) })
	path := filepath.Join(t.TempDir(), "ck.json")
	ctx := context.Background()
	rows := func(context.Context, bigtable.Row) error { return nil }
	sample := scan.WithFilter(bigtable.RowSampleFilter(0.5))
	opts := []scan.Option{scan.WithCheckpoint(path, "caller"), scan.WithJob("library"), sample}
	_, err := scan.Run(ctx, tbl, "t", rows, opts...)
	require.NoError(t, err)
	var ck struct {
		Job     json.RawMessage `json:"job"`
		Filters []string        `json:"filters"`
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ck))
	assert.JSONEq(t, `["caller","library"]`, string(ck.Job))
	assert.Equal(t, []string{bigtable.RowSampleFilter(0.5).String()}, ck.Filters)

	sum, err := scan.Run(ctx, tbl, "t", rows, opts...)
	require.NoError(t, err, "the same scan resumes")
	for _, r := range sum.Ranges {
		assert.True(t, r.Resumed, "range %s resumed", r.Range)
	}
	for name, o := range map[string][]scan.Option{
		"no sample":     {scan.WithCheckpoint(path, "caller"), scan.WithJob("library")},
		"other sample":  {scan.WithCheckpoint(path, "caller"), scan.WithJob("library"), scan.WithFilter(bigtable.RowSampleFilter(0.25))},
		"other job":     {scan.WithCheckpoint(path, "caller"), scan.WithJob("other"), sample},
		"no added job":  {scan.WithCheckpoint(path, "caller"), sample},
		"no caller job": {scan.WithCheckpoint(path, nil), scan.WithJob("library"), sample},
	} {
		_, err := scan.Run(ctx, tbl, "t", rows, o...)
		require.ErrorIs(t, err, scan.ErrCheckpoint, name)
	}

	// A checkpoint written before filters were recorded (no "filters"
	// key) is not checked against them.
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &raw))
	delete(raw, "filters")
	b, err = json.Marshal(raw)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	_, err = scan.Run(ctx, tbl, "t", rows, scan.WithCheckpoint(path, "caller"), scan.WithJob("library"))
	require.NoError(t, err)
}
