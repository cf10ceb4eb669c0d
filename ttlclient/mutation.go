package ttlclient

import (
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/internal/rules"
)

type opKind uint8

const (
	opSet opKind = iota
	opDeleteColumn
	opDeleteRange
	opDeleteFamily
	opDeleteRow
	opAddInt
	opMergeBytes
)

// op is one change of a Mutation, as its method recorded it.
type op struct {
	kind           opKind
	family, column string
	ts             bigtable.Timestamp // Set's, an aggregate's, a range's start
	end            bigtable.Timestamp // a range's end
	intent         rules.Intent       // SetTTL's or SetVersion's
	n              int64              // AddIntToCell's value
	value          []byte
}

// Mutation is a set of changes for one row, like bigtable.Mutation, whose
// managed-family timestamps the Table assigns when it is applied: a plain
// list of typed changes, converted once per Apply into the
// bigtable.Mutation sent (built with the client's own methods).
//
// Like a bigtable.Mutation, it may be applied again, and by several
// goroutines at once, but not changed while it is being applied.
type Mutation struct {
	ops []op

	isConditional bool
	cond          bigtable.Filter
	mtrue, mfalse *Mutation
}

// NewMutation returns a new mutation.
func NewMutation() *Mutation { return new(Mutation) }

// NewCondMutation returns a conditional mutation, like
// bigtable.NewCondMutation. The table puts its TTL filter before cond, so an
// expired cell never satisfies the condition. Either branch may be nil.
func NewCondMutation(cond bigtable.Filter, mtrue, mfalse *Mutation) *Mutation {
	return &Mutation{isConditional: true, cond: cond, mtrue: mtrue, mfalse: mfalse}
}

// Set sets a value in family:column, exactly as bigtable.Mutation.Set. On
// an unmanaged family ts is written as given, truncated to the
// millisecond. On a managed family ts is taken as the family's convention
// defines it: the expiry instant (one-second), a real write time (default
// expiry) or seq*1000 (sequence), refused if the cell would be expired on
// arrival or over the family's max TTL; bigtable.ServerTime asks for the
// family's default TTL (refused on a family without one). Give a cell its
// own TTL with SetTTL, its version with SetVersion.
func (m *Mutation) Set(family, column string, ts bigtable.Timestamp, value []byte) {
	m.add(op{kind: opSet, family: family, column: column, ts: ts, value: value})
}

// SetTTL sets a value in family:column that lives ttl from the time the
// mutation is applied (one-second and default-expiry families; refused on
// others with strategy.ErrWrongCellOption). A ttl over a family's max TTL
// is clamped when the family clamps, refused otherwise.
func (m *Mutation) SetTTL(family, column string, ttl time.Duration, value []byte) {
	m.add(op{kind: opSet, family: family, column: column, ts: bigtable.ServerTime,
		intent: rules.Intent{Kind: rules.IntentTTL, TTL: ttl}, value: value})
}

// SetVersion sets version seq of a value in family:column, a sequence
// family (timestamp seq*1000; refused on others with
// strategy.ErrWrongCellOption).
func (m *Mutation) SetVersion(family, column string, seq int64, value []byte) {
	m.add(op{kind: opSet, family: family, column: column, ts: bigtable.ServerTime,
		intent: rules.Intent{Kind: rules.IntentSequence, Seq: seq}, value: value})
}

// DeleteCellsInColumn deletes all the cells of family:column.
func (m *Mutation) DeleteCellsInColumn(family, column string) {
	m.add(op{kind: opDeleteColumn, family: family, column: column})
}

// DeleteTimestampRange deletes the cells of family:column whose stored
// timestamps are in [start, end); end 0 means infinity. On a managed family
// the stored timestamp is the strategy's, not the write time.
func (m *Mutation) DeleteTimestampRange(family, column string, start, end bigtable.Timestamp) {
	m.add(op{kind: opDeleteRange, family: family, column: column, ts: start, end: end})
}

// DeleteCellsInFamily deletes all the cells of family.
func (m *Mutation) DeleteCellsInFamily(family string) {
	m.add(op{kind: opDeleteFamily, family: family})
}

