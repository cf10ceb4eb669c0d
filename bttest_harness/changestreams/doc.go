// Package changestreams is a Bigtable server with change streams for
// tests: a test double of the documented contract of
// GenerateInitialChangeStreamPartitions and ReadChangeStream, which both
// emulators (bttest, cbtemulator) lack. It serves the Bigtable data API in
// front of an in-process bttest backend, forwarding each call through the
// backend's generated gRPC client (as bttest_harness/prodserver does),
// records every mutation the backend accepted with a commit timestamp from
// Config.Clock, and serves the record as change streams. Each rule cites
// the proto field doc it implements (ReadChangeStream, RunGC):
//
//   - partitions tile the keyspace (Config.SplitKeys); Split and Merge
//     change them mid-stream, and the old partitions' streams end with
//     CloseStream carrying the new partitions and their tokens;
//   - every change carries its commit timestamp, a token and a low
//     watermark; heartbeats carry a token and a watermark;
//   - tokens replay: a stream resumed from any token it (or a CloseStream)
//     gave delivers exactly the changes after it, any number of times;
//   - DropStreams ends every open stream with UNAVAILABLE;
//   - RunGC applies the families' GC rules (kept by this server, not given
//     to bttest, whose own GC would delete cells unrecorded) and records the
//     deletions as GARBAGE_COLLECTION changes;
//   - Config.ChunkBytes sends changes in CONTINUATION messages with chunked
//     values.
//
// What it does not model (retention, replication's several clusters and
// tiebreakers, ReadModifyWriteRow, the real token format) is listed in
// docs/emulators.md, section "The change-stream server". It imports
// neither bttl's client nor the harness: a server double does not depend
// on the code it tests.
package changestreams
