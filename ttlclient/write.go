package ttlclient

import (
	"fmt"
	"strings"
	"time"
	"unsafe"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/strategy"
)

// The write path after table.go's entry points (Apply, ApplyBulk): every
// write, a Mutation's or a *bigtable.Mutation's (rawmutation.go borrows
// those), is built and checked here, in call order, into the
// bigtable.Mutation it sends (docs/design.md#code-paths).

// build turns m into the mutation to send at now, or the first refusal.
// now is the clock reading itself, not its microseconds: a TTL is added to
// it in nanoseconds (strategy.Policy.WriteTimestamp). The first build of
// m to succeed may send m's own cells, their timestamps written in place
// (Mutation.claim); they are then never written again.
func (t *Table) build(row string, m *Mutation, now time.Time, bulk bool) (*bigtable.Mutation, error) {
	if err := t.checkRowKey(row); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, t.refuse(row, "", "", ErrNilMutation)
	}
	if !m.isConditional {
		if len(m.ops) == 0 {
			return nil, t.refuse(row, "", "", ErrEmptyMutation)
		}
		inPlace := m.claim()
		bm, err := t.convert(row, m, now, inPlace)
		if err != nil && inPlace {
			m.unclaim() // nothing was sent
		}
		return bm, err
	}
	if bulk {
		return nil, t.refuse(row, "", "", ErrConditionalInBulk)
	}
	// A conditional mutation's branches are built anew: they are rare, and
	// the same Mutation may be both.
	branch := func(b *Mutation) (*bigtable.Mutation, error) {
		if b == nil {
			return nil, nil
		}
		if b.isConditional {
			return nil, t.refuse(row, "", "", ErrNestedCondition)
		}
		return t.convert(row, b, now, false)
	}
	mtrue, err := branch(m.mtrue)
	if err != nil {
		return nil, err
	}
	mfalse, err := branch(m.mfalse)
	if err != nil {
		return nil, err
	}
	return bigtable.NewCondMutation(t.filters.Compose(bigtable.Timestamp(now.UnixMicro()), m.cond), mtrue, mfalse), nil
}

// convert is the bigtable.Mutation to send for m's operations, with
// managed timestamps rewritten, or the first refusal. inPlace: the caller
// claimed m (Mutation.claim), so its own cells are sent themselves.
func (t *Table) convert(row string, m *Mutation, now time.Time, inPlace bool) (*bigtable.Mutation, error) {
	n := len(m.ops)
	if t.singleValue {
		n *= 2 // room for a delete before each Set
	}
	s := newSentMutation(t.layout, m, n, inPlace)
	nowMicros := bigtable.Timestamp(now.UnixMicro())
	// A row's cells are usually in one or two families: look a family up
	// only when it changes.
	var (
		fam   string
		p     strategy.Policy
		found bool
		chk   strategy.ExplicitCheck // p's explicit timestamps at now
	)
	var o op
	for i := range m.ops {
		if e := m.decode(i, &o); e != nil {
			return nil, t.refuse(row, e.family, e.column, e.err)
		}
		if o.kind == opDeleteRow {
			s.keep(i, &o)
			continue
		}
		if !found || o.family != fam {
			p, found = t.policy(o.family)
			if !found {
				return nil, t.opError(row, &o, ErrUnknownFamily)
			}
			fam = o.family
			chk = strategy.NewExplicitCheck(p, nowMicros)
		}
		var ts bigtable.Timestamp // a Set's, for its write-time companion
		switch o.kind {
		case opSet:
			if o.cellOpt == cellOptMany {
				opts := m.manyOpts[o.n]
				e := t.opError(row, &o, fmt.Errorf("%w: %d cell options on one Set; give one, WithTTL on an age family or WithSequence on a sequence family", strategy.ErrWrongCellOption, len(opts)))
				e.Options = opts
				return nil, e
			}
			if len(o.value) > MaxValueBytes {
				return nil, t.opError(row, &o, fmt.Errorf("%w: %d bytes", ErrValueTooLarge, len(o.value)))
			}
			var err error
			if ts, err = cellTimestamp(&p, &chk, &o, now); err != nil {
				return nil, t.opError(row, &o, err)
			}
			t.putCell(&s, i, &o, &p, ts, nowMicros)
		case opDeleteColumn, opDeleteFamily:
			s.keep(i, &o)
		case opDeleteRange:
			if end := o.end(); o.ts < 0 || end < 0 || (end != 0 && strategy.Millis(end) <= strategy.Millis(o.ts)) {
				return nil, t.opError(row, &o, fmt.Errorf("%w: [%d, %d)", ErrInvalidTimestampRange, o.ts, end))
			}
			s.keep(i, &o)
		case opAddInt, opMergeBytes:
			if p.Managed() {
				return nil, t.opError(row, &o, fmt.Errorf("%w: AddToCell/MergeToCell on a %s family", ErrServerAssignedTimestamp, p.Kind()))
			}
			if o.ts < 0 {
				return nil, t.opError(row, &o, fmt.Errorf("%w: timestamp %d", strategy.ErrBeforeEpoch, o.ts))
			}
			s.keep(i, &o)
		}
		if p.HasWriteTime() {
			if err := t.writeTimeCompanion(row, &o, ts, nowMicros, &s); err != nil {
				return nil, err
			}
		}
	}
	bm := s.finish()
	if bm == nil {
		return nil, t.refuse(row, "", "", fmt.Errorf("bttl: internal error: the write path left an operation of the mutation unsent; nothing was sent"))
	}
	return bm, nil
}

