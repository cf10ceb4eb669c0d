// Package migrate moves the cells a column family already holds onto a
// TTL strategy: cells written with real timestamps onto one-second expiry
// (each expiring at its write time plus a TTL given per row-key prefix and
// column) or default expiry, a default-expiry family onto another default
// TTL, a one-second family onto default expiry, every cell keeping its
// expiry instant.
//
// Each cell is moved by one conditional row mutation whose predicate pins
// the exact old cell (filters.Cell: column, millisecond, value) and
// requires the new timestamp's slot to be empty, with DeleteTimestampRange
// over the old millisecond and Set at the new timestamp in its true branch
// (a copy into a new family only sets). A cell a concurrent writer
// replaced or deleted meanwhile no longer matches, nor does one whose new
// timestamp a writer took: the move does nothing and is counted
// (Stats.Changed), so no value is ever overwritten and a removed cell never
// revived. A value too large to pin (over about 10 KB) is counted and not
// moved.
//
// A run is idempotent: a second run changes nothing and says so. In
// place, from real write times to one-second expiry, the timestamps to
// move are those before Plan.WrittenBefore (the instant every writer
// writes through bttl) and every moved or bttl-written timestamp is at or
// after it (or its cell is expired), so the stored cells themselves record
// what is done: a rerun, a run resumed after a crash, or a scan that
// meets a bttl writer's cells moves nothing twice. Where old and new
// timestamps overlap (a default-expiry target, or an age-strategy source)
// a shifted cell cannot be told from an unshifted one, so those plans copy
// into a new family, where the copied cell is the record.
//
// A Migrator's MigrateRow is the per-row callback a scan engine calls from
// its workers; Run reads one row range itself. Plan.Steps lists the order
// of steps for a live system (writers switched to bttl first, the
// migration, then the new GC rule), which docs/design.md#migrate explains.
// Command bttl migrate runs it from the command line.
package migrate
