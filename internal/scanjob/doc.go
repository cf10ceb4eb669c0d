// Package scanjob reads a whole table (or a key range of it) in parallel: one
// job, shared by audit and migrate.
//
// The scanned range is cut in two steps. First into shards: Count
// contiguous pieces whose boundaries are a function of the options alone
// (WithShardKeys, or an even split of the key space), so every process
// given the same options computes the same pieces, whatever the table
// holds at the time. Then a shard's piece is cut at the table's
// SampleRowKeys points into ranges (merged to a target count, WithRanges),
// which a bounded pool of workers (WithWorkers) reads with ReadRows, one
// range per worker at a time, rows in key order within a range.
//
// Rows are streamed to a callback and never accumulated: memory is bounded
// by the workers' rows in flight, whatever the table size. The callback is
// called concurrently from the workers (at most one call per worker at a
// time) and must be safe for that. A callback error stops the scan and is
// returned as a *RangeError naming the range it came from.
//
// A checkpoint file (WithCheckpoint) records the shard's ranges, fixed at
// the first run, and which of them are finished, rewritten atomically
// (temporary file and rename) as each range finishes. A restarted run
// skips finished ranges and reads unfinished ones again from their start:
// a callback sees again the rows of ranges that were in progress when the
// earlier run stopped, so it must tolerate re-delivery (be idempotent, or
// count per range, as RunRanges allows). With WithBigtableCheckpoints, a
// path bigtable://TABLE keeps the checkpoint in a row of TABLE of the
// instance instead (one row per job and shard, claimed by a conditional
// mutation), so a worker restarted on another machine resumes.
//
// WithStall bounds how long a read may receive nothing: a silent read is
// continued once from after its last row, then the scan stops with a
// *StallError. WithShardWarnings reports a shard split that looks uneven.
//
// The scan reads with the table's raw client: no TTL filter is added, so
// expired cells GC has not collected yet are read too. The client's app
// profile (e.g. a Data Boost profile) applies to every read. See
// docs/design.md#scan-engine.
package scanjob
