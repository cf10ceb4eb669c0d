// Package strategy holds the timestamp arithmetic of bttl's per-cell TTL
// conventions for Cloud Bigtable. It is pure: timestamps in, timestamps out.
// It does no I/O and never reads a clock; the caller passes "now".
//
// Three strategies are supported, one per managed column family:
//
//   - OneSecond: the family's GC rule is max age 1s and each cell's timestamp
//     is the instant it expires, ms(now+ttl). A cell is live at t iff ts > t.
//   - DefaultExpiry(D): the family's GC rule is max age D and a cell that must
//     live ttl gets timestamp ms(now+ttl-D). A cell is live at t iff ts+D > t.
//   - Sequence(N): timestamps are version numbers (seq*1000) and the GC rule
//     is max versions N. The N highest timestamps of a column are live.
//
// Unmanaged declares a family whose cells the library passes through
// untouched. Every timestamp this package returns is a multiple of 1000
// (Bigtable's millisecond granularity).
package strategy
