// Package filters builds the read filters that make a Bigtable read return
// exactly the cells a complete garbage collection would keep.
//
// When the table's families are known (WithFamilies: ttlclient.Open reads
// them when it verifies the GC rules), the TTL filter has no regex. Families
// whose rules are equal share a branch, every family is selected by name
// with Family(f) (below), and when one rule covers every family the filter
// is that rule alone:
//
//	TimestampRange[liveFrom(t), inf)       // age families only, one rule
//	CellsPerColumnLimit(N)                 // sequence families only, one rule
//	Interleave(                            // otherwise
//	    Chain(Family(a), TimestampRange[liveFrom_a(t), inf)),          // an age rule
//	    Chain(Interleave(Family(b), Family(c)), CellsPerColumnLimit(N)), // b, c share a rule
//	    Family(u), ...                                                  // unmanaged, untouched
//	)
//
// (an age rule with a max-versions limit chains CellsPerColumnLimit after its
// range). A family missing from the list, one created after it was read, is
// in no branch: reads return none of its cells, except under the bare rule,
// which filters it like the others. Either way no expired cell of a schema
// family is returned.
//
// Without WithFamilies, families outside the schema are unknown and must
// pass untouched, so the filter is
//
//	Interleave(
//	    Chain(Family(fam1), TimestampRange[liveFrom(t), inf)),     // age families
//	    Chain(Family(fam2), CellsPerColumnLimit(N)),               // sequence families
//	    FamilyFilter(<every family but the managed ones>),         // unmanaged, untouched
//	)
//
// where Family(f) selects family f by name: a ColumnRangeFilter(f, "", "")
// with no bounds, equivalent to FamilyFilter(^f$) but compared, not matched
// by a regex (emulators compile a regex for every cell they test).
//
// When every managed family expires by age alone (no sequence family, no
// max-versions limit), the same cells are selected by a split form, cut at
// the latest live-from bound L: TimestampRange[L, inf) for every family,
// Chain(Family(f), TimestampRange[liveFrom(t), L)) per age family, and
// Chain(TimestampRange[0, L), FamilyFilter(<the others>)); the family regex
// then only sees cells older than L.
//
// Bigtable serves filters of at most MaxFilterBytes (20 KiB) serialized;
// Builder.CheckSize tells a schema whose TTL filter is larger (the
// complement regex grows with the managed names: about 60 of 20 bytes fill
// it), and ttlclient.Open refuses such a table with ErrFilterTooLarge.
//
// A caller's filter is applied after the TTL filter: Chain(ttl, user). The order
// matters: on a sequence family a caller's ValueFilter placed first could
// match a version beyond the N kept.
//
// A Builder prepares everything that does not depend on the read time once
// per table; reads in the same millisecond share one filter value, and a
// new millisecond rebuilds only the age families' time bounds. The
// unmanaged branch matches the exact complement of the managed names
// (ComplementRegex), since RE2 has no negative lookahead; FamilyRegex quotes
// a name for callers that want a regex. Builder.Expired is the inverse
// filter: only the cells expired but not yet collected, values stripped,
// for measuring GC lag.
//
// Package ttlclient applies these filters to every read; use this package
// directly only to filter reads made some other way.
package filters
