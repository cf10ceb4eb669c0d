package ttlclient

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
)

// The write path, from Apply to the request: bttl's one rule set
// (internal/rules/write.go) stamps a Mutation's changes and the
// bigtable.Mutation sent is built from them with the client's own methods,
// one call per change (docs/design.md#code-paths); a row the rules add
// to is stamped and completed as protos first. Table.API's writes are
// rewritten on the wire instead (wire.go).

// Apply mutates a row atomically, like bigtable.Table.Apply. A conditional
// mutation's predicate gets the TTL filter first, so an expired cell never
// satisfies it; both branches are rewritten and checked.
func (t *Table) Apply(ctx context.Context, row string, m *Mutation, opts ...bigtable.ApplyOption) error {
	start := t.obs.begin()
	now := t.clock.Now()
	bm, err := t.build(row, m, now, false)
	if err != nil {
		return err
	}
	t.obs.wrote(start)
	if m.isConditional {
		return t.transact("CheckAndMutateRow", func(tbl bigtable.TableAPI) error { return tbl.Apply(t.wire(ctx), row, bm, opts...) })
	}
	return t.profiled("MutateRow", t.profile, t.raw.Apply(t.wire(ctx), row, bm, opts...))
}

// ApplyBulk applies several mutations, like bigtable.Table.ApplyBulk. A row
// the guardrails refuse does not stop the others: its error is at its index
// in the returned slice, as a failed row's is, and it is never sent. The
// slice is nil when every row succeeded.
func (t *Table) ApplyBulk(ctx context.Context, rowKeys []string, muts []*Mutation, opts ...bigtable.ApplyOption) ([]error, error) {
	if len(rowKeys) != len(muts) {
		return nil, fmt.Errorf("bttl: mismatched rowKeys and mutation array lengths: %d, %d", len(rowKeys), len(muts))
	}
	start := t.obs.begin()
	now := t.clock.Now()
	bms := make([]*bigtable.Mutation, len(muts))
	var refused []error
	for i, m := range muts {
		bm, err := t.build(rowKeys[i], m, now, true)
		if err != nil {
			if refused == nil {
				refused = make([]error, len(muts))
			}
			refused[i] = err
			continue
		}
		bms[i] = bm
	}
	t.obs.wrote(start)
	var errs []error
	var err error
	if refused == nil {
		errs, err = t.raw.ApplyBulk(t.wire(ctx), rowKeys, bms, opts...)
	} else {
		errs, err = applyPassed(t.wire(ctx), rowKeys, bms, refused, t.raw.ApplyBulk, opts)
	}
	return t.bulkProfiled(errs, err)
}

// bulkProfiled is an ApplyBulk's result with the server's refusals of
// the profile as *ProfileError.
func (t *Table) bulkProfiled(errs []error, err error) ([]error, error) {
	for i := range errs {
		errs[i] = t.profiled("MutateRows", t.profile, errs[i])
	}
	return errs, t.profiled("MutateRows", t.profile, err)
}

// applyPassed sends only the rows whose slot in failed is nil, then puts
// their results back in place, so failed[i] ends as row i's outcome.
func applyPassed[M any](ctx context.Context, rowKeys []string, muts []M, failed []error,
	apply func(context.Context, []string, []M, ...bigtable.ApplyOption) ([]error, error), opts []bigtable.ApplyOption) ([]error, error) {
	keys := make([]string, 0, len(rowKeys))
	sent := make([]M, 0, len(rowKeys))
	index := make([]int, 0, len(rowKeys))
	for i := range muts {
		if failed[i] == nil {
			keys = append(keys, rowKeys[i])
			sent = append(sent, muts[i])
			index = append(index, i)
		}
	}
	if len(sent) == 0 {
		return failed, nil
	}
	errs, err := apply(ctx, keys, sent, opts...)
	for j, e := range errs {
		failed[index[j]] = e
	}
	if err != nil && errs == nil {
		// The whole call failed: a nil slot would read as "written".
		for _, i := range index {
			failed[i] = err
		}
	}
	return failed, err
}

