package scanjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/keytext"
)

// RowFunc is called with each row read. It is called concurrently from the
// workers, rows of one range in key order, one at a time per worker; a
// non-nil error stops the scan. A restarted run delivers again the rows of
// ranges that were unfinished (see WithCheckpoint).
type RowFunc func(ctx context.Context, r bigtable.Row) error

// RangeFunc is called when a worker starts a range, and returns the
// callback for its rows and done, called after its last row, whose result
// (JSON, or nil) the checkpoint records as the range's and Summary reports.
// A done error wrapping ErrUnfinished records the result but leaves the
// range unfinished (a rerun reads it again); any other error stops the scan.
// A range read again after a restart gets a new call: per-range state kept
// by these closures starts over, so the results of a resumed scan count
// each row once.
type RangeFunc func(rg Range) (rows RowFunc, done func() (json.RawMessage, error))

// Progress is a scan's state, for a progress line.
type Progress struct {
	Ranges, RangesDone int   // the shard's ranges; finished ones, by any run
	Rows, Cells        int64 // delivered by this run
	// Fraction is the share of the shard done, by finished ranges weighted
	// by the SampleRowKeys intervals each spans (intervals hold about the
	// same bytes).
	Fraction float64
	Elapsed  time.Duration
	// ETA is the time left at this run's pace (0 until a range finishes).
	ETA time.Duration
}

// RangeResult is one of the shard's ranges after a scan.
type RangeResult struct {
	Range Range
	Done  bool // finished, by this run or an earlier one
	// Resumed: finished by an earlier run (read from the checkpoint), not
	// read again.
	Resumed bool
	Result  json.RawMessage // what RangeFunc's done returned
}

// Summary is what a scan did.
type Summary struct {
	Table  string
	Shard  Shard
	Piece  Range         // the shard's part of the scanned range
	Ranges []RangeResult // the shard's ranges, in key order
	// Rows and Cells were delivered by this run.
	Rows, Cells int64
	// Limited: the scan stopped at WithLimit's row count.
	Limited bool
	// Undone counts the ranges an earlier run finished whose work
	// WithResumeCheck found no longer in the table (a restore, a
	// re-created table): this run read them again.
	Undone int
}

// Complete reports whether every range of the shard is finished.
func (s *Summary) Complete() bool {
	for _, r := range s.Ranges {
		if !r.Done {
			return false
		}
	}
	return true
}

// Covered returns the key ranges finished ranges cover, coalesced.
func (s *Summary) Covered() []Range {
	var rs []Range
	for _, r := range s.Ranges {
		if r.Done {
			rs = append(rs, r.Range)
		}
	}
	return Coalesce(rs)
}

// Run scans the table (tbl, named table for the checkpoint) and calls f
// with each row. See RowFunc for how f is called.
func Run(ctx context.Context, tbl *bigtable.Table, table string, f RowFunc, opts ...Option) (*Summary, error) {
	return RunRanges(ctx, tbl, table, func(Range) (RowFunc, func() (json.RawMessage, error)) {
		return f, func() (json.RawMessage, error) { return nil, nil }
	}, opts...)
}

// RunRanges scans like Run, with callbacks per range: for results
// gathered per range (audit's counts), merged in key order afterwards from
// Summary.Ranges, including those an earlier run recorded in the
// checkpoint. Once reading started, the Summary is returned also with an
// error (it is nil when the options or the checkpoint are refused, or
// SampleRowKeys fails).
func RunRanges(ctx context.Context, tbl *bigtable.Table, table string, f RangeFunc, opts ...Option) (*Summary, error) {
	return RunResumedRanges(ctx, tbl, table, func(rg Range, _ json.RawMessage) (RowFunc, func() (json.RawMessage, error)) { return f(rg) }, opts...)
}

// ResumedRangeFunc is a RangeFunc that is also given, for a range an
// earlier run read and left unfinished (its done returned an error
// wrapping ErrUnfinished), the result that run recorded in the checkpoint
// (nil otherwise): so that a result gathering events (cells a migration
// moved) can carry the earlier attempts' over, which the range's rows,
// read again, no longer show.
type ResumedRangeFunc func(rg Range, prior json.RawMessage) (rows RowFunc, done func() (json.RawMessage, error))

