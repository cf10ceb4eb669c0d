// Package filters builds the read filters that make a Bigtable read return
// exactly the cells a complete garbage collection would keep.
//
// For a schema (family -> strategy.Policy) and a read time, the TTL filter is
//
//	Interleave(
//	    Chain(FamilyFilter(^fam1$), TimestampRange[liveFrom(t), inf)),   // age families
//	    Chain(FamilyFilter(^fam2$), CellsPerColumnLimit(N)),             // sequence families
//	    FamilyFilter(<every family but the managed ones>),               // unmanaged, untouched
//	)
//
// and a caller's filter is applied after it: Chain(ttl, user). The order
// matters: on a sequence family a caller's ValueFilter placed first could
// match a version beyond the N kept.
//
// A Builder prepares everything that does not depend on the read time once
// per table; reads in the same millisecond share one filter value. Family
// names are regex-quoted (FamilyRegex), and the unmanaged branch matches the
// exact complement of the managed names (ComplementRegex), since RE2 has no
// negative lookahead. Builder.Expired is the inverse filter: only the cells
// expired but not yet collected, values stripped, for measuring GC lag.
//
// Package ttlclient applies these filters to every read; use this package
// directly only to filter reads made some other way.
package filters
