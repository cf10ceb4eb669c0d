// Package migrate moves the cells a column family already holds onto a
// TTL strategy: cells written with real timestamps onto one-second expiry
// (each expiring at its write time plus a TTL given per row-key prefix and
// column) or default expiry, a default-expiry family onto another default
// TTL, a one-second family onto default expiry, every cell keeping its
// expiry instant.
//
// A Plan says what moves where; New checks it and returns a Migrator,
// whose Run scans the table (package scan's options: workers, pace, shard,
// key range) and moves each row's cells by one conditional row mutation
// that pins every old cell, so no value a concurrent writer changed is
// ever overwritten and a removed cell is never revived. In place, a cell
// is moved only when it is proven a real write time (Plan.FirstSwitch,
// Plan.WrittenBefore); ambiguous cells are counted, shown and never
// touched. Cells expired under the target are kept unless deletion is
// confirmed (DeleteExpired with a dry run's instant and count). A rerun,
// or a run resumed from its checkpoint (WithCheckpoint), moves nothing
// twice. Where old and new timestamps overlap the plan copies into a new
// family (Plan.ToFamily): writers keep the copy right with a Mirror, and
// CheckCopy proves it.
//
// Plan.Steps lists the order of steps for a live system (writers switched
// to bttl first, the migration, then the new GC rule), which
// docs/design.md#migrate explains. Command bttl migrate runs it from the
// command line, sharded, with its job view and metrics; those parts are
// internal to bttl.
package migrate