// RunResumedRanges is RunRanges with a ResumedRangeFunc.
func RunResumedRanges(ctx context.Context, tbl *bigtable.Table, table string, f ResumedRangeFunc, opts ...Option) (*Summary, error) {
	c := config{workers: DefaultWorkers, shard: Shard{Index: 0, Count: 1}}
	for _, o := range opts {
		o(&c)
	}
	piece, err := c.validate()
	if err != nil {
		return nil, err
	}
	job, err := c.jobJSON()
	if err != nil {
		return nil, &OptionError{Option: "checkpoint", Reason: fmt.Sprintf("job: %v", err)}
	}
	filters := c.filterNames()
	s := &Summary{Table: table, Shard: c.shard, Piece: piece}
	var st CheckpointStore
	var ck *checkpointFile
	err = c.bounded(ctx, "checkpoint", func(ctx context.Context) error {
		if st, err = c.checkpointStore(ctx, table, piece, job); err != nil || st == nil {
			return err
		}
		if ck, err = loadCheckpoint(ctx, st); err != nil || ck == nil {
			return err
		}
		return ck.fits(st.Name(), table, c.shard, piece, job, filters)
	})
	if err != nil {
		return nil, err
	}
	if ck != nil && c.resumeCheck != nil {
		if s.Undone, err = c.recheck(ctx, st.Name(), ck); err != nil {
			return nil, err
		}
	}
	var sampled []string
	if ck == nil || (c.shardWarn != nil && c.shard.Count > 1) {
		err := c.bounded(ctx, "SampleRowKeys", func(ctx context.Context) (err error) {
			sampled, err = tbl.SampleRowKeys(ctx)
			return err
		})
		var se *StallError
		if errors.As(err, &se) {
			return nil, err // names the step already
		}
		if err != nil {
			return nil, bttlerr.Wrap(err, "scan: SampleRowKeys")
		}
		if w, ok := c.balance(sampled); ok {
			w.Table = table
			c.shardWarn(w)
		}
	}
	if ck == nil {
		ck = &checkpointFile{Version: checkpointVersion, Table: table, Shard: c.shard, Piece: piece, Job: job, Filters: filters}
		for _, r := range plan(piece, sampled, c.targetRanges()) {
			ck.Ranges = append(ck.Ranges, checkpointRange{Range: r.Range, Weight: r.weight})
		}
		if st != nil {
			// Written before any read: the ranges are fixed from the first run.
			err := c.bounded(ctx, "checkpoint", func(ctx context.Context) error { return ck.write(ctx, st, time.Now()) })
			if err != nil {
				return nil, err
			}
		}
	}
	r := &runner{c: c, tbl: tbl, f: f, ck: ck, st: st, s: s, start: time.Now(), readOpts: c.readOptions()}
	err = r.run(ctx)
	if c.shardWarn != nil && c.shard.Count > 1 && err == nil && s.Complete() && s.Rows == 0 && !s.Limited && resumedNone(s) {
		c.shardWarn(ShardWarning{Table: table, Shard: c.shard, Empty: true})
	}
	return s, err
}

// Recorded returns what the checkpoint the options name records for the
// scan RunRanges would make with them: its ranges, done or not, with the
// results earlier runs recorded (Resumed set for the done ones); nil when
// there is no checkpoint (none given, or none written yet). It reads the
// record without claiming it (a Bigtable row stays its writer's) and
// checks it fits as RunRanges does. A caller that must know what earlier
// runs did before it starts (migrate's deletion run, restarted) reads it
// so.
func Recorded(ctx context.Context, table string, opts ...Option) (*Summary, error) {
	c := config{workers: DefaultWorkers, shard: Shard{Index: 0, Count: 1}}
	for _, o := range opts {
		o(&c)
	}
	piece, err := c.validate()
	if err != nil {
		return nil, err
	}
	job, err := c.jobJSON()
	if err != nil {
		return nil, &OptionError{Option: "checkpoint", Reason: fmt.Sprintf("job: %v", err)}
	}
	var ck *checkpointFile
	err = c.bounded(ctx, "checkpoint", func(ctx context.Context) error {
		st, err := c.checkpointStore(ctx, table, piece, job)
		if err != nil || st == nil {
			return err
		}
		var b []byte
		if p, ok := st.(interface {
			peek(context.Context) ([]byte, error)
		}); ok {
			b, err = p.peek(ctx)
		} else {
			b, err = st.Open(ctx) // a file: opening claims nothing
		}
		if err != nil || b == nil {
			return err
		}
		if ck, err = parseCheckpoint(st.Name(), b); err != nil {
			return err
		}
		return ck.fits(st.Name(), table, c.shard, piece, job, c.filterNames())
	})
	if err != nil || ck == nil {
		return nil, err
	}
	s := &Summary{Table: table, Shard: c.shard, Piece: piece}
	for _, cr := range ck.Ranges {
		s.Ranges = append(s.Ranges, RangeResult{Range: cr.Range, Done: cr.Done, Resumed: cr.Done, Result: cr.Result})
	}
	return s, nil
}

