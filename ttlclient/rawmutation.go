package ttlclient

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/protobuf/proto"
)

// *bigtable.Mutation and *bigtable.ReadModifyWrite have no accessors, so the
// TableAPI path reads their unexported fields at offsets found once with
// reflect. The layout is checked field by field, then a mutation holding
// every op kind is built with the client's own methods, read back and
// compared (rawSelfCheck). If either fails, every TableAPI write fails with
// ErrMutationUnreadable.
type rawLayout struct {
	ops, cond, isConditional, mtrue, mfalse uintptr // bigtable.Mutation
	rmwOps                                  uintptr // bigtable.ReadModifyWrite
}

var (
	rawLayoutOnce sync.Once
	rawLayoutVal  rawLayout
	rawLayoutErr  error

	// rawBroken, set by tests, makes the mechanism fail as on an unknown
	// client version.
	rawBroken atomic.Bool
)

// layout is the checked layout, or the reason the mechanism cannot be used.
func layout() (*rawLayout, error) {
	rawLayoutOnce.Do(func() {
		rawLayoutVal, rawLayoutErr = findLayout()
		if rawLayoutErr == nil {
			rawLayoutErr = rawSelfCheck(&rawLayoutVal)
		}
	})
	if rawBroken.Load() {
		return nil, fmt.Errorf("%w: layout check disabled by a test", ErrMutationUnreadable)
	}
	if rawLayoutErr != nil {
		return nil, rawLayoutErr
	}
	return &rawLayoutVal, nil
}

func findLayout() (rawLayout, error) {
	var l rawLayout
	field := func(t reflect.Type, name string, want reflect.Type) (uintptr, error) {
		f, ok := t.FieldByName(name)
		if !ok || f.Type != want || len(f.Index) != 1 {
			return 0, fmt.Errorf("%w: %s.%s is not a %s in this client version", ErrMutationUnreadable, t, name, want)
		}
		return f.Offset, nil
	}
	mt := reflect.TypeOf(bigtable.Mutation{})
	if mt.NumField() != 5 {
		return l, fmt.Errorf("%w: bigtable.Mutation has %d fields, want 5", ErrMutationUnreadable, mt.NumField())
	}
	var err error
	fields := []struct {
		name string
		typ  reflect.Type
		off  *uintptr
	}{
		{"ops", reflect.TypeOf([]*btpb.Mutation(nil)), &l.ops},
		{"cond", reflect.TypeOf((*bigtable.Filter)(nil)).Elem(), &l.cond},
		{"isConditional", reflect.TypeOf(false), &l.isConditional},
		{"mtrue", reflect.TypeOf((*bigtable.Mutation)(nil)), &l.mtrue},
		{"mfalse", reflect.TypeOf((*bigtable.Mutation)(nil)), &l.mfalse},
	}
	for _, f := range fields {
		if *f.off, err = field(mt, f.name, f.typ); err != nil {
			return l, err
		}
	}
	// Every way to build a mutation must be one the self-check exercises: a
	// method added in a later version could write a field bttl does not
	// carry over, so an unknown method set fails closed.
	if err := knownMethods(reflect.TypeOf((*bigtable.Mutation)(nil)), "AddIntToCell", "DeleteCellsInColumn",
		"DeleteCellsInFamily", "DeleteRow", "DeleteTimestampRange", "MergeBytesToCell", "Set"); err != nil {
		return l, err
	}
	if err := knownMethods(reflect.TypeOf((*bigtable.ReadModifyWrite)(nil)), "AppendValue", "Increment"); err != nil {
		return l, err
	}
	rt := reflect.TypeOf(bigtable.ReadModifyWrite{})
	if rt.NumField() != 1 {
		return l, fmt.Errorf("%w: bigtable.ReadModifyWrite has %d fields, want 1", ErrMutationUnreadable, rt.NumField())
	}
	l.rmwOps, err = field(rt, "ops", reflect.TypeOf([]*btpb.ReadModifyWriteRule(nil)))
	return l, err
}

