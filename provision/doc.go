// Package provision makes a table's column families and GC rules match a
// schema: it creates missing families (and the table, if missing) and sets
// the rules each strategy needs (docs/design.md#strategies). It is idempotent: a
// second Apply finds nothing to change and says so.
//
// Before it changes an existing family's rule it scans every row of the
// family (a sample only with the unsafe WithSampledSafetyScan, which says
// so) for cells the change would lose or hide, and refuses unless forced (WithForce), naming the family, the
// count and a first cell in an *AdoptionError, which wraps ErrUnsafeAdoption
// and the sentinel of its finding:
//   - one-second expiry over cells at or before now (real or server
//     timestamps, deleted at once): ErrRealTimestamps;
//   - an age rule over sequence numbers, or over a max-versions family's
//     cells past the new max age (all deleted at the next compaction):
//     ErrAgeOverSequence;
//   - the sequence strategy over timestamps that are not seq*1000: real
//     times outrank every sequence number, so reads return them and max
//     versions collects the new writes instead: ErrNotSequenceNumbers;
//   - write times over cells under the reserved qualifiers (0xFF 0xFF...)
//     that are not write-time companions, which every read through bttl
//     would skip: ErrHiddenColumns.
//
// One refusal joins an *AdoptionError per finding: errors.As gives the
// first, FindAdoptionError the first of a kind.
//
// A GC rule does not say which strategy it was set for, and write times
// change no rule, so the last two are checked for every sequence and
// write-time family whose rule already matches too (Plan.Unchanged),
// unless WithAssumeAdopted.
//
// Timestamps before strategy.RealTimeFloor (2000-01-01) are read as
// sequence numbers, those at or after it as real times
// (docs/design.md#adoption).
//
// For every change that lowers an existing rule, Plan counts the cells and
// bytes that become collectable at once, and invisible through bttl
// (Change.Impact), reading every row of the family (never a sample), and
// Plan.Write prints the count. PlanAndCheck takes the safety findings for
// such a family from the same read. Scans use the scan engine
// (WithWorkers streams).
//
// With WithChangeStream (a PlanOption of Plan, PlanAndCheck and Apply)
// the plan also sets the table's change stream: enabled with a retention
// of 1 to 7 days, or disabled (docs/design.md#change-stream-config).
// Disabling it or shortening its retention drops records Bigtable kept,
// refused unless forced: an *AdoptionError wrapping ErrChangeStreamLoss,
// and ErrUnsafeAdoption like the refusals above.
//
// When a change lowers or raises an existing rule it prints the
// replication caveats of docs/design.md#replication: lowering can take up to a
// week to reach every cluster, raising max age on a replicated table is
// limited to 90 days and can leave clusters out of sync. Reads through bttl
// stay filtered throughout.
package provision
