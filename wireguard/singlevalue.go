package wireguard

import (
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
)

// addSingleValueDeletes gives a SingleValue family what bttl's client
// writes itself (docs/design.md#collisions): a delete of the whole column
// before each SetCell, in the same atomic row mutation, so the last write
// wins whatever the TTLs. A SetCell already preceded by that delete (bttl's
// client behind the guard) gets no second one. The rewrite is the same on
// every attempt, so a retried request (the client resends its original)
// ends in the same state. ms is returned unchanged when nothing is added.
func (t *table) addSingleValueDeletes(ms []*btpb.Mutation) []*btpb.Mutation {
	var out []*btpb.Mutation // a copy, once a delete is added
	for i, m := range ms {
		s := m.GetSetCell()
		if s != nil && t.schema[s.GetFamilyName()].IsSingleValue() && !(i > 0 && deletesColumn(ms[i-1], s)) {
			if out == nil {
				out = append(make([]*btpb.Mutation, 0, len(ms)+1), ms[:i]...)
			}
			out = append(out, &btpb.Mutation{Mutation: &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
				FamilyName: s.GetFamilyName(), ColumnQualifier: s.GetColumnQualifier(),
			}}})
		}
		if out != nil {
			out = append(out, m)
		}
	}
	if out == nil {
		return ms
	}
	return out
}

// deletesColumn reports whether m deletes every cell of s's column.
func deletesColumn(m *btpb.Mutation, s *btpb.Mutation_SetCell) bool {
	d := m.GetDeleteFromColumn()
	r := d.GetTimeRange()
	return d != nil && d.GetFamilyName() == s.GetFamilyName() && string(d.GetColumnQualifier()) == string(s.GetColumnQualifier()) &&
		r.GetStartTimestampMicros() == 0 && r.GetEndTimestampMicros() == 0
}
