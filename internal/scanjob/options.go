package scanjob

import (
	"context"
	"encoding/json"
	"time"

	"cloud.google.com/go/bigtable"
)

// An Option configures a scan, as bigtable.ReadOption configures a read.
type Option func(*config)

type config struct {
	workers       int
	ranges        int
	cellsPerSec   float64
	pacer         Pacer
	shard         Shard
	shardKeys     []string
	shardKeysSet  bool
	start, end    string
	checkpoint    string
	job           any   // WithCheckpoint's
	jobs          []any // WithJob's
	progress      func(Progress)
	progressEvery time.Duration
	readOpts      []bigtable.ReadOption
	filters       []bigtable.Filter
	limit         int64
	stall         time.Duration
	btClient      *bigtable.Client
	btAdmin       *bigtable.AdminClient
	shardWarn     func(ShardWarning)
	resumeCheck   func(ctx context.Context, rg Range, result json.RawMessage) (bool, error)
	bounds        []string // the shards' bounds, set by validate
}

// DefaultWorkers is the worker count without WithWorkers: one stream, the
// load a plain ReadRows puts on the cluster.
const DefaultWorkers = 1

// WithWorkers sets how many ranges are read at once (default 1).
func WithWorkers(n int) Option { return func(c *config) { c.workers = n } }

// WithRanges sets the target number of ranges a shard is cut into (default
// max(64, 4 x workers)); fewer when SampleRowKeys returns fewer points
// inside the shard. More ranges balance the workers better and lose less
// work on a restart; each is one entry of the checkpoint.
func WithRanges(n int) Option { return func(c *config) { c.ranges = n } }

// WithCellsPerSecond limits the rate of cells delivered to the callback,
// over all workers (0: no limit). Cells, not rows, because both the read
// cost and migrate's writes grow with cells; a row with more cells than
// one second's allowance waits for as many seconds as it holds.
func WithCellsPerSecond(r float64) Option {
	return func(c *config) { c.cellsPerSec = r }
}

// WithPacer paces the cells delivered to the callback with p, over all
// workers, instead of WithCellsPerSecond's fixed rate: an adaptive pace
// (bttl's commands give one that lowers its rate when the server answers
// RESOURCE_EXHAUSTED, with -cells-per-second as its ceiling). Each row
// waits for as many cells as it holds before its callback is called.
func WithPacer(p Pacer) Option {
	return func(c *config) { c.pacer = p }
}

// WithShard scans only shard index of count (0 <= index < count): the
// index-th of count contiguous pieces of the scanned range. Every process
// given the same range, count and shard keys computes the same pieces; see
// WithShardKeys.
func WithShard(index, count int) Option {
	return func(c *config) { c.shard = Shard{Index: index, Count: count} }
}

// WithShardKeys gives the count-1 keys that bound the shards, sorted, each
// inside the scanned range: shard i is [keys[i-1], keys[i]). Without it the
// scanned range is split evenly in the key space (keys read as big-endian
// numbers), which balances hashed or uniformly spread keys only; a table
// whose keys share a prefix ("user#...") needs keys chosen from its data,
// e.g. by SuggestShardKeys, computed once and given to every process.
func WithShardKeys(keys ...string) Option {
	return func(c *config) { c.shardKeys, c.shardKeysSet = append([]string(nil), keys...), true }
}

// WithRange scans only the keys in [start, end); end "" is the table's
// end (default: the whole table).
func WithRange(start, end string) Option {
	return func(c *config) { c.start, c.end = start, end }
}

// WithCheckpoint keeps the shard's progress in the file at path: created
// at the first run with the shard's ranges, rewritten atomically as ranges
// finish, and read by a later run, which skips the finished ranges. job,
// marshalled to JSON, identifies the work (e.g. the audit's schema and
// clock time): a checkpoint written for another job, table, range or
// shard is refused with a *CheckpointError. The file is kept when the scan
// completes; delete it to scan again from scratch.
func WithCheckpoint(path string, job any) Option {
	return func(c *config) { c.checkpoint, c.job = path, job }
}