// recheck asks WithResumeCheck about each range ck records finished, and
// marks unfinished those whose work is gone; it returns how many. It asks
// too about each unfinished range with a recorded result, and drops the
// result whose work is gone, so that it is not handed to the range's
// next read (RunResumedRanges) as work still done.
func (c *config) recheck(ctx context.Context, name string, ck *checkpointFile) (int, error) {
	undone := 0
	for i := range ck.Ranges {
		cr := &ck.Ranges[i]
		if !cr.Done && cr.Result == nil {
			continue
		}
		var holds bool
		err := c.bounded(ctx, "checkpoint", func(ctx context.Context) (err error) {
			holds, err = c.resumeCheck(ctx, cr.Range, cr.Result)
			return err
		})
		if err != nil {
			return 0, &CheckpointError{Path: name, Reason: "cannot check range " + cr.Range.String() + " is still done", Err: err}
		}
		if !holds {
			if cr.Done {
				undone++
			}
			cr.Done, cr.Result = false, nil
		}
	}
	return undone, nil
}

func resumedNone(s *Summary) bool {
	for _, r := range s.Ranges {
		if r.Resumed {
			return false
		}
	}
	return true
}

// jobJSON is the checkpoint's job: WithCheckpoint's and WithJob's, nil
// for none.
func (c *config) jobJSON() (json.RawMessage, error) {
	jobs := c.jobs
	if c.job != nil {
		jobs = append([]any{c.job}, jobs...)
	}
	switch len(jobs) {
	case 0:
		return nil, nil
	case 1:
		return json.Marshal(jobs[0])
	}
	return json.Marshal(jobs)
}

// filterNames are the filters as the checkpoint records them; never nil,
// so that a checkpoint without filters records an empty list.
func (c *config) filterNames() []string {
	names := make([]string, len(c.filters))
	for i, f := range c.filters {
		names[i] = f.String()
	}
	return names
}

// readOptions are the options of every ReadRows: the caller's, and the
// filters chained into one.
func (c *config) readOptions() []bigtable.ReadOption {
	opts := append([]bigtable.ReadOption(nil), c.readOpts...)
	switch len(c.filters) {
	case 0:
	case 1:
		opts = append(opts, bigtable.RowFilter(c.filters[0]))
	default:
		opts = append(opts, bigtable.RowFilter(bigtable.ChainFilters(c.filters...)))
	}
	return opts
}

// errStallTimeout is the cause of a context a stall ended.
var errStallTimeout = errors.New("stall interval passed")

// bounded runs f with ctx bounded by the stall interval (none without
// WithStall); running out of it is a *StallError naming step.
func (c *config) bounded(ctx context.Context, step string, f func(context.Context) error) error {
	if c.stall <= 0 {
		return f(ctx)
	}
	sctx, cancel := context.WithTimeoutCause(ctx, c.stall, errStallTimeout)
	defer cancel()
	err := f(sctx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(sctx), errStallTimeout) {
		return &StallError{Step: step, Interval: c.stall}
	}
	return err
}

// balance checks the shard split against the sample points: a warning
// when the pieces' point counts differ more than 4x, judged only with at
// least 10 points per shard (fewer say little; the empty-shard check at
// the end still applies).
func (c *config) balance(sampled []string) (ShardWarning, bool) {
	n := c.shard.Count
	if c.shardWarn == nil || n < 2 {
		return ShardWarning{}, false
	}
	sizes := make([]int, n)
	total := 0
	for _, k := range sampled {
		if k == "" || k < c.bounds[0] || (c.bounds[n] != "" && k >= c.bounds[n]) {
			continue
		}
		i := sort.Search(n, func(i int) bool { return c.bounds[i+1] == "" || k < c.bounds[i+1] }) // the piece holding k
		sizes[i]++
		total++
	}
	lo, hi := slices.Min(sizes), slices.Max(sizes)
	if total < 10*n || hi <= 4*lo {
		return ShardWarning{}, false
	}
	return ShardWarning{Shard: c.shard, Sizes: sizes, Uneven: true}, true
}

