// Package expiry announces the expiry of bttl-managed cells on time: a
// Notifier, fed a table's change stream (its Handle is a
// changestream.Handler), schedules the expiry instant of every cell
// written to an age-strategy family (strategy.Policy.ExpiryTime of the
// cell's timestamp) in a durable timer index kept in a Bigtable table, one
// row per expiry bucket; its Run emits an "expired" Event for each cell
// once its instant passes, after reading the cell back and finding it
// still stored at that timestamp (not overwritten, moved by Expire or a
// time-to-idle refresh, nor deleted).
//
// What is promised, exactly:
//
//   - at least once: an index entry leaves the timers (to family "x") only
//     after the Callback returned nil for its event; a killed worker's buckets are taken over
//     once their leases lapse (by WithClock), and a change the stream
//     delivers again schedules its cells again;
//   - never for a cell not stored at its timestamp when the worker reads it
//     (a live cell is never announced: the entry is not due before the
//     instant the cell's family stops returning it);
//   - a cell garbage-collected before a worker read it is announced from
//     the GARBAGE_COLLECTION change (which proves it was stored past its
//     expiry), provided its entry is still in the index: an entry whose
//     cell was found missing is kept until the stream's low watermark
//     (the Store's, every partition's) passes the time it was found
//     missing, so that change is seen first;
//   - on time: an entry is due at its instant and found by the next poll
//     (WithPollInterval) after it, once the stream delivered the write.
//     A cell written after its instant (a late stream) is announced at once.
//   - not exact: a cell deleted after its instant but before the worker read
//     it is not announced (it is indistinguishable from one deleted before);
//     two workers, or a redelivered change, may announce a cell twice.
//
// Layout of the index (docs/design.md#expiry-index): row key
// <prefix><bucket>, bucket the expiry instant's Unix milliseconds divided
// by the bucket width, 16 hex digits; family "t" one cell per scheduled
// cell, its qualifier the cell's family, column, timestamp and row key,
// its value empty (or when the cell was found missing); family "x" the
// same qualifier once the cell was announced, until its GC record arrives
// or a recheck finds it deleted (the stock of expired cells not yet
// collected: the gauge StockMetricName, WithRegisterer, WithRecheck);
// family "l" the bucket's lease. Every cell is written at timestamp 0,
// one version.
package expiry
