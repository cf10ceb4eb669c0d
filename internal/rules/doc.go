// Package rules is bttl's one rule set over the Bigtable data API's
// protos (docs/design.md#rules): the timestamps a managed family's cells
// get (explicit, server time or default, a per-cell TTL, a sequence
// number), the refusals, the single-value deletes, the write-time
// companions, unlisted families, the refusal of server-assigned
// timestamps on managed families, and on the read side the TTL filter
// composed with a caller's filter. ttlclient and wireguard both call it;
// neither holds a write rule of its own.
//
// It also holds the one refusal registry (Registry): a row per refusal
// with its sentinel, gRPC code, ErrorInfo reason, metric reason, the wire
// guard's rule name and the docs anchor, from which ttlclient's
// RefusalReason and StatusCode, the guard's rule names and recorder
// labels, and the docs table are derived.
package rules