func (c *config) validate() (Range, error) {
	bad := func(opt, format string, a ...any) (Range, error) {
		return Range{}, &OptionError{Option: opt, Reason: fmt.Sprintf(format, a...)}
	}
	switch {
	case c.workers < 1:
		return bad("workers", "%d: want at least 1", c.workers)
	case c.ranges < 0:
		return bad("ranges", "%d: want at least 1 (0: default)", c.ranges)
	case c.cellsPerSec < 0:
		return bad("cells per second", "%g: want a positive rate (0: no limit)", c.cellsPerSec)
	case c.limit < 0:
		return bad("limit", "%d: want a positive row count (0: no limit)", c.limit)
	case c.end != "" && c.start >= c.end:
		return bad("range", "start %q must sort before end %q", c.start, c.end)
	case c.progress != nil && c.progressEvery <= 0:
		return bad("progress", "interval %s: want a positive interval", c.progressEvery)
	}
	if err := c.shard.check(); err != nil {
		return Range{}, err
	}
	keys := c.shardKeys
	if !c.shardKeysSet {
		keys = splitKeySpace(c.start, c.end, c.shard.Count)
	}
	if len(keys) != c.shard.Count-1 {
		return bad("shard keys", "%d keys for %d shards: want %d", len(keys), c.shard.Count, c.shard.Count-1)
	}
	bounds := append(append([]string{c.start}, keys...), c.end)
	c.bounds = bounds
	for i := 1; i < len(bounds); i++ {
		if (bounds[i] != "" || i < len(bounds)-1) && bounds[i] <= bounds[i-1] {
			return bad("shard keys", "%s does not sort after %s: shard keys must be sorted and inside the scanned range %s (too many shards for a narrow range?)",
				keytext.Quote(bounds[i]), keytext.Quote(bounds[i-1]), Range{c.start, c.end})
		}
	}
	return Range{Start: bounds[c.shard.Index], End: bounds[c.shard.Index+1]}, nil
}

func (c *config) targetRanges() int {
	if c.ranges > 0 {
		return c.ranges
	}
	return max(64, 4*c.workers)
}

type plannedRange struct {
	Range
	weight int
}

// plan cuts piece at the sampled keys inside it into at most target
// ranges of about the same number of sample intervals; the first starts at
// the piece's start and the last ends at its end (open-ended when it is).
func plan(piece Range, sampled []string, target int) []plannedRange {
	var keys []string
	for _, k := range sampled {
		if k != "" && k > piece.Start && (piece.End == "" || k < piece.End) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	uniq := keys[:0]
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			uniq = append(uniq, k)
		}
	}
	keys = uniq
	bounds := append(append([]string{piece.Start}, keys...), piece.End)
	intervals := len(bounds) - 1
	n := min(intervals, max(target, 1))
	out := make([]plannedRange, 0, n)
	for j := 0; j < n; j++ {
		lo, hi := j*intervals/n, (j+1)*intervals/n
		out = append(out, plannedRange{Range{bounds[lo], bounds[hi]}, hi - lo})
	}
	return out
}

type runner struct {
	c        config
	tbl      *bigtable.Table
	f        ResumedRangeFunc
	ck       *checkpointFile
	st       CheckpointStore // nil: no checkpoint
	readOpts []bigtable.ReadOption
	s        *Summary
	start    time.Time

	mu          sync.Mutex // guards ck and the checkpoint file
	rows, cells atomic.Int64
	weightRun   atomic.Int64 // weight finished by this run
	rangesDone  atomic.Int64
	weightDone  atomic.Int64
	limited     atomic.Bool
}

