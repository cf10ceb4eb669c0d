package ttlclient

import (
	"strconv"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
)

// Auto asks the library to assign a cell's timestamp: from its TTL, its
// sequence number or the family's default. It is bigtable.ServerTime, so code
// that wrote server timestamps keeps compiling; on a managed family the
// library, not the server, picks the value.
const Auto = bigtable.ServerTime

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

type cellOptKind uint8

const (
	cellOptNone cellOptKind = iota
	cellOptTTL
	cellOptSeq
	cellOptMany // more than one option: refused when applied; n indexes Mutation.manyOpts
)

// CellOption sets a cell's TTL or sequence number. It is a small value so
// passing one allocates nothing.
type CellOption struct {
	kind cellOptKind
	ttl  time.Duration
	seq  int64
}

// WithTTL gives the cell its own TTL (age families). Cells without one get
// the family's default TTL.
func WithTTL(d time.Duration) CellOption { return CellOption{kind: cellOptTTL, ttl: d} }

// WithSequence gives the cell its version number on a sequence family; the
// timestamp written is seq*1000.
func WithSequence(seq int64) CellOption { return CellOption{kind: cellOptSeq, seq: seq} }

// String is the option as it was written: WithTTL(1h0m0s), WithSequence(5).
func (co CellOption) String() string {
	switch co.kind {
	case cellOptTTL:
		return "WithTTL(" + co.ttl.String() + ")"
	case cellOptSeq:
		return "WithSequence(" + strconv.FormatInt(co.seq, 10) + ")"
	}
	return "CellOption{}"
}

// op is one recorded change. Every op is copied once into the mutation and
// read once when it is applied, so it is kept to 80 bytes: n holds
// whichever of the TTL, sequence number, range end or integer value its kind
// and cell option call for.
type op struct {
	kind    opKind
	cellOpt cellOptKind
	family  string
	column  string
	ts      bigtable.Timestamp
	n       int64
	value   []byte
}

func (o *op) ttl() time.Duration          { return time.Duration(o.n) }
func (o *op) seq() int64                  { return o.n }
func (o *op) end() bigtable.Timestamp     { return bigtable.Timestamp(o.n) }
func (o *op) intValue() int64             { return o.n }
func (o *op) setCellOption(co CellOption) { o.cellOpt, o.n = co.kind, co.value() }

func (co CellOption) value() int64 {
	if co.kind == cellOptSeq {
		return co.seq
	}
	return int64(co.ttl)
}

// initialOps is the room a mutation's first change reserves: a row mutation
// of up to 16 cells then costs one allocation for its ops, where growing
// from one op would cost five for ten cells.
const initialOps = 16

// add appends o, reserving initialOps on the first change.
func (m *Mutation) add(o op) {
	if m.ops == nil {
		m.ops = make([]op, 0, initialOps)
	}
	m.ops = append(m.ops, o)
}

// Mutation is a set of changes for one row, like bigtable.Mutation, whose
// managed-family timestamps the Table assigns when it is applied.
type Mutation struct {
	ops []op
	// srcs, for a mutation read from a *bigtable.Mutation (the TableAPI
	// path), are the caller's operations, one per op: those the rewrite
	// leaves as they are are sent as they are.
	srcs []*btpb.Mutation
	// manyOpts holds the options of each Set given more than one, for the
	// refusal to name them.
	manyOpts [][]CellOption

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

// Set sets a value in family:column. On an unmanaged family ts is written
// as given, truncated to the millisecond. On a managed family:
//   - with WithTTL or WithSequence, or ts == Auto, the library assigns the
//     timestamp (the family's default TTL when no option is given);
//   - otherwise ts is taken as the family's convention defines it: the expiry
//     instant (one-second), a real write time (default expiry) or seq*1000
//     (sequence), and refused if the cell would be expired on arrival.
//
// A TTL and an explicit ts together are refused: say one or the other.
// So is more than one cell option, even two of the same kind: no option
// is chosen by its order. Every refusal is ErrWrongCellOption, when the
// mutation is applied.
func (m *Mutation) Set(family, column string, ts bigtable.Timestamp, value []byte, opts ...CellOption) {
	o := op{kind: opSet, family: family, column: column, ts: ts, value: value}
	switch len(opts) {
	case 0:
	case 1:
		o.setCellOption(opts[0])
	default:
		o.cellOpt, o.n = cellOptMany, int64(len(m.manyOpts))
		m.manyOpts = append(m.manyOpts, append([]CellOption(nil), opts...))
	}
	m.add(o)
}

// DeleteCellsInColumn deletes all the cells of family:column.
func (m *Mutation) DeleteCellsInColumn(family, column string) {
	m.add(op{kind: opDeleteColumn, family: family, column: column})
}

// DeleteTimestampRange deletes the cells of family:column whose stored
// timestamps are in [start, end); end 0 means infinity. On a managed family
// the stored timestamp is the strategy's, not the write time.
func (m *Mutation) DeleteTimestampRange(family, column string, start, end bigtable.Timestamp) {
	m.add(op{kind: opDeleteRange, family: family, column: column, ts: start, n: int64(end)})
}

// DeleteCellsInFamily deletes all the cells of family.
func (m *Mutation) DeleteCellsInFamily(family string) {
	m.add(op{kind: opDeleteFamily, family: family})
}

// DeleteRow deletes the entire row.
func (m *Mutation) DeleteRow() {
	m.add(op{kind: opDeleteRow})
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