// DeleteRow deletes the entire row.
func (m *Mutation) DeleteRow() { m.add(op{kind: opDeleteRow}) }

// initialOps is the room a mutation's first change reserves: a row of up
// to 8 changes grows no slice.
const initialOps = 8

func (m *Mutation) add(o op) {
	if m.ops == nil {
		m.ops = make([]op, 0, initialOps)
	}
	m.ops = append(m.ops, o)
}

// AddIntToCell adds to an aggregate cell. Refused on a managed family: the
// server merges into a cell whose timestamp no strategy controls.
func (m *Mutation) AddIntToCell(family, column string, ts bigtable.Timestamp, value int64) {
	m.add(op{kind: opAddInt, family: family, column: column, ts: ts, n: value})
}

// MergeBytesToCell merges into an aggregate cell. Refused on a managed
// family, like AddIntToCell.
func (m *Mutation) MergeBytesToCell(family, column string, ts bigtable.Timestamp, value []byte) {
	m.add(op{kind: opMergeBytes, family: family, column: column, ts: ts, value: value})
}

// protos is m's changes as the data API's protos (the protos the
// client's own methods build), with each cell's intent beside it: what
// internal/rules reads. They are m's for one Apply: built together (a
// few allocations for all the cells), stamped in place.
func (m *Mutation) protos() ([]*btpb.Mutation, []rules.Intent) {
	nCol := 0
	for i := range m.ops {
		nCol += len(m.ops[i].column)
	}
	// One allocation holds every change's proto and, for a Set, its cell.
	type record struct {
		pb   btpb.Mutation
		set  btpb.Mutation_SetCell_
		cell btpb.Mutation_SetCell
	}
	recs := make([]record, len(m.ops))
	cols := make([]byte, nCol)
	col := func(c string) []byte {
		q := cols[:len(c):len(c)]
		copy(q, c)
		cols = cols[len(c):]
		return q
	}
	out := make([]*btpb.Mutation, len(m.ops))
	var intents []rules.Intent
	for i := range m.ops {
		o := &m.ops[i]
		pb := &recs[i].pb
		switch o.kind {
		case opSet:
			cell, set := &recs[i].cell, &recs[i].set
			cell.FamilyName, cell.ColumnQualifier, cell.TimestampMicros, cell.Value = o.family, col(o.column), int64(o.ts), o.value
			set.SetCell = cell
			pb.Mutation = set
			if o.intent.Kind != rules.IntentNone {
				if intents == nil {
					intents = make([]rules.Intent, len(m.ops))
				}
				intents[i] = o.intent
			}
		case opDeleteColumn:
			pb.Mutation = &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
				FamilyName: o.family, ColumnQualifier: col(o.column)}}
		case opDeleteRange:
			pb.Mutation = &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
				FamilyName: o.family, ColumnQualifier: col(o.column),
				TimeRange: &btpb.TimestampRange{StartTimestampMicros: int64(o.ts), EndTimestampMicros: int64(o.end)}}}
		case opDeleteFamily:
			pb.Mutation = &btpb.Mutation_DeleteFromFamily_{DeleteFromFamily: &btpb.Mutation_DeleteFromFamily{FamilyName: o.family}}
		case opDeleteRow:
			pb.Mutation = &btpb.Mutation_DeleteFromRow_{DeleteFromRow: &btpb.Mutation_DeleteFromRow{}}
		case opAddInt:
			pb.Mutation = &btpb.Mutation_AddToCell_{AddToCell: &btpb.Mutation_AddToCell{
				FamilyName:      o.family,
				ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: col(o.column)}},
				Timestamp:       &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: int64(o.ts)}},
				Input:           &btpb.Value{Kind: &btpb.Value_IntValue{IntValue: o.n}},
			}}
		case opMergeBytes:
			pb.Mutation = &btpb.Mutation_MergeToCell_{MergeToCell: &btpb.Mutation_MergeToCell{
				FamilyName:      o.family,
				ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: col(o.column)}},
				Timestamp:       &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: int64(o.ts)}},
				Input:           &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: o.value}},
			}}
		}
		out[i] = pb
	}
	return out, intents
}