func (r *runner) run(ctx context.Context) error {
	total := 0
	var todo []int
	for i, cr := range r.ck.Ranges {
		total += cr.Weight
		if cr.Done {
			r.rangesDone.Add(1)
			r.weightDone.Add(int64(cr.Weight))
		} else {
			todo = append(todo, i)
		}
	}
	pace := r.c.pacer
	if pace == nil && r.c.cellsPerSec > 0 {
		pace = fixedPace{rate.NewLimiter(rate.Limit(r.c.cellsPerSec), max(1, int(r.c.cellsPerSec)))}
	}
	var progressDone chan struct{}
	stopProgress := func() {}
	if r.c.progress != nil {
		progressDone = make(chan struct{})
		stop := make(chan struct{})
		go func() {
			defer close(progressDone)
			t := time.NewTicker(max(r.c.progressEvery, time.Millisecond)) // a shorter tick would only spin
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					r.c.progress(r.progress(total))
				}
			}
		}()
		stopProgress = func() { close(stop); <-progressDone; r.c.progress(r.progress(total)) }
	}

	g, gctx := errgroup.WithContext(ctx)
	next := make(chan int)
	g.Go(func() error {
		defer close(next)
		for _, i := range todo {
			select {
			case next <- i:
			case <-gctx.Done():
				return nil
			}
		}
		return nil
	})
	for w := 0; w < min(r.c.workers, max(len(todo), 1)); w++ {
		g.Go(func() error {
			for i := range next {
				if r.limited.Load() {
					continue // drain: the feeder must not block
				}
				if err := r.scanRange(gctx, i, pace); err != nil {
					return err
				}
			}
			return nil
		})
	}
	err := g.Wait()
	stopProgress()
	if err == nil {
		err = ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Rows, r.s.Cells, r.s.Limited = r.rows.Load(), r.cells.Load(), r.limited.Load()
	for _, cr := range r.ck.Ranges {
		r.s.Ranges = append(r.s.Ranges, RangeResult{Range: cr.Range, Done: cr.Done, Resumed: cr.Done && !cr.fresh, Result: cr.Result})
	}
	return err
}

func (r *runner) progress(total int) Progress {
	p := Progress{
		Ranges: len(r.ck.Ranges), RangesDone: int(r.rangesDone.Load()),
		Rows: r.rows.Load(), Cells: r.cells.Load(), Elapsed: time.Since(r.start),
	}
	if total > 0 {
		p.Fraction = float64(r.weightDone.Load()) / float64(total)
	}
	if run := r.weightRun.Load(); run > 0 {
		left := float64(int64(total) - r.weightDone.Load())
		p.ETA = time.Duration(float64(p.Elapsed) * left / float64(run)).Round(time.Second)
	}
	return p
}

