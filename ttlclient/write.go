package ttlclient

import (
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
)

// The write path after table.go's entry points (Apply, ApplyBulk): a
// Mutation's changes become protos once, bttl's one rule set
// (internal/rules) stamps and completes them, and the bigtable.Mutation
// sent is built from them with the client's own methods
// (docs/design.md#code-paths).

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
		ms, err := t.stamp(row, m, now)
		if err != nil {
			return nil, err
		}
		out, err := t.complete(row, ms, now)
		if err != nil {
			return nil, err
		}
		if rules.Same(out, ms) {
			return m.sendOps(ms), nil // nothing added: built from m's own values
		}
		return toBigtable(out), nil
	}
	if bulk {
		return nil, t.refuse(row, "", "", ErrConditionalInBulk)
	}
	// Both branches are stamped before either is completed, as the wire
	// guard does: the refusal is the same whichever holds the worse cell.
	var branches [2][]*btpb.Mutation
	for i, b := range []*Mutation{m.mtrue, m.mfalse} {
		if b == nil {
			continue
		}
		if b.isConditional {
			return nil, t.refuse(row, "", "", ErrNestedCondition)
		}
		ms, err := t.stamp(row, b, now)
		if err != nil {
			return nil, err
		}
		branches[i] = ms
	}
	var sent [2]*bigtable.Mutation
	for i, b := range []*Mutation{m.mtrue, m.mfalse} {
		if b == nil {
			continue
		}
		ms, err := t.complete(row, branches[i], now)
		if err != nil {
			return nil, err
		}
		sent[i] = toBigtable(ms)
	}
	return bigtable.NewCondMutation(t.filters.Compose(bigtable.Timestamp(now.UnixMicro()), m.cond), sent[0], sent[1]), nil
}

// stamp is m's changes as protos, stamped by the table's rules, each
// cell written counted on the recorder.
func (t *Table) stamp(row string, m *Mutation, now time.Time) ([]*btpb.Mutation, error) {
	ms, intents := m.protos()
	if r := t.rules.StampOwned(now, ms, intents); r != nil {
		return nil, t.refusal(row, r)
	}
	if t.obs != nil {
		nowMicros := bigtable.Timestamp(now.UnixMicro())
		for i, o := range m.ops {
			if o.kind != opSet {
				continue
			}
			p, _ := t.rules.Policy(o.family)
			t.obs.cell(&p, &o, bigtable.Timestamp(ms[i].GetSetCell().GetTimestampMicros()), nowMicros)
		}
	}
	return ms, nil
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

// policy is family's policy: the schema's, else the unlisted families'
// when WithUnlistedFamilies was given; ok is false for a family neither
// covers (a write to it is refused with ErrUnknownFamily).
func (t *Table) policy(family string) (p strategy.Policy, ok bool) { return t.rules.Policy(family) }

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
	case op.intent.Kind == rules.IntentTTL:
		ttl = op.intent.TTL
	default:
		// Exact up to time.Duration's range (292 years), the most a
		// histogram observation holds; Sub clamps beyond it, never wraps.
		ttl = p.ExpiryTime(ts).Sub(time.UnixMicro(int64(now)))
	}
	o.rec.CellWritten(op.family, p.Kind(), ttl)
}

func companionQualifier(column string) string { return strategy.WriteTimeColumn(column) }