// knownMethods checks that t's exported methods are exactly names, sorted.
func knownMethods(t reflect.Type, names ...string) error {
	got := make([]string, t.NumMethod())
	for i := range got {
		got[i] = t.Method(i).Name // sorted by reflect
	}
	if !slices.Equal(got, names) {
		return fmt.Errorf("%w: %s has methods %v, bttl knows %v", ErrMutationUnreadable, t, got, names)
	}
	return nil
}

func (l *rawLayout) opsOf(m *bigtable.Mutation) []*btpb.Mutation {
	return *(*[]*btpb.Mutation)(unsafe.Add(unsafe.Pointer(m), l.ops))
}

// sentMutation is the bigtable.Mutation a write sends, being filled. With
// the checked layout of bigtable.Mutation it appends to the mutation's ops
// itself, sized once, and allocates the SetCell operations of one mutation
// together, an array per proto type, rather than four allocations per cell
// as bigtable.Mutation.Set makes; the protos are the ones Set builds
// (rawSelfCheck compares them). Without the layout it is a plain
// bigtable.Mutation filled by its own methods.
type sentMutation struct {
	bm  *bigtable.Mutation
	ops *[]*btpb.Mutation // bm's ops; nil without the checked layout
	// Room for the cells still to come: the protos are only read
	// (marshalled) once sent. Three arrays rather than one of a struct of
	// the three: a 10-cell struct array would be rounded up to the next
	// size class by 11%.
	muts  []btpb.Mutation
	sets  []btpb.Mutation_SetCell_
	cells []btpb.Mutation_SetCell
	cols  []byte // their qualifiers
}

// newSentMutation is an empty mutation with room for n operations, so that
// filling it grows no slice: appending one by one would allocate five times
// for ten cells.
func newSentMutation(n int) sentMutation {
	l, err := layout()
	if err != nil {
		return sentMutation{bm: bigtable.NewMutation()}
	}
	return l.newSentMutation(n)
}

func (l *rawLayout) newSentMutation(n int) sentMutation {
	s := sentMutation{bm: bigtable.NewMutation()}
	s.ops = (*[]*btpb.Mutation)(unsafe.Add(unsafe.Pointer(s.bm), l.ops))
	if n > 0 {
		*s.ops = make([]*btpb.Mutation, 0, n)
	}
	return s
}

// reuse sends the caller's own operation i of m unchanged when m was read
// from a *bigtable.Mutation (the TableAPI path) and reports whether it did.
// The operation is shared, not copied: nothing writes to it.
func (s *sentMutation) reuse(m *Mutation, i int) bool {
	if m.srcs == nil || s.ops == nil {
		return false
	}
	*s.ops = append(*s.ops, m.srcs[i])
	return true
}