// putCell adds to s the cell of m.ops[i] (o decoded), a Set on a family of
// policy p, with its final timestamp ts, at nowMicros: the one place where
// each cell sent is known with its family, policy and timestamp.
func (t *Table) putCell(s *sentMutation, i int, o *op, p *strategy.Policy, ts, nowMicros bigtable.Timestamp) {
	if p.IsSingleValue() {
		s.extra().DeleteCellsInColumn(o.family, o.column)
	}
	s.set(i, o, ts)
	t.obs.cell(p, o, ts, nowMicros)
}

// cellTimestamp is the timestamp to write for a Set under policy p at now;
// chk checks p's explicit timestamps at now.
func cellTimestamp(p *strategy.Policy, chk *strategy.ExplicitCheck, o *op, now time.Time) (bigtable.Timestamp, error) {
	if !p.Managed() {
		if o.cellOpt != cellOptNone {
			return 0, fmt.Errorf("%w: an unmanaged family keeps the caller's timestamp", strategy.ErrWrongCellOption)
		}
		if o.ts == bigtable.ServerTime {
			return o.ts, nil
		}
		if o.ts < 0 {
			return 0, fmt.Errorf("%w: timestamp %d", strategy.ErrBeforeEpoch, o.ts)
		}
		return strategy.Millis(o.ts), nil
	}
	if o.cellOpt != cellOptNone && o.ts != Auto {
		return 0, fmt.Errorf("%w: give a TTL or sequence option with ttlclient.Auto, not with timestamp %d", strategy.ErrWrongCellOption, o.ts)
	}
	switch o.cellOpt {
	case cellOptTTL:
		return p.WriteTimestamp(now, o.ttl())
	case cellOptSeq:
		return p.SequenceTimestamp(o.seq())
	}
	if o.ts == Auto {
		return p.DefaultTimestamp(now)
	}
	return chk.Check(o.ts)
}

func (t *Table) opError(row string, o *op, err error) *CellError {
	t.obs.refused(o.family, err)
	e := &CellError{Table: t.name, Row: row, Family: o.family, Column: o.column, Err: err, named: true, text: t.keyText}
	switch {
	case o.cellOpt == cellOptTTL:
		e.TTL = o.ttl()
	case o.cellOpt == cellOptSeq:
		e.Sequence = o.seq()
	}
	if o.kind == opSet || o.kind == opDeleteRange || o.kind == opAddInt || o.kind == opMergeBytes {
		e.Timestamp = o.ts
	}
	return e
}

