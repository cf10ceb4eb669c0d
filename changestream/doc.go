// Package changestream consumes a Bigtable table's change stream from Go,
// over the generated gRPC client of cloud.google.com/go/bigtable/apiv2
// (GenerateInitialChangeStreamPartitions, ReadChangeStream), which the Go
// client library does not wrap. It depends on no other bttl package.
//
// A Consumer lists the table's initial partitions once (task 0 of the
// workers records them in its Store), then reads each partition it holds a
// lease on with one stream, calling the Handler for every complete change
// (chunks joined), and persists each partition's continuation token and low
// watermark on every heartbeat and every WithCheckpointEvery changes. When
// a stream ends with CloseStream naming new partitions, the closed
// partition hands its tokens to them in the Store: a split's children
// start from the token given for each, a merged partition only once every
// parent's token is in hand (the tokens cover it).
//
// Workers: WithWorker(i, n) makes a consumer task i of n sharing one Store
// (a BigtableStore, for workers in separate processes). Each partition has
// a preferred worker; leases, renewed while read and compared whole with
// conditional mutations, keep two workers from both holding a partition,
// and a killed worker's partitions are taken over once its leases expire.
// A restarted task (same owner name) resumes its partitions at once.
//
// What is promised, exactly:
//
//   - at least once: every change of a partition after its start is given to
//     the Handler until the Handler returns nil for it; after a restart (or
//     a takeover), the changes after the partition's last checkpoint are
//     given again (with WithCheckpointEvery(1), at most the one whose
//     checkpoint the kill interrupted, per partition);
//   - within one Run, a dropped or idle stream resumes from the last change
//     delivered: no change is delivered twice, provided the server's tokens
//     are exact (the test server's are);
//   - changes of one partition arrive in stream order; across partitions no
//     order is promised: order by commit time and watermark if needed;
//   - a worker whose lease lapsed (by WithClock) stops delivering that
//     partition before its next change; but between another worker's
//     takeover and the first worker noticing, both may deliver: that is
//     the at-least-once above, not a second owner in the Store.
//
// Nothing waits unbounded: every store call and stream opening is bounded
// by WithRPCTimeout, each message by WithIdleTimeout (then the stream is
// reopened from its token), retries back off exponentially with jitter and
// give up after WithMaxAttempts failures in a row; errors are *Error values
// naming the operation, the table, the partition and the endpoint.
//
// The server side is documented for Apache Beam ("NOTE: This API is only
// intended to be used by Apache Beam BigtableIO"); this package follows
// the field docs of bigtable.proto and data.proto, cited where used. Tests
// run against bttest_harness/changestreams, a server double of the same
// docs; see docs/design.md#change-streams.
package changestream