// ApplyReadModifyWrite applies m, like bigtable.Table.ApplyReadModifyWrite.
// The server picks the timestamps it writes, so every family m touches must
// be unmanaged.
func (t *Table) ApplyReadModifyWrite(ctx context.Context, row string, m *ReadModifyWrite) (bigtable.Row, error) {
	start := t.obs.begin()
	if err := t.checkRowKey(row); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, t.refuse(row, "", "", ErrNilMutation)
	}
	if len(m.ops) == 0 {
		return nil, t.refuse(row, "", "", ErrEmptyMutation)
	}
	rs := make([]*btpb.ReadModifyWriteRule, len(m.ops))
	for i, o := range m.ops {
		rs[i] = &btpb.ReadModifyWriteRule{FamilyName: o.family, ColumnQualifier: []byte(o.column)}
	}
	if r := t.rules.ReadModifyWrite(rs); r != nil {
		return nil, t.refusal(row, r)
	}
	rmw := bigtable.NewReadModifyWrite()
	for _, o := range m.ops {
		if o.isAppend {
			rmw.AppendValue(o.family, o.column, o.appendValue)
		} else {
			rmw.Increment(o.family, o.column, o.delta)
		}
	}
	t.obs.wrote(start)
	var r bigtable.Row
	err := t.transact("ReadModifyWriteRow", func(tbl bigtable.TableAPI) error {
		var err error
		r, err = tbl.ApplyReadModifyWrite(t.wire(ctx), row, rmw)
		return err
	})
	return r, err
}

// build turns m into the mutation to send at now, or the first refusal.
// now is the clock reading itself, not its microseconds: a TTL is added to
// it in nanoseconds (strategy.Policy.WriteTimestamp).
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
		return t.buildPlain(row, m, now)
	}
	if bulk {
		return nil, t.refuse(row, "", "", ErrConditionalInBulk)
	}
	// Both branches are stamped before either is completed, as the wire
	// guard does: the refusal is the same whichever holds the worse cell.
	var branches [2]*rules.OpProtos
	defer func() {
		for _, ps := range branches {
			if ps != nil {
				ps.Release()
			}
		}
	}()
	for i, b := range []*Mutation{m.mtrue, m.mfalse} {
		if b == nil {
			continue
		}
		if b.isConditional {
			return nil, t.refuse(row, "", "", ErrNestedCondition)
		}
		ps, err := t.stamp(row, b, now)
		if err != nil {
			return nil, err
		}
		branches[i] = ps
	}
	var sent [2]*bigtable.Mutation
	for i, b := range []*Mutation{m.mtrue, m.mfalse} {
		if b == nil {
			continue
		}
		ms, err := t.complete(row, branches[i].Mutations, now)
		if err != nil {
			return nil, err
		}
		sent[i] = rules.ToBigtable(ms)
	}
	// Counted once neither branch is refused: a refused request writes
	// nothing.
	for i, b := range []*Mutation{m.mtrue, m.mfalse} {
		if b != nil {
			t.observeProtos(b, branches[i].Mutations, now)
		}
	}
	return bigtable.NewCondMutation(t.filters.Compose(bigtable.Timestamp(now.UnixMicro()), m.cond), sent[0], sent[1]), nil
}

// buildPlain builds a plain (not conditional) mutation. The rules stamp
// m's changes themselves (rules.Table.StampOps) and the mutation sent is
// built from them with one call of the client's own methods per change;
// only a row the rules add to (single-value deletes, write-time
// companions) goes through protos, stamped and completed, as a branch of
// a conditional mutation does. The rule for each cell is the same one
// either way (rules.Table.check).
func (t *Table) buildPlain(row string, m *Mutation, now time.Time) (*bigtable.Mutation, error) {
	var buf [stampBuf]bigtable.Timestamp // on the stack for a row of up to stampBuf changes
	sent := buf[:]
	if len(m.ops) > len(buf) {
		sent = make([]bigtable.Timestamp, len(m.ops))
	}
	complete, r := t.rules.StampOps(now, m.ops, sent)
	if r != nil {
		return nil, t.refusal(row, r)
	}
	if complete {
		ps, err := t.stamp(row, m, now)
		if err != nil {
			return nil, err
		}
		defer ps.Release() // what is sent is copied out of them first
		out, err := t.complete(row, ps.Mutations, now)
		if err != nil {
			return nil, err
		}
		t.observe(m, sent, now) // once Complete has not refused the row
		return rules.ToBigtable(out), nil
	}
	t.observe(m, sent, now)
	return rules.SendOps(m.ops, sent), nil
}

