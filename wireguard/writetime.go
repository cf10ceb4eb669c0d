package wireguard

import (
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/strategy"
)

var (
	errReservedColumn = errors.New("qualifiers from 0xFF 0xFF on are reserved for write-time companions in this family")
	errCompanionSent  = fmt.Errorf("%w: the request writes a write-time companion; the wire guard writes and deletes every companion itself "+
		"(with its own clock) and stores none it did not compute: send the cell's change alone", errReservedColumn)
)

// companionKey identifies a companion change: the column it describes and
// the timestamp or range of the change.
type companionKey struct {
	family, column string
	kind           int // kindSet or kindDeleteColumn
	start, end     int64
}

// addCompanions gives a family with strategy.WithWriteTime what bttl's
// client writes itself (docs/design.md#write-time): right after every
// SetCell a companion at the same timestamp holding the write time (now,
// at the guard's clock), right after every column delete the same delete
// of its companion, so the companions change exactly as their cells do,
// in request order. The guard stores no companion it did not compute and
// removes none but with its cell: any write to the reserved qualifiers is
// refused, whatever it holds (a plain client cannot know the write time
// the guard would record, a forged one would make WriteTime lie, and a
// lone companion delete would orphan a write time). bttl's client marks
// its own requests, which carry their companions. ms is returned
// unchanged when the request changes no column of such a family.
func (t *table) addCompanions(now bigtable.Timestamp, ms []*btpb.Mutation) ([]*btpb.Mutation, *violation) {
	var out []*btpb.Mutation // a copy, once a companion is added
	var wt []byte
	for i, m := range ms {
		k, reserved, ok := t.companionOf(m)
		switch {
		case !ok:
			if out != nil {
				out = append(out, m)
			}
			continue
		case reserved:
			err := errReservedColumn
			if _, isCompanion := strings.CutPrefix(string(qualifierOf(m)), strategy.WriteTimePrefix); isCompanion {
				err = errCompanionSent
			}
			return nil, t.violation(RuleReservedColumn, k.family, qualifierOf(m), err)
		}
		if out == nil {
			out = append(make([]*btpb.Mutation, 0, 2*len(ms)), ms[:i]...)
			wt = strategy.WriteTimeValue(now)
		}
		q := []byte(strategy.WriteTimeColumn(k.column))
		if k.kind == kindSet {
			out = append(out, m, &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: k.family, ColumnQualifier: q, TimestampMicros: k.start, Value: wt,
			}}})
			continue
		}
		out = append(out, m, &btpb.Mutation{Mutation: &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
			FamilyName: k.family, ColumnQualifier: q, TimeRange: &btpb.TimestampRange{StartTimestampMicros: k.start, EndTimestampMicros: k.end},
		}}})
	}
	if out == nil {
		return ms, nil
	}
	return out, nil
}

const (
	kindSet = iota
	kindDeleteColumn
)

// companionOf classifies m for a write-time family: ok when m is a
// SetCell or DeleteFromColumn on such a family, with the key of the
// companion change it needs; reserved when m's qualifier is in the
// reserved range (from 0xFF 0xFF on).
func (t *table) companionOf(m *btpb.Mutation) (k companionKey, reserved, ok bool) {
	switch x := m.GetMutation().(type) {
	case *btpb.Mutation_SetCell_:
		k = companionKey{family: x.SetCell.GetFamilyName(), kind: kindSet, start: int64(strategy.Millis(bigtable.Timestamp(x.SetCell.GetTimestampMicros())))}
	case *btpb.Mutation_DeleteFromColumn_:
		r := x.DeleteFromColumn.GetTimeRange()
		k = companionKey{family: x.DeleteFromColumn.GetFamilyName(), kind: kindDeleteColumn, start: r.GetStartTimestampMicros(), end: r.GetEndTimestampMicros()}
	default:
		return k, false, false // family and row deletes take companions with them
	}
	if !t.schema[k.family].HasWriteTime() {
		return k, false, false
	}
	k.column = string(qualifierOf(m))
	return k, strings.HasPrefix(k.column, strategy.ReservedQualifierStart), true
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
