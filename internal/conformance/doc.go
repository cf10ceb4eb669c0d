// Package conformance is bttl's randomized conformance suite: it drives a
// ttlclient.Table with random writes (TTLs, sequence numbers, explicit
// timestamps, single-value writes, every kind of delete, bulk and
// conditional mutations), caller filters and clock moves, on a real server
// whose own GC runs whenever it runs, and after every step compares ReadRow
// and ReadRows with the reference model (package internal/model).
//
// A failure names the seed, the step and a diff. BTTL_SEED replays a run's
// operations; BTTL_OPS sets its length.
package conformance