// policy is family's policy: the schema's, else the unlisted families'
// when WithUnlistedFamilies was given; ok is false for a family neither
// covers (a write to it is refused with ErrUnknownFamily).
func (t *Table) policy(family string) (p strategy.Policy, ok bool) {
	if p, ok = t.schema[family]; ok || t.unlisted == nil {
		return p, ok
	}
	return *t.unlisted, true
}

// writeTimeCompanion adds to s the companion changes op o needs on a
// family with write-time companions, after o's own: a Set (at ts) writes
// its companion at the same timestamp, holding the write time now (to the
// millisecond); a column or range delete deletes the companions too (a
// single-value Set's delete of older cells included). A column in the
// reserved range is refused. It is the write path's only change for
// strategy.WithWriteTime (docs/design.md#write-time).
func (t *Table) writeTimeCompanion(row string, o *op, ts, now bigtable.Timestamp, s *sentMutation) error {
	switch o.kind {
	case opSet, opDeleteColumn, opDeleteRange:
		if strings.HasPrefix(o.column, companionHidesFrom) {
			return t.opError(row, o, ErrReservedColumn) // the *CellError names the column
		}
	default:
		return nil // a family or row delete takes the companions with it
	}
	q := companionQualifier(o.column)
	bm := s.extra()
	switch o.kind {
	case opSet:
		if p := t.schema[o.family]; p.IsSingleValue() {
			bm.DeleteCellsInColumn(o.family, q)
		}
		bm.Set(o.family, q, ts, strategy.WriteTimeValue(now))
	case opDeleteColumn:
		bm.DeleteCellsInColumn(o.family, q)
	case opDeleteRange:
		bm.DeleteTimestampRange(o.family, q, o.ts, o.end())
	}
	return nil
}

// cell records a cell set in family with timestamp ts at now.
func (o *observer) cell(p *strategy.Policy, op *op, ts, now bigtable.Timestamp) {
	if o == nil {
		return
	}
	o.cellSlow(p, op, ts, now)
}

func (o *observer) cellSlow(p *strategy.Policy, op *op, ts, now bigtable.Timestamp) {
	var ttl time.Duration
	switch {
	case p.Kind() != strategy.KindOneSecond && p.Kind() != strategy.KindDefaultExpiry:
	case op.cellOpt == cellOptTTL:
		ttl = op.ttl()
	default:
		// Exact up to time.Duration's range (292 years), the most a
		// histogram observation holds; Sub clamps beyond it, never wraps.
		ttl = p.ExpiryTime(ts).Sub(time.UnixMicro(int64(now)))
	}
	o.rec.CellWritten(op.family, p.Kind(), ttl)
}

// claim reports whether the caller may write m's own operations in place
// and send them: true once, for the first Apply to build m. A refused build
// gives the claim back (unclaim), since nothing was sent.
func (m *Mutation) claim() bool { return !m.borrowed && m.spent.CompareAndSwap(false, true) }

func (m *Mutation) unclaim() { m.spent.Store(false) }

// decode decodes operation i into o, which it overwrites: the write path
// decodes every operation into one op of its own.
func (m *Mutation) decode(i int, o *op) *rawOpError {
	if m.borrowed {
		return decodeOp(m.ops[i], o)
	}
	w := owned(m.ops[i])
	// Field by field, as decodeOp's Set.
	o.kind, o.cellOpt, o.family, o.column = w.kind, w.opt, w.cell.FamilyName, column(w.cell.ColumnQualifier)
	o.ts, o.n, o.value = w.ts, w.n, w.cell.Value
	return nil
}

