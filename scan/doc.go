// Package scan holds the options of the table scans that audit.Scan,
// migrate's Migrator.Run and CheckCopy make, and the types those scans
// report: which key range, which shard of several processes, how many
// workers, at what pace, with what checkpoint.
//
// A scan reads a whole table (or a key range of it) in parallel with the
// table's raw client: no TTL filter is added, so expired cells GC has not
// collected yet are read too. The scanned range is cut into shards (Count
// contiguous pieces, the same in every process given the same options:
// WithShard, WithShardKeys), and a shard's piece into ranges at the
// table's SampleRowKeys points (WithRanges), which WithWorkers workers
// read at once. A checkpoint (WithCheckpoint) lets a restarted run skip
// the ranges already finished. See docs/design.md#scan-engine.
//
// The engine itself, and the checkpoint stores the bttl command uses, are
// internal to bttl; this package is the part a program passes in and gets
// back.
package scan
