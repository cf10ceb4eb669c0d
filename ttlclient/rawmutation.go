package ttlclient

import (
	"bytes"
	"context"
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
// library reads and sets their unexported fields at offsets found once with
// reflect, when the first client is made (CheckCompatibility, which logs a
// failure); each client keeps the result (Client.layout), which its
// tables' writes read: the TableAPI path reads the caller's operations,
// and both write paths set the operations of the mutation they send. The
// layout is checked field by field, then a mutation holding every op kind
// is built with the client's own methods, read back and compared, and the
// same changes recorded by a Mutation must be sent as those protos
// (rawSelfCheck). If either fails, every TableAPI write fails with
// ErrMutationUnreadable, and a Mutation's writes build the mutation they
// send with the client's own methods.
type rawLayout struct {
	ops, cond, isConditional, mtrue, mfalse uintptr // bigtable.Mutation
	rmwOps                                  uintptr // bigtable.ReadModifyWrite
}

var (
	rawLayoutOnce sync.Once
	rawLayoutVal  rawLayout
	rawLayoutErr  error

	// rawBroken, set by tests, makes the mechanism fail as on an unknown
	// client version, for the clients made while it is set: layout is
	// called when a client is made, never by a write.
	rawBroken atomic.Bool
)

// layout is the checked layout, or the reason the mechanism cannot be used.
// A client calls it once, when it is made, and keeps the result.
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

// rawOpError is an operation the TableAPI path cannot read.
type rawOpError struct {
	family, column string
	err            error
}

// borrow wraps a client mutation as the library's, borrowing its
// operations, so the one write path (build) applies every rewrite and
// guardrail to it. An operation bttl does not know is refused first,
// whatever else the mutation holds, and nothing is sent. A conditional
// mutation's branches are wrapped too; nesting is refused later by build,
// as for a ttlclient.Mutation. dst is reused when not nil.
func (l *rawLayout) borrow(src *bigtable.Mutation, dst *Mutation) (*Mutation, *rawOpError) {
	if src == nil {
		return nil, nil
	}
	if dst == nil {
		dst = new(Mutation)
	}
	cond, isCond, mtrue, mfalse := l.condOf(src)
	if isCond {
		var err *rawOpError
		if dst.mtrue, err = l.borrow(mtrue, nil); err != nil {
			return nil, err
		}
		if dst.mfalse, err = l.borrow(mfalse, nil); err != nil {
			return nil, err
		}
		dst.isConditional, dst.cond = true, cond
		return dst, nil
	}
	ops := l.opsOf(src)
	if err := readable(ops); err != nil {
		return nil, err
	}
	dst.ops, dst.borrowed, dst.caller = ops, true, src
	return dst, nil
}

// readable is nil when bttl knows every operation of ops: the write path
// decodes each again (decodeOp) when it comes to it.
func readable(ops []*btpb.Mutation) *rawOpError {
	for _, pb := range ops {
		switch pb.GetMutation().(type) {
		case *btpb.Mutation_SetCell_, *btpb.Mutation_DeleteFromColumn_, *btpb.Mutation_DeleteFromFamily_, *btpb.Mutation_DeleteFromRow_:
		default: // an aggregate's values, or an unknown kind
			var o op
			if err := decodeOp(pb, &o); err != nil {
				return err
			}
		}
	}
	return nil
}

// column is a qualifier as a string without copying it: the bytes belong to
// a client mutation, whose methods never change them after Set, or to a
// Mutation's record (ownedOp.q or its own copy), which nothing writes
// after Set (a *CellError may keep the string after the call).
func column(q []byte) string {
	if len(q) == 0 {
		return ""
	}
	return unsafe.String(&q[0], len(q))
}

// decodeOp decodes the client's operation pb into o.
func decodeOp(pb *btpb.Mutation, o *op) *rawOpError {
	switch m := pb.GetMutation().(type) {
	case *btpb.Mutation_SetCell_:
		c := m.SetCell
		// The client already truncated ts to the millisecond, keeping
		// ServerTime (-1), which is Auto.
		// Field by field: assigning a whole op literal copies it through
		// the write barrier's bulk path, a quarter of the TableAPI build.
		o.kind, o.cellOpt, o.family, o.column = opSet, cellOptNone, c.FamilyName, column(c.ColumnQualifier)
		o.ts, o.n, o.value = bigtable.Timestamp(c.TimestampMicros), 0, c.Value
	case *btpb.Mutation_DeleteFromColumn_:
		c := m.DeleteFromColumn
		if c.TimeRange == nil {
			*o = op{kind: opDeleteColumn, family: c.FamilyName, column: column(c.ColumnQualifier)}
		} else {
			*o = op{kind: opDeleteRange, family: c.FamilyName, column: column(c.ColumnQualifier),
				ts: bigtable.Timestamp(c.TimeRange.StartTimestampMicros), n: c.TimeRange.EndTimestampMicros}
		}
	case *btpb.Mutation_DeleteFromFamily_:
		*o = op{kind: opDeleteFamily, family: m.DeleteFromFamily.FamilyName}
	case *btpb.Mutation_DeleteFromRow_:
		*o = op{kind: opDeleteRow}
	case *btpb.Mutation_AddToCell_:
		c := m.AddToCell
		q, ts, ok := aggregateCell(c.ColumnQualifier, c.Timestamp)
		in, isInt := c.Input.GetKind().(*btpb.Value_IntValue)
		if !ok || !isInt {
			return &rawOpError{family: c.FamilyName, err: fmt.Errorf("%w: AddToCell with a qualifier, timestamp or input of a kind bttl does not know", ErrMutationUnreadable)}
		}
		*o = op{kind: opAddInt, family: c.FamilyName, column: q, ts: ts, n: in.IntValue}
	case *btpb.Mutation_MergeToCell_:
		c := m.MergeToCell
		q, ts, ok := aggregateCell(c.ColumnQualifier, c.Timestamp)
		in, isRaw := c.Input.GetKind().(*btpb.Value_RawValue)
		if !ok || !isRaw {
			return &rawOpError{family: c.FamilyName, err: fmt.Errorf("%w: MergeToCell with a qualifier, timestamp or input of a kind bttl does not know", ErrMutationUnreadable)}
		}
		*o = op{kind: opMergeBytes, family: c.FamilyName, column: q, ts: ts, value: in.RawValue}
	default:
		return &rawOpError{err: fmt.Errorf("%w: operation %T is not one bttl knows", ErrMutationUnreadable, pb.GetMutation())}
	}
	return nil
}

func aggregateCell(q, ts *btpb.Value) (string, bigtable.Timestamp, bool) {
	qv, ok1 := q.GetKind().(*btpb.Value_RawValue)
	tv, ok2 := ts.GetKind().(*btpb.Value_RawTimestampMicros)
	if !ok1 || !ok2 {
		return "", 0, false
	}
	return column(qv.RawValue), bigtable.Timestamp(tv.RawTimestampMicros), true
}

// readRMW copies a client ReadModifyWrite into the library's (its rules are few and are not sent as they are: ApplyReadModifyWrite builds the request anew).
func (l *rawLayout) readRMW(src *bigtable.ReadModifyWrite) (*ReadModifyWrite, *rawOpError) {
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
// in a later client version) makes the check fail. Then the same changes,
// recorded by a Mutation's own methods, must be sent as exactly those
// protos, in place and built anew, and a *bigtable.Mutation's operations
// as themselves.
func rawSelfCheck(l *rawLayout) error {
	want := bigtable.NewMutation()
	own := new(Mutation)
	want.Set("f", "c", 5000, []byte("v"))
	own.Set("f", "c", 5000, []byte("v"))
	want.Set("f", "", bigtable.ServerTime, nil)
	own.Set("f", "", bigtable.ServerTime, nil)
	want.DeleteCellsInColumn("f", "c")
	own.DeleteCellsInColumn("f", "c")
	want.DeleteTimestampRange("f", "c", 1000, 3000)
	own.DeleteTimestampRange("f", "c", 1000, 3000)
	want.DeleteTimestampRange("f", "c", 0, 0)
	own.DeleteTimestampRange("f", "c", 0, 0)
	want.DeleteCellsInFamily("f")
	own.DeleteCellsInFamily("f")
	want.DeleteRow()
	own.DeleteRow()
	want.AddIntToCell("a", "c", 2000, -7)
	own.AddIntToCell("a", "c", 2000, -7)
	want.MergeBytesToCell("a", "c", 3000, []byte("x"))
	own.MergeBytesToCell("a", "c", 3000, []byte("x"))
	wantOps := l.opsOf(want)
	if len(wantOps) != 9 {
		return fmt.Errorf("%w: self-check read %d of 9 operations", ErrMutationUnreadable, len(wantOps))
	}
	got, rerr := l.borrow(want, nil)
	if rerr != nil {
		return fmt.Errorf("self-check: %w", rerr.err)
	}
	decoded := make([]op, len(got.ops))
	again := bigtable.NewMutation()
	for i := range got.ops {
		if err := got.decode(i, &decoded[i]); err != nil {
			return fmt.Errorf("self-check: %w", err.err)
		}
		o := decoded[i]
		s := sentMutation{bm: again, m: got}
		s.keep(i, &o) // without the layout: the client's own methods
	}
	if err := sameOps(l.opsOf(again), wantOps, "reads back as"); err != nil {
		return err
	}
	send := func(m *Mutation, inPlace bool) *bigtable.Mutation {
		s := newSentMutation(l, m, len(m.ops), inPlace)
		var o op
		for i := range m.ops {
			m.decode(i, &o)
			if o.kind == opSet {
				s.set(i, &o, o.ts)
			} else {
				s.keep(i, &o)
			}
		}
		return s.finish()
	}
	// The caller's operations are sent as they are, shared.
	sent := l.opsOf(send(got, false))
	if len(sent) != len(wantOps) {
		return fmt.Errorf("%w: self-check: %d operations sent of %d", ErrMutationUnreadable, len(sent), len(wantOps))
	}
	for i := range sent {
		if sent[i] != wantOps[i] {
			return fmt.Errorf("%w: self-check: operation %d not sent as the caller's", ErrMutationUnreadable, i)
		}
	}
	// A Mutation's own record decodes to the same changes and is sent as
	// the client's protos, in place and built anew.
	var o op
	for i := range own.ops {
		if own.decode(i, &o); !sameOp(&o, &decoded[i]) {
			return fmt.Errorf("%w: self-check: recorded operation %d decodes as %+v, want %+v", ErrMutationUnreadable, i, o, decoded[i])
		}
	}
	for _, inPlace := range []bool{true, false} {
		if err := sameOps(l.opsOf(send(own, inPlace)), wantOps, "is sent as"); err != nil {
			return err
		}
	}
	// A conditional mutation: filter and both branches.
	filter := bigtable.LatestNFilter(3)
	mt, mf := bigtable.NewMutation(), bigtable.NewMutation()
	mt.DeleteRow()
	mf.Set("f", "c", 1000, []byte("w"))
	cm, cerr := l.borrow(bigtable.NewCondMutation(filter, mt, mf), nil)
	if cerr != nil || !cm.isConditional || cm.cond == nil || cm.cond.String() != filter.String() ||
		cm.mtrue == nil || len(cm.mtrue.ops) != 1 || cm.mtrue.ops[0] != l.opsOf(mt)[0] ||
		cm.mfalse == nil || len(cm.mfalse.ops) != 1 || cm.mfalse.ops[0] != l.opsOf(mf)[0] {
		return fmt.Errorf("%w: self-check: conditional mutation reads back wrong", ErrMutationUnreadable)
	}
	if plain, _ := l.borrow(mt, nil); plain == nil || plain.isConditional {
		return fmt.Errorf("%w: self-check: plain mutation reads back as conditional", ErrMutationUnreadable)
	}
	// ReadModifyWrite: both rules.
	rmw := bigtable.NewReadModifyWrite()
	rmw.AppendValue("f", "c", []byte("x"))
	rmw.Increment("f", "d", 5)
	r, err := l.readRMW(rmw)
	if err != nil || len(r.ops) != 2 ||
		!r.ops[0].isAppend || r.ops[0].family != "f" || r.ops[0].column != "c" || !bytes.Equal(r.ops[0].appendValue, []byte("x")) ||
		r.ops[1].isAppend || r.ops[1].column != "d" || r.ops[1].delta != 5 {
		return fmt.Errorf("%w: self-check: ReadModifyWrite reads back wrong", ErrMutationUnreadable)
	}
	return nil
}

// sameOps is nil when got and want are equal protos, one by one.
func sameOps(got, want []*btpb.Mutation, what string) error {
	if len(got) != len(want) {
		return fmt.Errorf("%w: self-check: %d operations %s %d", ErrMutationUnreadable, len(got), what, len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			return fmt.Errorf("%w: self-check: operation %d %s %v, want %v", ErrMutationUnreadable, i, what, got[i], want[i])
		}
	}
	return nil
}

func sameOp(a, b *op) bool {
	return a.kind == b.kind && a.cellOpt == b.cellOpt && a.family == b.family && a.column == b.column &&
		a.ts == b.ts && a.n == b.n && bytes.Equal(a.value, b.value)
}

func (a tableAPI) unreadable(row string, e *rawOpError) error {
	return a.t.refuse(row, e.family, e.column, e.err)
}

// Apply applies m through Table.Apply.
func (a tableAPI) Apply(ctx context.Context, row string, m *bigtable.Mutation, opts ...bigtable.ApplyOption) error {
	l := a.t.layout
	if l == nil {
		return a.t.refuse(row, "", "", a.t.layoutErr)
	}
	var tm Mutation // m's operations, borrowed
	if _, e := l.borrow(m, &tm); e != nil {
		return a.unreadable(row, e)
	}
	if m == nil {
		return a.t.Apply(ctx, row, nil, opts...) // refused as a nil Mutation
	}
	return a.t.Apply(ctx, row, &tm, opts...)
}

// ApplyBulk applies muts through Table.ApplyBulk. A row that cannot be read
// or that the guardrails refuse has its error at its index; the others are
// written.
func (a tableAPI) ApplyBulk(ctx context.Context, rowKeys []string, muts []*bigtable.Mutation, opts ...bigtable.ApplyOption) ([]error, error) {
	if len(rowKeys) != len(muts) {
		return nil, fmt.Errorf("bttl: mismatched rowKeys and mutation array lengths: %d, %d", len(rowKeys), len(muts))
	}
	l := a.t.layout
	if l == nil {
		errs := make([]error, len(muts))
		for i := range errs {
			errs[i] = a.t.refuse(rowKeys[i], "", "", a.t.layoutErr)
		}
		return errs, nil
	}
	w := getBulkWrap(len(muts))
	defer putBulkWrap(w)
	var unread []error
	for i, m := range muts {
		tm, e := l.borrow(m, &w.backing[i]) // nil stays nil: Table.ApplyBulk refuses it
		if e != nil {
			if unread == nil {
				unread = make([]error, len(muts))
			}
			unread[i] = a.unreadable(rowKeys[i], e)
			continue
		}
		w.tms[i] = tm
	}
	if unread == nil {
		return a.t.ApplyBulk(ctx, rowKeys, w.tms, opts...)
	}
	return applyPassed(ctx, rowKeys, w.tms, unread, a.t.ApplyBulk, opts)
}

// bulkWrap is the wrapping of one ApplyBulk's mutations: garbage once the
// call returns (a refusal's *CellError holds strings of the caller's
// mutations, not of it), so it is reused rather than allocated per call.
type bulkWrap struct {
	backing []Mutation
	tms     []*Mutation
}

var bulkWraps = sync.Pool{New: func() any { return new(bulkWrap) }}

// maxPooledBulk bounds the wrapping kept for reuse: a huge call's is let go.
const maxPooledBulk = 4096

func getBulkWrap(n int) *bulkWrap {
	w := bulkWraps.Get().(*bulkWrap)
	if cap(w.backing) < n {
		w.backing = make([]Mutation, n)
		w.tms = make([]*Mutation, n)
	}
	w.backing, w.tms = w.backing[:n], w.tms[:n]
	return w
}

func putBulkWrap(w *bulkWrap) {
	if cap(w.backing) > maxPooledBulk {
		return
	}
	for i := range w.backing {
		w.backing[i].reset()
	}
	clear(w.tms)
	bulkWraps.Put(w)
}

// ApplyReadModifyWrite applies m through Table.ApplyReadModifyWrite: every
// family m touches must be unmanaged.
func (a tableAPI) ApplyReadModifyWrite(ctx context.Context, row string, m *bigtable.ReadModifyWrite) (bigtable.Row, error) {
	l := a.t.layout
	if l == nil {
		return nil, a.t.refuse(row, "", "", a.t.layoutErr)
	}
	rm, e := l.readRMW(m)
	if e != nil {
		return nil, a.unreadable(row, e)
	}
	return a.t.ApplyReadModifyWrite(ctx, row, rm)
}

// reset empties a Mutation for reuse, dropping every reference it holds.
// Only the TableAPI path's wrappers are reused, and those are never
// claimed (borrowed), so spent is false already.
func (m *Mutation) reset() {
	m.ops, m.borrowed, m.caller, m.manyOpts = nil, false, nil, nil
	m.isConditional, m.cond, m.mtrue, m.mfalse = false, nil, nil, nil
}
