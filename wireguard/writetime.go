package wireguard

import (
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/strategy"
)

var errReservedColumn = errors.New("qualifiers from 0xFF 0xFF on are reserved for write-time companions in this family")

// companionKey identifies a companion change: the column it describes and
// the timestamp or range of the change.
type companionKey struct {
	family, column string
	kind           int // kindSet or kindDeleteColumn
	start, end     int64
}

// addCompanions gives a family with strategy.WithWriteTime what bttl's
// client writes itself (docs/design.md#write-time): every SetCell a
// companion at the same timestamp holding the write time (now, at the
// guard's clock), every column delete the same delete of its companion.
// Companions the request already has (a bttl client writing through the
// guard) are kept, not doubled. A write to the reserved qualifiers that
// is not the companion of a change in the same request is refused: it
// could forge or orphan a write time. ms is returned unchanged when
// nothing is missing.
func (t *table) addCompanions(now bigtable.Timestamp, ms []*btpb.Mutation) ([]*btpb.Mutation, *violation) {
	var have, need map[companionKey]bool
	for _, m := range ms {
		k, reserved, forged, ok := t.companionOf(m)
		switch {
		case !ok:
		case forged:
			return nil, t.violation(RuleReservedColumn, k.family, qualifierOf(m), errReservedColumn)
		case reserved:
			if have == nil {
				have = map[companionKey]bool{}
			}
			have[k] = true
		default:
			if need == nil {
				need = map[companionKey]bool{}
			}
			need[k] = true
		}
	}
	for k := range have {
		if !need[k] {
			return nil, t.violation(RuleReservedColumn, k.family, []byte(strategy.WriteTimeColumn(k.column)),
				fmt.Errorf("%w: a write-time companion with no change to its column %q in the request", errReservedColumn, k.column))
		}
	}
	if len(need) == len(have) {
		return ms, nil
	}
	if have == nil {
		have = map[companionKey]bool{}
	}
	out := make([]*btpb.Mutation, 0, len(ms)+len(need)-len(have))
	wt := strategy.WriteTimeValue(now)
	for _, m := range ms {
		out = append(out, m)
		k, reserved, _, ok := t.companionOf(m)
		if !ok || reserved || have[k] {
			continue
		}
		have[k] = true // a repeated change needs one companion
		q := []byte(strategy.WriteTimeColumn(k.column))
		if k.kind == kindSet {
			out = append(out, &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: k.family, ColumnQualifier: q, TimestampMicros: k.start, Value: wt,
			}}})
			continue
		}
		out = append(out, &btpb.Mutation{Mutation: &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
			FamilyName: k.family, ColumnQualifier: q, TimeRange: &btpb.TimestampRange{StartTimestampMicros: k.start, EndTimestampMicros: k.end},
		}}})
	}
	return out, nil
}

const (
	kindSet = iota
	kindDeleteColumn
)

// companionOf classifies m for a write-time family: ok when m is a
// SetCell or DeleteFromColumn on such a family, with the key of the
// companion change it needs or, when m writes a reserved qualifier
// (reserved), the key of the change it is the companion of; forged when
// the qualifier is reserved but no companion's.
func (t *table) companionOf(m *btpb.Mutation) (k companionKey, reserved, forged, ok bool) {
	switch x := m.GetMutation().(type) {
	case *btpb.Mutation_SetCell_:
		k = companionKey{family: x.SetCell.GetFamilyName(), kind: kindSet, start: int64(strategy.Millis(bigtable.Timestamp(x.SetCell.GetTimestampMicros())))}
	case *btpb.Mutation_DeleteFromColumn_:
		r := x.DeleteFromColumn.GetTimeRange()
		k = companionKey{family: x.DeleteFromColumn.GetFamilyName(), kind: kindDeleteColumn, start: r.GetStartTimestampMicros(), end: r.GetEndTimestampMicros()}
	default:
		return k, false, false, false // family and row deletes take companions with them
	}
	if !t.schema[k.family].HasWriteTime() {
		return k, false, false, false
	}
	col := string(qualifierOf(m))
	if !strings.HasPrefix(col, strategy.ReservedQualifierStart) {
		k.column = col
		return k, false, false, true
	}
	c, isCompanion := strings.CutPrefix(col, strategy.WriteTimePrefix)
	k.column = c
	return k, true, !isCompanion || strings.HasPrefix(c, strategy.ReservedQualifierStart), true
}

func qualifierOf(m *btpb.Mutation) []byte {
	if s := m.GetSetCell(); s != nil {
		return s.GetColumnQualifier()
	}
	return m.GetDeleteFromColumn().GetColumnQualifier()
}

// sameSlice reports whether a and b are the same slice (checkMutations
// returns its input when it adds nothing).
func sameSlice(a, b []*btpb.Mutation) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
