package ttlclient

import (
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/rules"
)

// Mutation is a set of changes for one row, like bigtable.Mutation, whose
// managed-family timestamps the Table assigns when it is applied: a plain
// list of typed changes, converted once per Apply into the
// bigtable.Mutation sent (built with the client's own methods).
//
// Like a bigtable.Mutation, it may be applied again, and by several
// goroutines at once, but not changed while it is being applied.
type Mutation struct {
	ops []rules.Op

	isConditional bool
	cond          bigtable.Filter
	mtrue, mfalse *Mutation
}

// NewMutation returns a new mutation.
func NewMutation() *Mutation {
	r := new(mutationWithRoom)
	r.m.ops = r.room[:0]
	return &r.m
}

// mutationWithRoom is a Mutation and the room for its first changes,
// allocated together: a row of up to initialOps changes costs one
// allocation, the one bigtable.NewMutation makes.
type mutationWithRoom struct {
	m    Mutation
	room [initialOps]rules.Op
}

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
	m.add(rules.Op{Kind: rules.OpSet, Family: family, Column: column, TS: ts, Value: value})
}

// SetTTL sets a value in family:column that lives ttl from the time the
// mutation is applied (one-second and default-expiry families; refused on
// others with strategy.ErrWrongCellOption). A ttl over a family's max TTL
// is clamped when the family clamps, refused otherwise.
func (m *Mutation) SetTTL(family, column string, ttl time.Duration, value []byte) {
	m.add(rules.Op{Kind: rules.OpSet, Family: family, Column: column, TS: bigtable.ServerTime,
		Intent: rules.IntentTTL, Arg: int64(ttl), Value: value})
}

// SetVersion sets version seq of a value in family:column, a sequence
// family (timestamp seq*1000; refused on others with
// strategy.ErrWrongCellOption).
func (m *Mutation) SetVersion(family, column string, seq int64, value []byte) {
	m.add(rules.Op{Kind: rules.OpSet, Family: family, Column: column, TS: bigtable.ServerTime,
		Intent: rules.IntentSequence, Arg: seq, Value: value})
}

// DeleteCellsInColumn deletes all the cells of family:column.
func (m *Mutation) DeleteCellsInColumn(family, column string) {
	m.add(rules.Op{Kind: rules.OpDeleteColumn, Family: family, Column: column})
}

// DeleteTimestampRange deletes the cells of family:column whose stored
// timestamps are in [start, end); end 0 means infinity. On a managed family
// the stored timestamp is the strategy's, not the write time. A bound that
// is not a whole millisecond is refused with ErrTimestampGranularity (the
// client's own DeleteTimestampRange truncates it, deleting another range).
func (m *Mutation) DeleteTimestampRange(family, column string, start, end bigtable.Timestamp) {
	m.add(rules.Op{Kind: rules.OpDeleteRange, Family: family, Column: column, TS: start, Arg: int64(end)})
}

// DeleteCellsInFamily deletes all the cells of family.
func (m *Mutation) DeleteCellsInFamily(family string) {
	m.add(rules.Op{Kind: rules.OpDeleteFamily, Family: family})
}

// DeleteRow deletes the entire row.
func (m *Mutation) DeleteRow() { m.add(rules.Op{Kind: rules.OpDeleteRow}) }

// initialOps is the room NewMutation makes (and a zero Mutation's first
// change reserves): a row of up to 8 changes grows no slice.
const initialOps = 8

func (m *Mutation) add(o rules.Op) {
	if m.ops == nil {
		m.ops = make([]rules.Op, 0, initialOps)
	}
	m.ops = append(m.ops, o)
}

// AddIntToCell adds to an aggregate cell. Refused on a managed family: the
// server merges into a cell whose timestamp no strategy controls.
func (m *Mutation) AddIntToCell(family, column string, ts bigtable.Timestamp, value int64) {
	m.add(rules.Op{Kind: rules.OpAddInt, Family: family, Column: column, TS: ts, Arg: value})
}

// MergeBytesToCell merges into an aggregate cell. Refused on a managed
// family, like AddIntToCell.
func (m *Mutation) MergeBytesToCell(family, column string, ts bigtable.Timestamp, value []byte) {
	m.add(rules.Op{Kind: rules.OpMergeBytes, Family: family, Column: column, TS: ts, Value: value})
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
