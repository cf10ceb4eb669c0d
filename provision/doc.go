// Package provision makes a table's column families and GC rules match a
// schema: it creates missing families (and the table, if missing) and sets
// the rules each strategy needs (docs/design.md#strategies). It is idempotent: a
// second Apply finds nothing to change and says so.
//
// Before it puts an existing family on one-second expiry it scans a sample
// of the family for cells whose timestamps are at or before now: real or
// server timestamps, which the one-second rule would delete at once. It
// refuses with a *RealTimestampsError unless forced.
//
// When a change lowers or raises an existing rule it prints the
// replication caveats of docs/design.md#replication: lowering can take up to a
// week to reach every cluster, raising max age on a replicated table is
// limited to 90 days and can leave clusters out of sync. Reads through bttl
// stay filtered throughout.
package provision
