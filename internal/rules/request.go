package rules

import (
	"fmt"
	"strings"
	"sync/atomic"
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
	if v := CheckFilter(r.GetPredicateFilter()); v != nil {
		return nil, v
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
// r's filter, r itself when the table has no managed family; or the
// refusal of r's filter (CheckFilter).
func (t *Table) ReadRows(now time.Time, r *btpb.ReadRowsRequest) (*btpb.ReadRowsRequest, *Refusal) {
	if v := CheckFilter(r.GetFilter()); v != nil {
		return nil, v
	}
	if !t.filters.Managed() {
		return r, nil
	}
	out := ShallowCopy(r)
	out.Filter = t.Filter(now, r.GetFilter())
	return out, nil
}

// row applies the rules to one row's mutations.
func (t *Table) row(now time.Time, ms []*btpb.Mutation) ([]*btpb.Mutation, *Refusal) {
	if t.Mode == ModeClient && len(ms) == 0 {
		return nil, Refuse(ErrEmptyMutation)
	}
	return t.Mutations(now, ms, nil)
}

// The Bigtable data calls bttl's client interceptor (ttlclient/wire.go)
// rewrites, by full method name.
const (
	Service             = "/google.bigtable.v2.Bigtable/"
	MethodMutateRow     = Service + "MutateRow"
	MethodMutateRows    = Service + "MutateRows"
	MethodCheckAndMut   = Service + "CheckAndMutateRow"
	MethodRMW           = Service + "ReadModifyWriteRow"
	MethodReadRows      = Service + "ReadRows"
	MethodClientConfig  = Service + "GetClientConfiguration"
	MethodSampleRowKeys = Service + "SampleRowKeys"
)

// Call rewrites the requests of one call a ttlclient Table marks for its
// interceptor, by the table's rules: the request-rewriting part of
// ttlclient's wireCall, which keeps the interceptor wiring and the
// refusals it returns typed.
type Call struct {
	Rules  *Table
	Now    func() time.Time // the table's clock
	Writes bool             // apply the table's write rules (Table.API's writes)
	Reads  bool             // put the TTL filter before the request's filter

	// rowsLimit is the ReadRows request's limit, for a shadow read.
	rowsLimit atomic.Int64
	limitSeen atomic.Bool

	// writeNow is the instant the call's writes are stamped at, the same
	// on every attempt: the client retries a whole MutateRows group after
	// a stream error, server timestamps included, and a retry stamped
	// later would write a second cell beside the one the server applied.
	writeNow atomic.Pointer[time.Time]
}

// RowsLimit is the first ReadRows request's limit (0: none or not seen).
func (c *Call) RowsLimit() int64 { return c.rowsLimit.Load() }

// WriteTime is the call's write instant: the clock's reading at its first
// write attempt.
func (c *Call) WriteTime() time.Time {
	if p := c.writeNow.Load(); p != nil {
		return *p
	}
	now := c.Now()
	if c.writeNow.CompareAndSwap(nil, &now) {
		return now
	}
	return *c.writeNow.Load()
}

// Rewrite is the request to send for a marked call's req, or the refusal
// v of row.
func (c *Call) Rewrite(method string, req any) (out any, row []byte, v *Refusal) {
	rs := c.Rules
	switch r := req.(type) {
	case *btpb.ReadRowsRequest:
		if c.limitSeen.CompareAndSwap(false, true) {
			// The first attempt's: a resumed read asks for what is left.
			c.rowsLimit.Store(r.GetRowsLimit())
		}
		if !c.Reads {
			return r, nil, nil
		}
		var out *btpb.ReadRowsRequest
		if out, v = rs.ReadRows(c.Now(), r); v == nil { // a resumed read filters at its own instant
			return out, nil, nil
		}
	case *btpb.MutateRowRequest:
		if !c.Writes {
			return req, nil, nil
		}
		row = r.GetRowKey()
		var out *btpb.MutateRowRequest
		if out, v = rs.MutateRow(c.WriteTime(), r); v == nil {
			return out, nil, nil
		}
	case *btpb.CheckAndMutateRowRequest:
		if !c.Writes {
			return req, nil, nil
		}
		row = r.GetRowKey()
		var out *btpb.CheckAndMutateRowRequest
		if out, v = rs.CheckAndMutateRow(c.WriteTime(), r, true); v == nil {
			return out, nil, nil
		}
	case *btpb.ReadModifyWriteRowRequest:
		if v = rs.ReadModifyWriteRow(r); !c.Writes || v == nil {
			return req, nil, nil
		}
		row = r.GetRowKey()
	case *btpb.MutateRowsRequest:
		return req, nil, nil // a write call's goes through wirestream.NewBulk, entry by entry
	default:
		switch method {
		case MethodMutateRow, MethodMutateRows, MethodCheckAndMut, MethodRMW, MethodReadRows:
			if c.Writes || c.Reads {
				// A data call whose request is not the generated type the
				// client sends: bttl cannot apply its rules to it.
				v = Refuse(fmt.Errorf("%w: %s request of type %T", ErrUnclassifiable, strings.TrimPrefix(method, Service), req))
			}
		}
		if v == nil {
			return req, nil, nil // another call made under the mark (the client's own): untouched
		}
	}
	return nil, row, v
}

// Entry is the entry of a Table.API MutateRows to send for e, or its
// refusal.
func (c *Call) Entry(e *btpb.MutateRowsRequest_Entry) (*btpb.MutateRowsRequest_Entry, *Refusal) {
	return c.Rules.Entry(c.WriteTime(), e)
}