// owned is the record whose operation is pb: valid only for a Mutation's
// own operations (not borrowed), every one of which is the pb of an
// ownedOp.
func owned(pb *btpb.Mutation) *ownedOp { return (*ownedOp)(unsafe.Pointer(pb)) }

// The cast in owned needs pb first in ownedOp: this fails to compile if it
// is not.
var _ [0]struct{} = [unsafe.Offsetof(ownedOp{}.pb)]struct{}{}

// sentMutation is the bigtable.Mutation a write sends, being filled from
// the recorded operations of m. With the checked layout of
// bigtable.Mutation, operations sent as they are (a Mutation's own Sets on
// its first Apply, their timestamps written in place, or a
// *bigtable.Mutation's unchanged operations) are shared: while every
// operation so far is sent as recorded, bm is nil, the sent ops are a
// prefix of m.ops and nothing is copied; the first change (a cell built
// anew, an operation added or rebuilt) makes bm and copies that prefix
// once into ops sized for the rest. Cells built anew are allocated
// together, an array per proto type, rather than four allocations per cell
// as bigtable.Mutation.Set makes; they are the protos Set builds
// (rawSelfCheck compares them). Without the layout, bm is a plain
// bigtable.Mutation from the start, filled by its own methods.
type sentMutation struct {
	l  *rawLayout         // nil: bm is filled by its own methods
	bm *bigtable.Mutation // with the layout, nil while sharing m.ops
	m  *Mutation
	// inPlace: this build claimed m (Mutation.claim), so its own cells are
	// sent themselves, their timestamps written in.
	inPlace bool
	shared  int // while sharing, the first shared of m.ops are what is sent
	room    int // the capacity of bm's ops once made
	// Room for the cells still to be built: the protos are only read
	// (marshalled) once sent. Three arrays rather than one of a struct of
	// the three: a 10-cell struct array would be rounded up to the next
	// size class by 11%.
	muts  []btpb.Mutation
	sets  []btpb.Mutation_SetCell_
	cells []btpb.Mutation_SetCell
	cols  []byte // their qualifiers
}

// newSentMutation is an empty mutation for m's operations, with room for
// n operations should it copy them, so that filling it grows no slice. l
// is the client's checked layout, nil when the check failed; inPlace, that
// the caller claimed m.
func newSentMutation(l *rawLayout, m *Mutation, n int, inPlace bool) sentMutation {
	if l == nil {
		return sentMutation{bm: bigtable.NewMutation(), m: m}
	}
	return sentMutation{l: l, m: m, inPlace: inPlace, room: n}
}

// ops is bm's operations, with the layout.
func (s *sentMutation) ops() *[]*btpb.Mutation {
	return (*[]*btpb.Mutation)(unsafe.Add(unsafe.Pointer(s.bm), s.l.ops))
}

// send sends pb as operation i of m's order.
func (s *sentMutation) send(i int, pb *btpb.Mutation) {
	if s.bm == nil && s.shared == i && s.m.ops[i] == pb {
		s.shared++
		return
	}
	s.copy()
	*s.ops() = append(*s.ops(), pb)
}

// copy ends the sharing of m.ops: bm is made, holding the operations sent
// so far.
func (s *sentMutation) copy() {
	if s.bm != nil {
		return
	}
	s.bm = bigtable.NewMutation()
	*s.ops() = append(make([]*btpb.Mutation, 0, max(s.room, s.shared+1)), s.m.ops[:s.shared]...)
}

// extra is bm, for an operation the rewrite adds through the client's own
// methods.
func (s *sentMutation) extra() *bigtable.Mutation {
	s.copy()
	return s.bm
}

// finish is the mutation to send: the caller's own when every one of its
// operations is sent as it is. It is nil if an operation was neither sent
// nor replaced, which the write path never leaves (every kind it knows is
// sent, rebuilt or refused): m is then sent neither whole nor in part.
func (s *sentMutation) finish() *bigtable.Mutation {
	switch {
	case s.bm != nil:
		return s.bm
	case s.shared != len(s.m.ops):
		return nil
	case s.m.caller != nil:
		return s.m.caller
	}
	s.bm = bigtable.NewMutation()
	*s.ops() = s.m.ops[:s.shared:s.shared] // capped: an append never reaches m's array
	return s.bm
}

