package rules

import (
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
)

// The rules over whole data API requests: the request bttl's interceptor
// (ttlclient) and the wire guard send in place of the caller's, or the
// refusal. A changed request is a shallow copy (ShallowCopy): the
// caller's request, which the client may send again on a retry, is never
// written. In ModeClient a request that writes nothing is refused
// (ErrEmptyMutation) before the server sees it; the guard leaves that to
// the server.

// MutateRow is the request to send for r at now, or the refusal.
func (t *Table) MutateRow(now time.Time, r *btpb.MutateRowRequest) (*btpb.MutateRowRequest, *Refusal) {
	ms, v := t.row(now, r.GetMutations())
	if v != nil {
		return nil, v
	}
	if Same(ms, r.GetMutations()) {
		return r, nil
	}
	out := ShallowCopy(r)
	out.Mutations = ms
	return out, nil
}

// Entry is the entry of a MutateRows request to send for e at now, or its
// refusal.
func (t *Table) Entry(now time.Time, e *btpb.MutateRowsRequest_Entry) (*btpb.MutateRowsRequest_Entry, *Refusal) {
	ms, v := t.row(now, e.GetMutations())
	if v != nil {
		return nil, v
	}
	if Same(ms, e.GetMutations()) {
		return e, nil
	}
	out := ShallowCopy(e)
	out.Mutations = ms
	return out, nil
}

// MutateRows is the request to send for r at now, or the refusal of its
// first refused entry and that entry's index: the whole request is
// refused.
func (t *Table) MutateRows(now time.Time, r *btpb.MutateRowsRequest) (*btpb.MutateRowsRequest, *Refusal, int) {
	var entries []*btpb.MutateRowsRequest_Entry // a copy, once an entry changes
	for i, e := range r.GetEntries() {
		out, v := t.Entry(now, e)
		if v != nil {
			return nil, v, i
		}
		if out != e {
			if entries == nil {
				entries = append([]*btpb.MutateRowsRequest_Entry(nil), r.GetEntries()...)
			}
			entries[i] = out
		}
	}
	if entries == nil {
		return r, nil, -1
	}
	out := ShallowCopy(r)
	out.Entries = entries
	return out, nil, -1
}

// CheckAndMutateRow is the request to send for r at now, or the refusal.
// Both branches are stamped before either is completed, so the refusal is
// the same whichever branch holds the worse cell. filter puts the TTL
// filter before the predicate (always in ModeClient; with
// wireguard.WithReadFilter in the guard).
func (t *Table) CheckAndMutateRow(now time.Time, r *btpb.CheckAndMutateRowRequest, filter bool) (*btpb.CheckAndMutateRowRequest, *Refusal) {
	if t.Mode == ModeClient && len(r.GetTrueMutations()) == 0 && len(r.GetFalseMutations()) == 0 {
		// Nothing to write whatever the predicate: an empty mutation, or
		// a conditional one nested in another (the client sends the inner
		// one's empty operations as the branch).
		return nil, Refuse(ErrEmptyMutation)
	}
	in := [2][]*btpb.Mutation{r.GetTrueMutations(), r.GetFalseMutations()}
	var branches [2][]*btpb.Mutation
	for i, ms := range in {
		out, v := t.Stamp(now, ms, nil)
		if v != nil {
			return nil, v
		}
		branches[i] = out
	}
	for i := range branches {
		out, v := t.Complete(now, branches[i])
		if v != nil {
			return nil, v
		}
		branches[i] = out
	}
	filter = filter && t.filters.Managed()
	if !filter && Same(branches[0], in[0]) && Same(branches[1], in[1]) {
		return r, nil
	}
	out := ShallowCopy(r)
	out.TrueMutations, out.FalseMutations = branches[0], branches[1]
	if filter {
		out.PredicateFilter = t.Filter(now, r.GetPredicateFilter())
	}
	return out, nil
}

// ReadModifyWriteRow refuses r when a rule is on a managed family or on
// a family the table does not cover (ReadModifyWrite), or, in ModeClient,
// when it has no rule.
func (t *Table) ReadModifyWriteRow(r *btpb.ReadModifyWriteRowRequest) *Refusal {
	if t.Mode == ModeClient && len(r.GetRules()) == 0 {
		return Refuse(ErrEmptyMutation)
	}
	return t.ReadModifyWrite(r.GetRules())
}

// ReadRows is the request to send for r at now: the TTL filter before
// r's filter, r itself when the table has no managed family.
func (t *Table) ReadRows(now time.Time, r *btpb.ReadRowsRequest) *btpb.ReadRowsRequest {
	if !t.filters.Managed() {
		return r
	}
	out := ShallowCopy(r)
	out.Filter = t.Filter(now, r.GetFilter())
	return out
}

// row applies the rules to one row's mutations.
func (t *Table) row(now time.Time, ms []*btpb.Mutation) ([]*btpb.Mutation, *Refusal) {
	if t.Mode == ModeClient && len(ms) == 0 {
		return nil, Refuse(ErrEmptyMutation)
	}
	return t.Mutations(now, ms, nil)
}
