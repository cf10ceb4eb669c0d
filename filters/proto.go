package filters

import (
	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/strategy"
)

// TTLProto is TTL(now) as the wire proto, for code that edits requests
// itself (the wire guard): bigtable.Filter does not expose its proto. It is
// built from the same branches, regexes and bounds as TTL, node for node,
// and a test checks it equals the proto the client sends for TTL(now). Nil
// when the schema manages no family. Each call returns a new message the
// caller may keep.
func (b *Builder) TTLProto(now bigtable.Timestamp) *btpb.RowFilter {
	if len(b.branches) == 0 {
		return nil
	}
	if b.exact != nil {
		return b.exact.proto(now)
	}
	if b.pastEnd(now) {
		return b.pastEndProto(now)
	}
	if hi := b.split(now); hi > 0 {
		return b.splitProto(now, hi)
	}
	subs := make([]*btpb.RowFilter, 0, len(b.branches)+1)
	for _, br := range b.branches {
		fam := familySelectProto(br.name, br.policy.HasCompanions())
		if br.policy.Kind() == strategy.KindSequence {
			subs = append(subs, chainProto(fam, cellsPerColumnProto(br.policy.VersionLimit())))
			continue
		}
		// Milliseconds, as the client's TimestampRangeFilter sends them.
		rng := &btpb.RowFilter{Filter: &btpb.RowFilter_TimestampRangeFilter{TimestampRangeFilter: &btpb.TimestampRange{
			StartTimestampMicros: int64(strategy.Millis(br.policy.LiveFrom(now))),
		}}}
		if br.policy.VersionLimit() > 0 {
			subs = append(subs, chainProto(fam, rng, cellsPerColumnProto(br.policy.VersionLimit())))
		} else {
			subs = append(subs, chainProto(fam, rng))
		}
	}
	subs = append(subs, familyProto(b.unmanagedRegex))
	return &btpb.RowFilter{Filter: &btpb.RowFilter_Interleave_{Interleave: &btpb.RowFilter_Interleave{Filters: subs}}}
}

// splitProto is buildSplit's filter as a proto.
func (b *Builder) splitProto(now, hi bigtable.Timestamp) *btpb.RowFilter {
	subs := make([]*btpb.RowFilter, 0, len(b.branches)+2)
	subs = append(subs, rangeProto(hi, 0))
	for _, br := range b.branches {
		if lo := br.policy.LiveFrom(now); lo < hi {
			subs = append(subs, chainProto(familySelectProto(br.name, br.policy.HasCompanions()), rangeProto(lo, hi)))
		}
	}
	subs = append(subs, chainProto(rangeProto(0, hi), familyProto(b.unmanagedRegex)))
	return &btpb.RowFilter{Filter: &btpb.RowFilter_Interleave_{Interleave: &btpb.RowFilter_Interleave{Filters: subs}}}
}

// rangeProto is TimestampRangeFilterMicros(start, end) as the client sends
// it: bounds truncated to the millisecond.
func rangeProto(start, end bigtable.Timestamp) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_TimestampRangeFilter{TimestampRangeFilter: &btpb.TimestampRange{
		StartTimestampMicros: int64(strategy.Millis(start)),
		EndTimestampMicros:   int64(strategy.Millis(end)),
	}}}
}

// ChainProto is Chain(first, second) as a proto, or the one that is not nil
// (servers refuse a chain of one).
func ChainProto(first, second *btpb.RowFilter) *btpb.RowFilter {
	switch {
	case first == nil:
		return second
	case second == nil:
		return first
	}
	return chainProto(first, second)
}

func chainProto(fs ...*btpb.RowFilter) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_Chain_{Chain: &btpb.RowFilter_Chain{Filters: fs}}}
}

// familySelectProto is familySelect(name, hide) as a proto.
func familySelectProto(name string, hide bool) *btpb.RowFilter {
	if !hide {
		return familyOnlyProto(name)
	}
	return &btpb.RowFilter{Filter: &btpb.RowFilter_ColumnRangeFilter{ColumnRangeFilter: &btpb.ColumnRange{
		FamilyName:   name,
		EndQualifier: &btpb.ColumnRange_EndQualifierOpen{EndQualifierOpen: []byte(ReservedQualifierStart)},
	}}}
}

// familyOnlyProto is familyOnly(name): a column range of the family with
// neither qualifier set.
func familyOnlyProto(name string) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_ColumnRangeFilter{ColumnRangeFilter: &btpb.ColumnRange{FamilyName: name}}}
}

func familyProto(pattern string) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_FamilyNameRegexFilter{FamilyNameRegexFilter: pattern}}
}

func cellsPerColumnProto(n int) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_CellsPerColumnLimitFilter{CellsPerColumnLimitFilter: int32(n)}}
}
