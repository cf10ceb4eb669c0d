// Package strategy holds the timestamp arithmetic of bttl's per-cell TTL
// conventions for Cloud Bigtable. It is pure: timestamps in, timestamps out.
// It does no I/O and never reads a clock; the caller passes "now".
//
// Bigtable garbage-collects by column family only, so a per-cell TTL is a
// convention on the cell timestamp that the family's GC rule turns into
// deletion. Three strategies are supported, one per managed column family:
//
//   - OneSecond: the family's GC rule is max age 1s and each cell's timestamp
//     is the instant it expires, ms(now+ttl). A cell is live at t iff ts > t.
//     Every cell has its own lifetime; a server or "real" timestamp expires
//     at once, so the strategy cannot be adopted on a family holding real
//     timestamps.
//   - DefaultExpiry(D): the family's GC rule is max age D and a cell that must
//     live ttl gets timestamp ms(now+ttl-D). A cell is live at t iff ts+D > t.
//     A cell with the default TTL is written at its real write time, so the
//     strategy can be adopted on an existing family.
//   - Sequence(N): timestamps are version numbers (seq*1000) and the GC rule
//     is max versions N. The N highest timestamps of a column are live. An
//     age rule on such a family would delete it.
//
// Unmanaged declares a family whose cells the library passes through
// untouched. Every timestamp this package returns is a multiple of 1000
// (Bigtable's millisecond granularity), and every refusal wraps one of the
// sentinel errors (ErrInvalidTTL, ErrAlreadyExpired, ...) for errors.Is.
//
// Options are typed by the strategies that take them (AgeOption for both
// age strategies, OneSecondOption for OneSecond, none for Sequence and
// Unmanaged), so an option that does not fit a strategy, or would
// contradict its positional argument, does not compile. Policy.Validate,
// with a *PolicyError, checks what types cannot: values in range, and none
// over the max TTL (docs/design.md#composition).
//
// A Policy also gives the GC rule its family must carry (Policy.GCPolicy),
// the first live timestamp at a read time (Policy.LiveFrom), used by package
// filters, and a cell's expiry (Policy.Expiry). The README's decision guide
// compares the strategies' costs and risks.
package strategy
