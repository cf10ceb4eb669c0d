package scan

import (
	"context"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/scanjob"
)

// An Option configures a scan (audit.Scan, migrate.Migrator.Run and
// CheckCopy take them), as bigtable.ReadOption configures a read.
type Option = scanjob.Option

// Pacer paces the cells a scan delivers (WithPacer): WaitN returns once n
// more cells may be delivered, or with an error that stops the scan.
type Pacer = scanjob.Pacer

// Range is the row keys in [Start, End); End "" is the table's end. Its
// String shows the bounds as every bttl message shows a row key.
type Range = scanjob.Range

// Shard is shard Index of Count (0 <= Index < Count), as WithShard sets
// it; it prints as "i/n".
type Shard = scanjob.Shard

// Progress is a scan's state, for a progress line (WithProgress).
type Progress = scanjob.Progress

// Summary is what a scan did: its shard, its piece of the scanned range,
// its ranges and whether each is finished, the rows and cells it read.
type Summary = scanjob.Summary

// RangeResult is one of the shard's ranges after a scan.
type RangeResult = scanjob.RangeResult

// StallError is a range whose read received nothing for WithStall's
// interval, twice; it wraps ErrStalled.
type StallError = scanjob.StallError

// OptionError is an invalid option; it wraps ErrOption.
type OptionError = scanjob.OptionError

// CheckpointError is a checkpoint that cannot be used (written for
// another job, table, range or shard, or unreadable); it wraps
// ErrCheckpoint.
type CheckpointError = scanjob.CheckpointError

// RangeError is an error that stopped the scan while it read Range.
type RangeError = scanjob.RangeError

var (
	// ErrOption is an invalid scan option (a *OptionError).
	ErrOption = scanjob.ErrOption
	// ErrCheckpoint is a checkpoint that does not fit this scan (a
	// *CheckpointError).
	ErrCheckpoint = scanjob.ErrCheckpoint
	// ErrStalled is a read that received nothing for WithStall's interval
	// twice (a *StallError).
	ErrStalled = scanjob.ErrStalled
)

// WithWorkers sets how many ranges are read at once (default 1: one
// stream, the load a plain ReadRows puts on the cluster).
func WithWorkers(n int) Option { return scanjob.WithWorkers(n) }

// WithRanges sets the target number of ranges a shard is cut into (default
// max(64, 4 x workers)); fewer when SampleRowKeys returns fewer points
// inside the shard. More ranges balance the workers better and lose less
// work on a restart; each is one entry of the checkpoint.
func WithRanges(n int) Option { return scanjob.WithRanges(n) }

// WithCellsPerSecond limits the rate of cells read, over all workers (0:
// no limit). A row with more cells than one second's allowance waits for
// as many seconds as it holds.
func WithCellsPerSecond(r float64) Option { return scanjob.WithCellsPerSecond(r) }

// WithPacer paces the cells read with p, over all workers, instead of
// WithCellsPerSecond's fixed rate (e.g. an adaptive pace that slows down
// when the server answers RESOURCE_EXHAUSTED).
func WithPacer(p Pacer) Option { return scanjob.WithPacer(p) }

// WithShard scans only shard index of count (0 <= index < count): the
// index-th of count contiguous pieces of the scanned range. Every process
// given the same range, count and shard keys computes the same pieces; see
// WithShardKeys.
func WithShard(index, count int) Option { return scanjob.WithShard(index, count) }

// WithShardKeys gives the count-1 keys that bound the shards, sorted, each
// inside the scanned range: shard i is [keys[i-1], keys[i]). Without it the
// scanned range is split evenly in the key space, which balances hashed or
// uniformly spread keys only; a table whose keys share a prefix
// ("user#...") needs keys chosen from its data (SuggestShardKeys),
// computed once and given to every process.
func WithShardKeys(keys ...string) Option { return scanjob.WithShardKeys(keys...) }

// SuggestShardKeys returns count-1 keys that cut [start, end) (end "": the
// table's end) into count pieces of about equal size, from the table's
// SampleRowKeys points, for WithShardKeys. The points change as the table
// does: compute the keys once and give the same to every process.
func SuggestShardKeys(ctx context.Context, tbl *bigtable.Table, start, end string, count int) ([]string, error) {
	return scanjob.SuggestShardKeys(ctx, tbl, start, end, count)
}

// WithRange scans only the keys in [start, end); end "" is the table's
// end (default: the whole table).
func WithRange(start, end string) Option { return scanjob.WithRange(start, end) }

// WithCheckpoint keeps the shard's progress in the file at path: created
// at the first run with the shard's ranges, rewritten atomically as ranges
// finish, and read by a later run, which skips the finished ranges. The
// operation records its own parameters in it (an audit's schema and now,
// a migration's plan): a checkpoint written for another job, table, range
// or shard is refused with a *CheckpointError. The file is kept when the
// scan completes; delete it to scan again from scratch.
func WithCheckpoint(path string) Option { return scanjob.WithCheckpoint(path, nil) }

// WithProgress calls f at most every interval during the scan, from a
// single goroutine, and once at its end.
func WithProgress(every time.Duration, f func(Progress)) Option {
	return scanjob.WithProgress(every, f)
}

// WithFilter applies a read filter to every read (e.g. a RowSampleFilter
// to audit a sample). Several are chained in the order given. The
// checkpoint records the filters: a run with other filters is refused, as
// its results would differ.
func WithFilter(f bigtable.Filter) Option { return scanjob.WithFilter(f) }

// WithStall bounds how long a read may receive nothing: a range whose
// stream delivers no row for d is cancelled and read once more from after
// its last row; a second stall stops the scan with a *StallError
// (ErrStalled). Without it (d 0, the default) a dead server is waited for
// as long as the context allows, as the client retries.
func WithStall(d time.Duration) Option { return scanjob.WithStall(d) }

// WithLimit stops the scan after n rows (0: no limit). With one worker
// these are the scanned range's first n rows; with several, which rows is
// not defined. A range stopped by the limit is not finished.
func WithLimit(n int64) Option { return scanjob.WithLimit(n) }
