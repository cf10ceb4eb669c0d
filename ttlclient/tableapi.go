package ttlclient

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// tableAPI is a Table seen through the client's own interface.
type tableAPI struct{ t *Table }

var _ bigtable.TableAPI = tableAPI{}

// API returns the table as a bigtable.TableAPI, the interface
// bigtable.Client.OpenTable returns, so that code written against the plain
// client, and its *bigtable.Mutation values, run through bttl unchanged:
// Apply and ApplyBulk give a *bigtable.Mutation a Mutation's semantics
// (bigtable.ServerTime on a managed family means the family's default
// TTL), ApplyReadModifyWrite is refused on managed families, and reads are
// filtered as Table's.
//
// bttl does not read a *bigtable.Mutation: bttl's interceptor on the
// client's connection applies the rules to the request protos
// (docs/design.md#tableapi). NewClient installs it, ClientOptions on a
// client you Wrap; without it every write through API is refused with
// ErrNotDialed before any request. A refusal is the *CellError a
// Mutation's would be; in ApplyBulk a refused row's error is at its index
// and the other rows are written, as in Table.ApplyBulk.
//
// Per-cell TTLs: pass Table.Timestamp(family, ttl) to Set. Code written for
// bttl should prefer Mutation's SetTTL and SetVersion.
func (t *Table) API() bigtable.TableAPI { return tableAPI{t} }

// ReadRow is Table.ReadRow.
func (a tableAPI) ReadRow(ctx context.Context, row string, opts ...bigtable.ReadOption) (bigtable.Row, error) {
	return a.t.ReadRow(ctx, row, opts...)
}

// ReadRows is Table.ReadRows.
func (a tableAPI) ReadRows(ctx context.Context, arg bigtable.RowSet, f func(bigtable.Row) bool, opts ...bigtable.ReadOption) error {
	return a.t.ReadRows(ctx, arg, f, opts...)
}

// SampleRowKeys is Table.SampleRowKeys.
func (a tableAPI) SampleRowKeys(ctx context.Context) ([]string, error) {
	return a.t.SampleRowKeys(ctx)
}

// Apply applies m with the table's rules, on the wire.
func (a tableAPI) Apply(ctx context.Context, row string, m *bigtable.Mutation, opts ...bigtable.ApplyOption) error {
	t := a.t
	if err := t.checkRowKey(row); err != nil {
		return err
	}
	if m == nil {
		return t.refuse(row, "", "", ErrNilMutation)
	}
	if err := t.checkWire(ctx, "Table.API"); err != nil {
		return err
	}
	start := t.obs.begin()
	call := t.newCall(true, false)
	t.obs.wrote(start)
	return t.profiled("Apply", t.profile, call.result(t.raw.Apply(t.wire(call.mark(ctx)), row, m, opts...)))
}

// ApplyBulk applies muts with the table's rules, on the wire.
func (a tableAPI) ApplyBulk(ctx context.Context, rowKeys []string, muts []*bigtable.Mutation, opts ...bigtable.ApplyOption) ([]error, error) {
	t := a.t
	if len(rowKeys) != len(muts) {
		return nil, fmt.Errorf("bttl: mismatched rowKeys and mutation array lengths: %d, %d", len(rowKeys), len(muts))
	}
	if err := t.checkWire(ctx, "Table.API"); err != nil {
		return nil, err
	}
	var refused []error
	for i, m := range muts {
		err := t.checkRowKey(rowKeys[i])
		if err == nil && m == nil {
			err = t.refuse(rowKeys[i], "", "", ErrNilMutation)
		}
		if err != nil {
			if refused == nil {
				refused = make([]error, len(muts))
			}
			refused[i] = err
		}
	}
	start := t.obs.begin()
	call := t.newCall(true, false)
	t.obs.wrote(start)
	ctx = t.wire(call.mark(ctx))
	var errs []error
	var err error
	if refused == nil {
		errs, err = t.raw.ApplyBulk(ctx, rowKeys, muts, opts...)
	} else {
		errs, err = applyPassed(ctx, rowKeys, muts, refused, t.raw.ApplyBulk, opts)
	}
	return t.bulkProfiled(call.bulk.Results(rowKeys, errs), err)
}

// ApplyReadModifyWrite applies m, refused on a managed family, on the
// wire.
func (a tableAPI) ApplyReadModifyWrite(ctx context.Context, row string, m *bigtable.ReadModifyWrite) (bigtable.Row, error) {
	t := a.t
	if err := t.checkRowKey(row); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, t.refuse(row, "", "", ErrNilMutation)
	}
	if err := t.checkWire(ctx, "Table.API"); err != nil {
		return nil, err
	}
	call := t.newCall(true, false)
	r, err := t.raw.ApplyReadModifyWrite(t.wire(call.mark(ctx)), row, m)
	return r, t.profiled("ReadModifyWriteRow", t.profile, call.result(err))
}

// Timestamp is the timestamp to pass to bigtable.Mutation.Set for a cell of
// family that must live ttl from now, at the table's clock, for code that
// keeps building *bigtable.Mutation and applies it through API, where it
// is checked as an explicit timestamp of the family's convention. Compute
// it just before Set: a ttl of a few milliseconds can expire before the
// write arrives (strategy.ErrAlreadyExpired). It fails as
// Mutation.SetTTL(family, column, ttl, v) does, in a *CellError.
func (t *Table) Timestamp(family string, ttl time.Duration) (bigtable.Timestamp, error) {
	p, ok := t.rules.Policy(family)
	if !ok {
		return 0, &CellError{Table: t.name, Family: family, TTL: ttl, Err: ErrUnknownFamily, named: true}
	}
	if !p.Managed() {
		return 0, &CellError{Table: t.name, Family: family, TTL: ttl, named: true,
			Err: fmt.Errorf("%w: an unmanaged family keeps the caller's timestamp", strategy.ErrWrongCellOption)}
	}
	ts, err := p.WriteTimestamp(t.clock.Now(), ttl)
	if err != nil {
		return 0, &CellError{Table: t.name, Family: family, TTL: ttl, Err: err, named: true}
	}
	return ts, nil
}