// sendOps is the bigtable.Mutation for m's own changes, stamped as ms (one
// proto per change, in order), built with the client's own methods from
// m's values (no conversion of a qualifier back to a string).
func (m *Mutation) sendOps(ms []*btpb.Mutation) *bigtable.Mutation {
	b := bigtable.NewMutation()
	for i := range m.ops {
		o := &m.ops[i]
		switch o.kind {
		case opSet:
			b.Set(o.family, o.column, bigtable.Timestamp(ms[i].GetSetCell().GetTimestampMicros()), o.value)
		case opDeleteColumn:
			b.DeleteCellsInColumn(o.family, o.column)
		case opDeleteRange:
			b.DeleteTimestampRange(o.family, o.column, o.ts, o.end)
		case opDeleteFamily:
			b.DeleteCellsInFamily(o.family)
		case opDeleteRow:
			b.DeleteRow()
		case opAddInt:
			b.AddIntToCell(o.family, o.column, o.ts, o.n)
		case opMergeBytes:
			b.MergeBytesToCell(o.family, o.column, o.ts, o.value)
		}
	}
	return b
}

// toBigtable is the bigtable.Mutation holding ms, built with the client's
// own methods (its protos are the ones those methods build, so what is
// sent is ms).
func toBigtable(ms []*btpb.Mutation) *bigtable.Mutation {
	b := bigtable.NewMutation()
	for _, pb := range ms {
		switch x := pb.GetMutation().(type) {
		case *btpb.Mutation_SetCell_:
			c := x.SetCell
			b.Set(c.GetFamilyName(), string(c.GetColumnQualifier()), bigtable.Timestamp(c.GetTimestampMicros()), c.GetValue())
		case *btpb.Mutation_DeleteFromColumn_:
			d := x.DeleteFromColumn
			if r := d.GetTimeRange(); r != nil {
				b.DeleteTimestampRange(d.GetFamilyName(), string(d.GetColumnQualifier()),
					bigtable.Timestamp(r.GetStartTimestampMicros()), bigtable.Timestamp(r.GetEndTimestampMicros()))
			} else {
				b.DeleteCellsInColumn(d.GetFamilyName(), string(d.GetColumnQualifier()))
			}
		case *btpb.Mutation_DeleteFromFamily_:
			b.DeleteCellsInFamily(x.DeleteFromFamily.GetFamilyName())
		case *btpb.Mutation_DeleteFromRow_:
			b.DeleteRow()
		case *btpb.Mutation_AddToCell_:
			a := x.AddToCell
			b.AddIntToCell(a.GetFamilyName(), string(a.GetColumnQualifier().GetRawValue()),
				bigtable.Timestamp(a.GetTimestamp().GetRawTimestampMicros()), a.GetInput().GetIntValue())
		case *btpb.Mutation_MergeToCell_:
			a := x.MergeToCell
			b.MergeBytesToCell(a.GetFamilyName(), string(a.GetColumnQualifier().GetRawValue()),
				bigtable.Timestamp(a.GetTimestamp().GetRawTimestampMicros()), a.GetInput().GetRawValue())
		}
	}
	return b
}

// ReadModifyWrite mirrors bigtable.ReadModifyWrite. The server picks the
// timestamps it writes, so it is allowed only on unmanaged families.
type ReadModifyWrite struct {
	ops []rmwOp
}

type rmwOp struct {
	family, column string
	appendValue    []byte
	delta          int64
	isAppend       bool
}

// NewReadModifyWrite returns a new ReadModifyWrite.
func NewReadModifyWrite() *ReadModifyWrite { return new(ReadModifyWrite) }

// AppendValue appends v to the latest value of family:column.
func (m *ReadModifyWrite) AppendValue(family, column string, v []byte) {
	m.ops = append(m.ops, rmwOp{family: family, column: column, appendValue: v, isAppend: true})
}

// Increment adds delta to the latest value of family:column, a 64-bit
// big-endian integer.
func (m *ReadModifyWrite) Increment(family, column string, delta int64) {
	m.ops = append(m.ops, rmwOp{family: family, column: column, delta: delta})
}
