// Package migratejob moves the cells a column family already holds onto a
// TTL strategy: cells written with real timestamps onto one-second expiry
// (each expiring at its write time plus a TTL given per row-key prefix and
// column) or default expiry, a default-expiry family onto another default
// TTL, a one-second family onto default expiry, every cell keeping its
// expiry instant.
//
// A row's cells are moved by one conditional row mutation whose predicate
// (filters.RowMove) pins every old cell (filters.Cell: column,
// millisecond, value) and requires every new timestamp's slot to be
// empty, with DeleteTimestampRange over each old millisecond and Set at
// each new timestamp in its true branch (a copy into a new family only
// sets). When a concurrent writer replaced or deleted a cell meanwhile,
// or took a new timestamp, the mutation does nothing and each cell is
// tried on its own: the changed ones are counted (Stats.Changed), so no
// value is ever overwritten and a removed cell never revived. A value too
// large to pin (over about 10 KB) is counted and not moved.
//
// In place, from real write times to one-second expiry, a cell is moved
// only when it is proven a real write time: stamped at or before
// Plan.FirstSwitch less the clock skew (every bttl cell is stamped after
// it). One stamped after Plan.WrittenBefore plus the skew is a bttl
// expiry instant; one in between is ambiguous unless a write-time
// companion proves it a bttl cell (or Plan.WriteTimeComplete vouches that
// every bttl writer recorded write times): ambiguous cells are counted,
// shown and never touched. Cells expired under the target are kept unless
// deletion is confirmed (DeleteExpired with the dry run's instant and
// count). Moved timestamps land after the window, so the stored cells
// themselves record what is done: a rerun, a run resumed after a crash,
// or a scan that meets a bttl writer's cells moves nothing twice. Where
// old and new timestamps overlap (a default-expiry target, or an
// age-strategy source) a shifted cell cannot be told from an unshifted
// one, so those plans copy into a new family, where the copied cell is
// the record.
//
// A Migrator's MigrateRow is the per-row callback a scan engine calls from
// its workers; Run reads one row range itself. Plan.Steps lists the order
// of steps for a live system (writers switched to bttl first, the
// migration, then the new GC rule), which docs/design.md#migrate explains.
// Command bttl migrate runs it from the command line.
package migratejob
