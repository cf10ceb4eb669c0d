package ttlclient

import (
	"strconv"
	"sync/atomic"
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

// op is one change as the write path reads it: decoded from the recorded
// operation (Mutation.decode) on the stack, never stored. n holds whichever of
// the TTL, sequence number, range end or integer value its kind and cell
// option call for.
type op struct {
	kind    opKind
	cellOpt cellOptKind
	family  string
	column  string
	ts      bigtable.Timestamp
	n       int64
	value   []byte
}

func (o *op) ttl() time.Duration      { return time.Duration(o.n) }
func (o *op) seq() int64              { return o.n }
func (o *op) end() bigtable.Timestamp { return bigtable.Timestamp(o.n) }
func (o *op) intValue() int64         { return o.n }

func (co CellOption) value() int64 {
	if co.kind == cellOptSeq {
		return co.seq
	}
	return int64(co.ttl)
}

// ownedOp is one change recorded by a Mutation's methods, in one
// allocation. Its first field is the operation proto a Set sends:
// Mutation.ops holds &pb, so the record of a Set is the cell the first
// Apply sends, its timestamp written in place (see Mutation), and nothing
// is built again.
// The caller's own values (timestamp, option) stay beside it, because the
// timestamp sent is computed from them at every Apply.
type ownedOp struct {
	pb   btpb.Mutation // a Set's operation; empty (never sent) for other kinds
	set  btpb.Mutation_SetCell_
	cell btpb.Mutation_SetCell // a Set's cell; every kind's family, column and value
	ts   bigtable.Timestamp    // as given: a Set's or an aggregate's timestamp, a range's start
	n    int64
	kind opKind
	opt  cellOptKind
	// q holds a short qualifier, so that the usual column costs no
	// allocation of its own; 16 bytes keep the record in the 224-byte size
	// class.
	q [16]byte
}

// initialOps is the room a mutation's first change reserves for its
// operation pointers: a row of up to 8 changes grows no slice, and a larger
// one grows it by doubling, as the client's does. 8 pointers (64 bytes)
// rather than 16 keep the usual small row small.
const initialOps = 8

// record appends a change of kind on family:column and returns it for
// the caller to complete.
func (m *Mutation) record(kind opKind, family, column string, ts bigtable.Timestamp, value []byte) *ownedOp {
	w := &ownedOp{kind: kind, ts: ts}
	w.cell.FamilyName = family
	if len(column) <= len(w.q) {
		w.cell.ColumnQualifier = w.q[:len(column):len(column)]
		copy(w.q[:], column)
	} else {
		w.cell.ColumnQualifier = []byte(column)
	}
	w.cell.Value = value
	if m.ops == nil {
		m.ops = make([]*btpb.Mutation, 0, initialOps)
	}
	m.ops = append(m.ops, &w.pb)
	return w
}

// Mutation is a set of changes for one row, like bigtable.Mutation, whose
// managed-family timestamps the Table assigns when it is applied.
//
// Like a bigtable.Mutation, it may be applied again, and by several
// goroutines at once, but not changed while it is being applied. A request
// once sent is never changed by the library: applying the Mutation again
// builds a new request, so an interceptor may keep the one it saw.
type Mutation struct {
	// ops are the changes as the client's own operation protos. A
	// Mutation's own (borrowed false) are each the pb of an ownedOp: the
	// first Apply to send them (the one that claims spent) writes the
	// timestamps of its Sets into them and sends them as they are; from
	// then on they belong to that request and are only read, and every
	// later Apply (or one concurrent with it, or the same Mutation twice in
	// one ApplyBulk) builds its cells anew. Borrowed ops are a
	// *bigtable.Mutation's (the TableAPI path): never written to, sent as
	// they are where the rewrite leaves them so.
	ops      []*btpb.Mutation
	borrowed bool
	caller   *bigtable.Mutation // the borrowed ops' mutation
	spent    atomic.Bool
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
// is chosen by its order. Every refusal is strategy.ErrWrongCellOption, when the
// mutation is applied.
func (m *Mutation) Set(family, column string, ts bigtable.Timestamp, value []byte, opts ...CellOption) {
	w := m.record(opSet, family, column, ts, value)
	switch len(opts) {
	case 0:
	case 1:
		w.opt, w.n = opts[0].kind, opts[0].value()
	default:
		w.opt, w.n = cellOptMany, int64(len(m.manyOpts))
		m.manyOpts = append(m.manyOpts, append([]CellOption(nil), opts...))
	}
	w.set.SetCell = &w.cell
	w.pb.Mutation = &w.set
}

// DeleteCellsInColumn deletes all the cells of family:column.
func (m *Mutation) DeleteCellsInColumn(family, column string) {
	m.record(opDeleteColumn, family, column, 0, nil)
}

// DeleteTimestampRange deletes the cells of family:column whose stored
// timestamps are in [start, end); end 0 means infinity. On a managed family
// the stored timestamp is the strategy's, not the write time.
func (m *Mutation) DeleteTimestampRange(family, column string, start, end bigtable.Timestamp) {
	m.record(opDeleteRange, family, column, start, nil).n = int64(end)
}

// DeleteCellsInFamily deletes all the cells of family.
func (m *Mutation) DeleteCellsInFamily(family string) {
	m.record(opDeleteFamily, family, "", 0, nil)
}

// DeleteRow deletes the entire row.
func (m *Mutation) DeleteRow() {
	m.record(opDeleteRow, "", "", 0, nil)
}

// AddIntToCell adds to an aggregate cell. Refused on a managed family: the
// server merges into a cell whose timestamp no strategy controls.
func (m *Mutation) AddIntToCell(family, column string, ts bigtable.Timestamp, value int64) {
	m.record(opAddInt, family, column, ts, nil).n = value
}

// MergeBytesToCell merges into an aggregate cell. Refused on a managed
// family, like AddIntToCell.
func (m *Mutation) MergeBytesToCell(family, column string, ts bigtable.Timestamp, value []byte) {
	m.record(opMergeBytes, family, column, ts, value)
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