// keep sends recorded operation i, o as decoded, unchanged: as the
// recorded proto where there is one (a *bigtable.Mutation's operation),
// else built by the client's own method.
func (s *sentMutation) keep(i int, o *op) {
	if s.l != nil && s.m.borrowed {
		s.send(i, s.m.ops[i])
		return
	}
	bm := s.extra()
	switch o.kind {
	case opSet:
		bm.Set(o.family, o.column, o.ts, o.value)
	case opDeleteColumn:
		bm.DeleteCellsInColumn(o.family, o.column)
	case opDeleteRange:
		bm.DeleteTimestampRange(o.family, o.column, o.ts, o.end())
	case opDeleteFamily:
		bm.DeleteCellsInFamily(o.family)
	case opDeleteRow:
		bm.DeleteRow()
	case opAddInt:
		bm.AddIntToCell(o.family, o.column, o.ts, o.intValue())
	case opMergeBytes:
		bm.MergeBytesToCell(o.family, o.column, o.ts, o.value)
	}
}

// set sends the Set m.ops[i], o as decoded, with timestamp ts: the
// recorded cell itself where it already has ts (a *bigtable.Mutation's
// cell) or where inPlace lets ts be written into it (a Mutation's own, on
// the Apply that claimed it: its first), else a cell built anew. A cell
// once sent is never written again: a request an interceptor keeps stays
// as it was sent.
func (s *sentMutation) set(i int, o *op, ts bigtable.Timestamp) {
	if s.l == nil {
		s.bm.Set(o.family, o.column, ts, o.value)
		return
	}
	ts = ts.TruncateToMilliseconds()
	m := s.m
	pb := m.ops[i]
	switch {
	case m.borrowed && pb.GetSetCell().GetTimestampMicros() == int64(ts):
		s.send(i, pb)
		return
	case !m.borrowed && s.inPlace:
		owned(pb).cell.TimestampMicros = int64(ts)
		s.send(i, pb)
		return
	}
	if len(s.cells) == 0 || len(s.cols) < len(o.column) {
		s.reserve(i) // room for this cell and those expected after it
	}
	pb, set, cell := &s.muts[0], &s.sets[0], &s.cells[0]
	s.muts, s.sets, s.cells = s.muts[1:], s.sets[1:], s.cells[1:]
	q := s.cols[:len(o.column):len(o.column)]
	s.cols = s.cols[len(o.column):]
	copy(q, o.column)
	cell.FamilyName = o.family
	cell.ColumnQualifier = q
	cell.TimestampMicros = int64(ts)
	cell.Value = o.value
	set.SetCell = cell
	pb.Mutation = set
	s.copy()
	*s.ops() = append(*s.ops(), pb)
}

// reserve makes room for cell i and the cells of m's later Sets expected
// to be built anew, and their qualifiers: four allocations for all of
// them. Of a *bigtable.Mutation's, only a server timestamp's cell is
// expected to be (another is when its timestamp is clamped: set reserves
// again when the room runs out).
func (s *sentMutation) reserve(i int) {
	m := s.m
	n, cols := 0, 0
	for j, pb := range m.ops[i:] {
		c := pb.GetSetCell()
		if c == nil || (m.borrowed && j > 0 && c.TimestampMicros != int64(bigtable.ServerTime)) {
			continue
		}
		n++
		cols += len(c.ColumnQualifier)
	}
	s.muts = make([]btpb.Mutation, n)
	s.sets = make([]btpb.Mutation_SetCell_, n)
	s.cells = make([]btpb.Mutation_SetCell, n)
	s.cols = make([]byte, cols)
}

func companionQualifier(column string) string { return strategy.WriteTimeColumn(column) }