// set sends the Set m.ops[i] with timestamp ts.
func (s *sentMutation) set(m *Mutation, i int, ts bigtable.Timestamp) {
	o := &m.ops[i]
	if s.ops == nil {
		s.bm.Set(o.family, o.column, ts, o.value)
		return
	}
	ts = ts.TruncateToMilliseconds()
	if m.srcs != nil && m.srcs[i].GetSetCell().GetTimestampMicros() == int64(ts) {
		s.reuse(m, i) // the caller's cell already has this timestamp
		return
	}
	if len(s.cells) == 0 {
		s.reserve(m.ops[i:])
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
	*s.ops = append(*s.ops, pb)
}

// reserve makes room for the Sets among ops and their qualifiers: four
// allocations for all the cells of a mutation.
func (s *sentMutation) reserve(ops []op) {
	n, cols := 0, 0
	for i := range ops {
		if ops[i].kind == opSet {
			n++
			cols += len(ops[i].column)
		}
	}
	s.muts = make([]btpb.Mutation, n)
	s.sets = make([]btpb.Mutation_SetCell_, n)
	s.cells = make([]btpb.Mutation_SetCell, n)
	s.cols = make([]byte, cols)
}

func (l *rawLayout) condOf(m *bigtable.Mutation) (cond bigtable.Filter, isCond bool, mtrue, mfalse *bigtable.Mutation) {
	p := unsafe.Pointer(m)
	return *(*bigtable.Filter)(unsafe.Add(p, l.cond)),
		*(*bool)(unsafe.Add(p, l.isConditional)),
		*(**bigtable.Mutation)(unsafe.Add(p, l.mtrue)),
		*(**bigtable.Mutation)(unsafe.Add(p, l.mfalse))
}

func (l *rawLayout) rmwOpsOf(m *bigtable.ReadModifyWrite) []*btpb.ReadModifyWriteRule {
	return *(*[]*btpb.ReadModifyWriteRule)(unsafe.Add(unsafe.Pointer(m), l.rmwOps))
}

// rawOpError is an op the TableAPI path cannot translate.
type rawOpError struct {
	family, column string
	err            error
}

// translate turns a client mutation into the library's, so the one write
// path (build) applies every rewrite and guardrail to it. A conditional
// mutation's branches are translated too; nesting is refused later by
// build, as for a ttlclient.Mutation. dst is reused when not nil.
func (l *rawLayout) translate(src *bigtable.Mutation, dst *Mutation) (*Mutation, *rawOpError) {
	if src == nil {
		return nil, nil
	}
	if dst == nil {
		dst = new(Mutation)
	}
	cond, isCond, mtrue, mfalse := l.condOf(src)
	if isCond {
		dst.isConditional, dst.cond = true, cond
		var err *rawOpError
		if dst.mtrue, err = l.translate(mtrue, nil); err != nil {
			return nil, err
		}
		if dst.mfalse, err = l.translate(mfalse, nil); err != nil {
			return nil, err
		}
		return dst, nil
	}
	ops := l.opsOf(src)
	dst.srcs = ops
	if cap(dst.ops) < len(ops) {
		dst.ops = make([]op, 0, len(ops))
	}
	for _, pb := range ops {
		o, err := translateOp(pb)
		if err != nil {
			return nil, err
		}
		dst.ops = append(dst.ops, o)
	}
	return dst, nil
}

// column is a qualifier as a string without copying it: the bytes belong to
// the client mutation, whose methods never change them after Set (a
// *CellError may keep the string after the call).
func column(q []byte) string {
	if len(q) == 0 {
		return ""
	}
	return unsafe.String(&q[0], len(q))
}

func translateOp(pb *btpb.Mutation) (op, *rawOpError) {
	switch m := pb.GetMutation().(type) {
	case *btpb.Mutation_SetCell_:
		c := m.SetCell
		// The client already truncated ts to the millisecond, keeping
		// ServerTime (-1), which is Auto.
		return op{kind: opSet, family: c.FamilyName, column: column(c.ColumnQualifier), ts: bigtable.Timestamp(c.TimestampMicros), value: c.Value}, nil
	case *btpb.Mutation_DeleteFromColumn_:
		c := m.DeleteFromColumn
		if c.TimeRange == nil {
			return op{kind: opDeleteColumn, family: c.FamilyName, column: column(c.ColumnQualifier)}, nil
		}
		return op{kind: opDeleteRange, family: c.FamilyName, column: column(c.ColumnQualifier),
			ts: bigtable.Timestamp(c.TimeRange.StartTimestampMicros), n: c.TimeRange.EndTimestampMicros}, nil
	case *btpb.Mutation_DeleteFromFamily_:
		return op{kind: opDeleteFamily, family: m.DeleteFromFamily.FamilyName}, nil
	case *btpb.Mutation_DeleteFromRow_:
		return op{kind: opDeleteRow}, nil
	case *btpb.Mutation_AddToCell_:
		c := m.AddToCell
		q, ts, ok := aggregateCell(c.ColumnQualifier, c.Timestamp)
		in, isInt := c.Input.GetKind().(*btpb.Value_IntValue)
		if !ok || !isInt {
			return op{}, &rawOpError{family: c.FamilyName, err: fmt.Errorf("%w: AddToCell with a qualifier, timestamp or input of a kind bttl does not know", ErrMutationUnreadable)}
		}
		return op{kind: opAddInt, family: c.FamilyName, column: q, ts: ts, n: in.IntValue}, nil
	case *btpb.Mutation_MergeToCell_:
		c := m.MergeToCell
		q, ts, ok := aggregateCell(c.ColumnQualifier, c.Timestamp)
		in, isRaw := c.Input.GetKind().(*btpb.Value_RawValue)
		if !ok || !isRaw {
			return op{}, &rawOpError{family: c.FamilyName, err: fmt.Errorf("%w: MergeToCell with a qualifier, timestamp or input of a kind bttl does not know", ErrMutationUnreadable)}
		}
		return op{kind: opMergeBytes, family: c.FamilyName, column: q, ts: ts, value: in.RawValue}, nil
	}
	return op{}, &rawOpError{err: fmt.Errorf("%w: operation %T is not one bttl knows", ErrMutationUnreadable, pb.GetMutation())}
}

func aggregateCell(q, ts *btpb.Value) (string, bigtable.Timestamp, bool) {
	qv, ok1 := q.GetKind().(*btpb.Value_RawValue)
	tv, ok2 := ts.GetKind().(*btpb.Value_RawTimestampMicros)
	if !ok1 || !ok2 {
		return "", 0, false
	}
	return column(qv.RawValue), bigtable.Timestamp(tv.RawTimestampMicros), true
}

// translateRMW turns a client ReadModifyWrite into the library's.
func (l *rawLayout) translateRMW(src *bigtable.ReadModifyWrite) (*ReadModifyWrite, *rawOpError) {
	if src == nil {
		return nil, nil
	}
	rules := l.rmwOpsOf(src)
	dst := &ReadModifyWrite{ops: make([]rmwOp, 0, len(rules))}
	for _, r := range rules {
		o := rmwOp{family: r.FamilyName, column: string(r.ColumnQualifier)}
		switch v := r.GetRule().(type) {
		case *btpb.ReadModifyWriteRule_AppendValue:
			o.appendValue, o.isAppend = v.AppendValue, true
		case *btpb.ReadModifyWriteRule_IncrementAmount:
			o.delta = v.IncrementAmount
		default:
			return nil, &rawOpError{family: r.FamilyName, column: o.column, err: fmt.Errorf("%w: ReadModifyWrite rule %T is not one bttl knows", ErrMutationUnreadable, r.GetRule())}
		}
		dst.ops = append(dst.ops, o)
	}
	return dst, nil
}

// rawSelfCheck builds a mutation with every op kind the client offers,
// reads it back, re-encodes the result with the client's own methods and
// requires the protos to be equal: a field bttl does not carry over (added
// in a later client version) makes the check fail.
func rawSelfCheck(l *rawLayout) error {
	build := func(m *bigtable.Mutation) {
		m.Set("f", "c", 5000, []byte("v"))
		m.Set("f", "", bigtable.ServerTime, nil)
		m.DeleteCellsInColumn("f", "c")
		m.DeleteTimestampRange("f", "c", 1000, 3000)
		m.DeleteTimestampRange("f", "c", 0, 0)
		m.DeleteCellsInFamily("f")
		m.DeleteRow()
		m.AddIntToCell("a", "c", 2000, -7)
		m.MergeBytesToCell("a", "c", 3000, []byte("x"))
	}
	want := bigtable.NewMutation()
	build(want)
	got, err := l.translate(want, nil)
	if err != nil {
		return fmt.Errorf("self-check: %w", err.err)
	}
	again := bigtable.NewMutation()
	for i := range got.ops {
		o := &got.ops[i]
		switch o.kind {
		case opSet:
			again.Set(o.family, o.column, o.ts, o.value)
		case opDeleteColumn:
			again.DeleteCellsInColumn(o.family, o.column)
		case opDeleteRange:
			again.DeleteTimestampRange(o.family, o.column, o.ts, o.end())
		case opDeleteFamily:
			again.DeleteCellsInFamily(o.family)
		case opDeleteRow:
			again.DeleteRow()
		case opAddInt:
			again.AddIntToCell(o.family, o.column, o.ts, o.intValue())
		case opMergeBytes:
			again.MergeBytesToCell(o.family, o.column, o.ts, o.value)
		}
	}
	wantOps, gotOps := l.opsOf(want), l.opsOf(again)
	if len(wantOps) != 9 || len(gotOps) != len(wantOps) {
		return fmt.Errorf("%w: self-check read %d of 9 operations", ErrMutationUnreadable, len(gotOps))
	}
	for i := range wantOps {
		if !proto.Equal(wantOps[i], gotOps[i]) {
			return fmt.Errorf("%w: self-check: operation %d reads back as %v, want %v", ErrMutationUnreadable, i, gotOps[i], wantOps[i])
		}
	}
	// The cells sentMutation builds itself are the ones Set builds, and the
	// caller's operations it passes on are kept as they are.
	sent := l.newSentMutation(len(got.ops))
	for i := range got.ops {
		switch got.ops[i].kind {
		case opSet:
			sent.set(got, i, got.ops[i].ts)
		default:
			sent.reuse(got, i)
		}
	}
	if sentOps := l.opsOf(sent.bm); len(sentOps) != len(wantOps) {
		return fmt.Errorf("%w: self-check: %d operations sent of %d", ErrMutationUnreadable, len(sentOps), len(wantOps))
	}
	got.srcs = nil // build every cell
	sent = l.newSentMutation(len(got.ops))
	for i := range got.ops {
		if got.ops[i].kind == opSet {
			sent.set(got, i, got.ops[i].ts)
		}
	}
	sentOps := l.opsOf(sent.bm)
	for i, j := range []int{0, 1} {
		if !proto.Equal(sentOps[i], wantOps[j]) {
			return fmt.Errorf("%w: self-check: cell %d built as %v, want %v", ErrMutationUnreadable, i, sentOps[i], wantOps[j])
		}
	}
	// A conditional mutation: filter and both branches.
	filter := bigtable.LatestNFilter(3)
	mt, mf := bigtable.NewMutation(), bigtable.NewMutation()
	mt.DeleteRow()
	mf.Set("f", "c", 1000, []byte("w"))
	cm, err := l.translate(bigtable.NewCondMutation(filter, mt, mf), nil)
	if err != nil || !cm.isConditional || cm.cond == nil || cm.cond.String() != filter.String() ||
		cm.mtrue == nil || len(cm.mtrue.ops) != 1 || cm.mtrue.ops[0].kind != opDeleteRow ||
		cm.mfalse == nil || len(cm.mfalse.ops) != 1 || cm.mfalse.ops[0].ts != 1000 {
		return fmt.Errorf("%w: self-check: conditional mutation reads back wrong", ErrMutationUnreadable)
	}
	if plain, _ := l.translate(mt, nil); plain == nil || plain.isConditional {
		return fmt.Errorf("%w: self-check: plain mutation reads back as conditional", ErrMutationUnreadable)
	}
	// ReadModifyWrite: both rules.
	rmw := bigtable.NewReadModifyWrite()
	rmw.AppendValue("f", "c", []byte("x"))
	rmw.Increment("f", "d", 5)
	r, err := l.translateRMW(rmw)
	if err != nil || len(r.ops) != 2 ||
		!r.ops[0].isAppend || r.ops[0].family != "f" || r.ops[0].column != "c" || !bytes.Equal(r.ops[0].appendValue, []byte("x")) ||
		r.ops[1].isAppend || r.ops[1].column != "d" || r.ops[1].delta != 5 {
		return fmt.Errorf("%w: self-check: ReadModifyWrite reads back wrong", ErrMutationUnreadable)
	}
	return nil
}
