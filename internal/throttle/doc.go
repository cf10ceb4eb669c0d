// Package throttle paces bttl's batch jobs (audit, plan, apply, migrate:
// every command that scans a table) at a rate adapted to the server: the
// one controller their scans share (docs/design.md#throttling).
//
// The Go Bigtable client has no flow control of its own for batch work
// (the Java client's batch write flow control, C++'s and Beam's have one),
// and it does not hand RetryInfo to its caller: a call it retries sleeps
// the delay inside the client, a call it does not retry
// (CheckAndMutateRow, the move and the checkpoint write) returns the bare
// RESOURCE_EXHAUSTED. So the Controller sees each attempt through gRPC
// client interceptors installed on bttl's clients (DialOptions), where
// every status still carries its details:
//
//   - a RESOURCE_EXHAUSTED answer holds every worker for its RetryInfo
//     delay (DefaultPause without one; at most Config.MaxHold, as the
//     workers wait where no stall watch looks) and lowers the rate
//     multiplicatively, by DecreaseFactor, at most once a Period: many
//     workers throttled by one overload lower it once;
//   - a Period with no RESOURCE_EXHAUSTED raises it additively, by a tenth
//     of the ceiling, never above it: additive increase, multiplicative
//     decrease (AIMD), with the Java client's factor (0.7) and a shorter
//     period, as a CLI job is minutes, not a Dataflow pipeline's hours;
//   - a unary call answered RESOURCE_EXHAUSTED with RetryInfo is sent
//     again once the delay passed, bounded only by its context, as the
//     Go client itself retries the calls it retries when the server sent
//     RetryInfo (internal/transport/retrying.go, v1.58.0: "Attempts driven
//     by server-attached RetryInfo are uncapped").
//
// The rate is in cells a second, the unit of -cells-per-second, which is
// the ceiling. Without a ceiling the pace is unlimited until the first
// RESOURCE_EXHAUSTED after cells were paced, which sets the rate to
// DecreaseFactor times the pace measured over the last Period (one before
// any cell only holds the workers). The limiter is golang.org/x/time/rate's;
// this package only decides its limit. The clock is injectable (Config.Clock)
// so that the decisions are tested without sleeping.
package throttle