// stampBuf is the most changes of a row whose stamped timestamps
// buildPlain keeps on the stack.
const stampBuf = 32

// observe counts the cells m sets, stamped sent, on the recorder.
func (t *Table) observe(m *Mutation, sent []bigtable.Timestamp, now time.Time) {
	if t.obs == nil {
		return
	}
	nowMicros := bigtable.Timestamp(now.UnixMicro())
	for i, o := range m.ops {
		if o.Kind != rules.OpSet {
			continue
		}
		p, _ := t.rules.Policy(o.Family)
		t.obs.cell(&p, &o, sent[i], nowMicros)
	}
}

// observeProtos counts the cells m sets, stamped as ms (t.stamp's
// protos, one per change), on the recorder.
func (t *Table) observeProtos(m *Mutation, ms []*btpb.Mutation, now time.Time) {
	if t.obs == nil {
		return
	}
	sent := make([]bigtable.Timestamp, len(ms))
	for i, pb := range ms {
		sent[i] = bigtable.Timestamp(pb.GetSetCell().GetTimestampMicros())
	}
	t.observe(m, sent, now)
}

// stamp is m's changes as protos, stamped by the table's rules: scratch
// the caller releases (rules.OpProtos), released already when refused.
// Nothing is counted on the recorder yet: Complete, or the other branch
// of a conditional mutation, may still refuse the request.
func (t *Table) stamp(row string, m *Mutation, now time.Time) (*rules.OpProtos, error) {
	ps := rules.Protos(m.ops)
	if r := t.rules.StampOwned(now, ps.Mutations, ps.Intents); r != nil {
		err := t.refusal(row, r) // copies what it keeps of r
		ps.Release()
		return nil, err
	}
	return ps, nil
}

// complete adds the single-value deletes and write-time companions.
func (t *Table) complete(row string, ms []*btpb.Mutation, now time.Time) ([]*btpb.Mutation, error) {
	out, r := t.rules.Complete(now, ms)
	if r != nil {
		return nil, t.refusal(row, r)
	}
	return out, nil
}

// refusal is r, a refusal of the table's rules, as the *CellError the
// caller gets, counted on the recorder.
func (t *Table) refusal(row string, r *rules.Refusal) *CellError {
	t.obs.refused(r.Family, r.Err)
	e := &CellError{Table: t.name, Row: row, Family: r.Family, Column: string(r.Column), Err: r.Err, named: r.Named, text: t.keyText,
		TTL: r.TTL, Sequence: r.Seq}
	if r.TTL == 0 && r.Seq == 0 {
		e.Timestamp = r.Timestamp
	}
	return e
}

// cell records a cell set in family with timestamp ts at now.
func (o *observer) cell(p *strategy.Policy, op *rules.Op, ts, now bigtable.Timestamp) {
	if o == nil {
		return
	}
	o.cellSlow(p, op, ts, now)
}

func (o *observer) cellSlow(p *strategy.Policy, op *rules.Op, ts, now bigtable.Timestamp) {
	var ttl time.Duration
	switch {
	case p.Kind() != strategy.KindOneSecond && p.Kind() != strategy.KindDefaultExpiry:
	case op.Intent == rules.IntentTTL:
		ttl = op.CellIntent().TTL
		if capped, err := p.CapTTL(ttl); err == nil {
			ttl = capped // written with the cap when the family clamps (strategy.Policy.WriteTimestamp)
		}
	default:
		// Exact up to time.Duration's range (292 years), the most a
		// histogram observation holds; Sub clamps beyond it, never wraps.
		ttl = p.ExpiryTime(ts).Sub(time.UnixMicro(int64(now)))
	}
	o.rec.CellWritten(op.Family, p.Kind(), ttl)
}