// WithResumeCheck has a run that resumes from a checkpoint ask check,
// for each range an earlier run finished, whether what that run did there
// is still in the table, before skipping it: when check answers false the
// range is read again, as if never finished (Summary.Undone counts such
// ranges). A job that writes gives each range's result a witness of its
// writes (migrate: the last cell it moved) and checks it is still stored,
// so that a table restored from a backup, or deleted and re-created under
// the same name, is not taken for one whose work is done: the checkpoint
// outlives the table it describes. check is called once per finished
// range, one at a time, each call bounded as a checkpoint read is
// (WithStall); an error stops the scan before any read. check is also
// asked about each range an earlier run left unfinished with a recorded
// result (RunResumedRanges hands it to the range's next read): when it
// answers false, that result is dropped.
func WithResumeCheck(check func(ctx context.Context, rg Range, result json.RawMessage) (bool, error)) Option {
	return func(c *config) { c.resumeCheck = check }
}

// WithJob adds job, marshalled to JSON, to what identifies the work in the
// checkpoint, beside WithCheckpoint's job: a package built on scan (audit)
// records its own parameters with it, whatever job its caller gave. With
// one job in all the checkpoint records it alone; with several, a list.
func WithJob(job any) Option {
	return func(c *config) { c.jobs = append(c.jobs, job) }
}

// WithProgress calls f at most every interval during the scan, from a
// single goroutine, and once at its end.
func WithProgress(every time.Duration, f func(Progress)) Option {
	return func(c *config) { c.progress, c.progressEvery = f, every }
}

// WithFilter applies a read filter to every read (e.g. a
// RowSampleFilter, or a family or column filter). Several are chained in
// the order given (a read takes one filter: the client keeps the last
// RowFilter option). The checkpoint records the filters (their String
// form): a run with other filters is refused, as its results would differ.
func WithFilter(f bigtable.Filter) Option {
	return func(c *config) { c.filters = append(c.filters, f) }
}

// WithStall bounds how long a read may receive nothing: a range whose
// stream delivers no row for d (time spent in the callback not counted)
// is cancelled and read once more from after its last row; a second
// stall stops the scan with a *StallError (ErrStalled). It also bounds
// SampleRowKeys and each checkpoint read or write. Without it (d 0, the
// default) a dead server is waited for as long as the context allows, as
// the client retries. A filter that skips most rows (a small sample) can
// make a healthy read silent for long: choose d above the longest gap.
func WithStall(d time.Duration) Option { return func(c *config) { c.stall = d } }

// ShardWarning says that the shard split looks uneven: Sizes counts the
// table's SampleRowKeys points in each shard's piece (Bigtable's points
// delimit sections of about equal size), and Empty says that this shard,
// read whole by this run, held no rows. The remedy is shard keys chosen
// from the data (SuggestShardKeys), the same for every process.
type ShardWarning struct {
	Table string
	Shard Shard
	Sizes []int
	// Uneven: the largest piece holds more than 4x the smallest's points
	// (with enough points to tell: at least 10 per shard).
	Uneven bool
	Empty  bool
}

// WithShardWarnings calls f when a sharded scan's split looks uneven (at
// the start, from SampleRowKeys) or its shard held no rows (at the end).
func WithShardWarnings(f func(ShardWarning)) Option {
	return func(c *config) { c.shardWarn = f }
}

// WithReadOptions passes read options to every ReadRows call. A
// bigtable.LimitRows applies per range; use WithLimit for the whole scan.
func WithReadOptions(opts ...bigtable.ReadOption) Option {
	return func(c *config) { c.readOpts = append(c.readOpts, opts...) }
}

// WithLimit stops the scan after n rows were delivered (0: no limit). With
// one worker these are the scanned range's first n rows; with several,
// which rows is not defined. A range stopped by the limit is not finished.
func WithLimit(n int64) Option { return func(c *config) { c.limit = n } }

// HasCheckpoint reports whether opts keep a checkpoint (WithCheckpoint
// with a path): for an operation that must read everything every time
// (migrate's CheckCopy, a proof) and so refuses to skip finished ranges.
func HasCheckpoint(opts ...Option) bool {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c.checkpoint != ""
}