// scanRange reads range i; an error stops the scan.
func (r *runner) scanRange(ctx context.Context, i int, pace Pacer) error {
	rg := r.ck.Ranges[i].Range // fixed at planning: read without the lock
	r.mu.Lock()
	prior := r.ck.Ranges[i].Result // an unfinished range's result, recorded by an earlier run
	r.mu.Unlock()
	rows, done := r.f(rg, prior)
	var ferr error
	stopped := false
	last, got := "", false // the last row delivered
	deliver := func(row bigtable.Row) bool {
		if n := r.rows.Add(1); r.c.limit > 0 && n > r.c.limit {
			r.rows.Add(-1)
			r.limited.Store(true)
			stopped = true
			return false
		}
		n := 0
		for _, items := range row {
			n += len(items)
		}
		r.cells.Add(int64(n))
		if pace != nil {
			if ferr = pace.WaitN(ctx, n); ferr != nil {
				return false
			}
		}
		if ferr = rows(ctx, row); ferr != nil {
			return false
		}
		last, got = row.Key(), true
		return true
	}
	set := rg.RowSet()
	var err error
	for try := 0; ; try++ {
		var stalled bool
		stalled, err = r.read(ctx, set, deliver)
		if !stalled || ferr != nil || stopped {
			break
		}
		if try == 1 {
			return &RangeError{Range: rg, Err: &StallError{Range: rg, Interval: r.c.stall, Step: "ReadRows"}}
		}
		// Once more, from after the last row delivered: nothing twice.
		err = nil
		if got {
			next := last + "\x00"
			if rg.End != "" && next >= rg.End {
				break
			}
			set = Range{Start: next, End: rg.End}.RowSet()
		}
	}
	if ctx.Err() != nil && ferr == nil {
		// Stopped: a gRPC Canceled status is said as context.Canceled, and
		// a stream that ended without error may still have missed rows.
		err = ctx.Err()
	}
	if err == nil {
		err = ferr
	}
	if err != nil {
		return &RangeError{Range: rg, Err: err}
	}
	if stopped {
		return nil
	}
	res, err := done()
	unfinished := errors.Is(err, ErrUnfinished)
	if err != nil && !unfinished {
		return &RangeError{Range: rg, Err: err}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cr := &r.ck.Ranges[i]
	cr.Done, cr.Result, cr.fresh = !unfinished, res, true
	if r.st != nil {
		// Recorded also when ctx ended meanwhile (Ctrl-C, SIGTERM): the
		// range is read whole.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		err := r.c.bounded(wctx, "checkpoint", func(ctx context.Context) error { return r.ck.write(ctx, r.st, time.Now()) })
		cancel()
		if err != nil {
			return err
		}
	}
	if unfinished {
		return nil // read again by a rerun: not counted as done
	}
	// Counted once recorded: progress never reports a range as done that
	// a kill now would read again.
	r.rangesDone.Add(1)
	r.weightDone.Add(int64(cr.Weight))
	r.weightRun.Add(int64(cr.Weight))
	return nil
}

// read is one ReadRows of set. With a stall interval, a watchdog cancels
// it when no row arrived for that long outside the callback, and stalled
// says so.
func (r *runner) read(ctx context.Context, set bigtable.RowSet, deliver func(bigtable.Row) bool) (stalled bool, err error) {
	if r.c.stall <= 0 {
		return false, r.tbl.ReadRows(ctx, set, deliver, r.readOpts...)
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var busy atomic.Bool
	var lastSeen atomic.Int64
	lastSeen.Store(time.Now().UnixNano())
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(max(r.c.stall/8, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				if !busy.Load() && now.Sub(time.Unix(0, lastSeen.Load())) >= r.c.stall {
					cancel(errStallTimeout)
					return
				}
			}
		}
	}()
	err = r.tbl.ReadRows(rctx, set, func(row bigtable.Row) bool {
		busy.Store(true)
		defer func() { lastSeen.Store(time.Now().UnixNano()); busy.Store(false) }()
		return deliver(row)
	}, r.readOpts...)
	if ctx.Err() == nil && errors.Is(context.Cause(rctx), errStallTimeout) {
		return true, err
	}
	return false, err
}

// SuggestShardKeys returns count-1 keys that cut [start, end) (end "":
// the table's end) into count shards of about the same size, from the
// table's SampleRowKeys points. The points change as the table does, so
// compute the keys once and give the same keys to every process
// (WithShardKeys; the CLI's -shard-keys).
func SuggestShardKeys(ctx context.Context, tbl *bigtable.Table, start, end string, count int) ([]string, error) {
	if count < 1 {
		return nil, &OptionError{Option: "shard", Reason: fmt.Sprintf("%d shards: want at least 1", count)}
	}
	sampled, err := tbl.SampleRowKeys(ctx)
	if err != nil {
		return nil, bttlerr.Wrap(err, "scan: SampleRowKeys")
	}
	rs := plan(Range{start, end}, sampled, count)
	if len(rs) < count {
		return nil, &OptionError{Option: "shard", Reason: fmt.Sprintf("the table's sample points cut %s into %d pieces only: too few for %d shards", Range{start, end}, len(rs), count)}
	}
	keys := make([]string, 0, count-1)
	for _, r := range rs[1:] {
		keys = append(keys, r.Start)
	}
	return keys, nil
}

// Pacer paces the cells a scan delivers (WithPacer): WaitN returns once n
// more cells may be delivered, or with an error that stops the scan.
type Pacer interface {
	WaitN(ctx context.Context, n int) error
}

// fixedPace is WithCellsPerSecond's pace: a fixed rate.
type fixedPace struct{ lim *rate.Limiter }

func (p fixedPace) WaitN(ctx context.Context, n int) error {
	for left := n; left > 0; left -= p.lim.Burst() {
		if err := p.lim.WaitN(ctx, min(left, p.lim.Burst())); err != nil {
			if _, ok := ctx.Deadline(); ok && ctx.Err() == nil {
				// The wait would pass the deadline: said as the
				// deadline, which it is, rather than as the limiter.
				return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
			}
			return err
		}
	}
	return nil
}
