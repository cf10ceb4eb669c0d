// Package filters builds the read filters that make a Bigtable read return
// exactly the cells a complete garbage collection would keep.
//
// For a schema (family -> strategy.Policy) and a read time, the TTL filter is
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
