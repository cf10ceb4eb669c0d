package filters

import (
	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/strategy"
)

// pastEnd reports whether some age family has no live cell at now
// (strategy.Policy.AllExpired): the read time is at or past the largest
// timestamp, where LiveFrom saturates at MaxTimestamp and the usual range
// would let a cell stored there through. Only a clock at least that far
// ahead can get there, so the check is one comparison on every other read.
func (b *Builder) pastEnd(now bigtable.Timestamp) bool {
	if now < strategy.MaxTimestamp || !b.hasAge {
		return false
	}
	for _, br := range b.branches {
		if br.constant == nil && br.policy.AllExpired(now) {
			return true
		}
	}
	return false
}

// buildPastEnd is the plain form of the TTL filter without the branches of
// the age families that have no live cell at now: nothing of them passes.
func (b *Builder) buildPastEnd(now bigtable.Timestamp) bigtable.Filter {
	subs := make([]bigtable.Filter, 0, len(b.branches)+1)
	for _, br := range b.branches {
		switch {
		case br.constant != nil:
			subs = append(subs, br.constant)
		case br.policy.AllExpired(now):
		case br.perCol != nil:
			subs = append(subs, bigtable.ChainFilters(br.family, bigtable.TimestampRangeFilterMicros(br.policy.LiveFrom(now), 0), br.perCol))
		default:
			subs = append(subs, bigtable.ChainFilters(br.family, bigtable.TimestampRangeFilterMicros(br.policy.LiveFrom(now), 0)))
		}
	}
	subs = append(subs, b.unmanaged)
	if len(subs) == 1 {
		return subs[0] // servers refuse an interleave of one
	}
	return bigtable.InterleaveFilters(subs...)
}

// pastEndProto is buildPastEnd's filter as a proto.
func (b *Builder) pastEndProto(now bigtable.Timestamp) *btpb.RowFilter {
	subs := make([]*btpb.RowFilter, 0, len(b.branches)+1)
	for _, br := range b.branches {
		fam := familySelectProto(br.name, br.policy.HasCompanions())
		switch {
		case br.constant != nil:
			subs = append(subs, chainProto(fam, cellsPerColumnProto(br.policy.VersionLimit())))
		case br.policy.AllExpired(now):
		case br.perCol != nil:
			subs = append(subs, chainProto(fam, rangeProto(br.policy.LiveFrom(now), 0), cellsPerColumnProto(br.policy.VersionLimit())))
		default:
			subs = append(subs, chainProto(fam, rangeProto(br.policy.LiveFrom(now), 0)))
		}
	}
	subs = append(subs, familyProto(b.unmanagedRegex))
	if len(subs) == 1 {
		return subs[0]
	}
	return &btpb.RowFilter{Filter: &btpb.RowFilter_Interleave_{Interleave: &btpb.RowFilter_Interleave{Filters: subs}}}
}
