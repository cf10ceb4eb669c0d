package ttlclient

import (
	"context"
	"fmt"
	"github.com/bttl/bttl/internal/rules"

	"cloud.google.com/go/bigtable"
)

// ErrReadOnlyView: a write to a materialized view, which Bigtable computes
// from its query and never accepts writes to. Nothing is sent.
var ErrReadOnlyView = rules.ErrReadOnlyView

// OpenAuthorizedView returns a handle on the authorized view of table, as
// bigtable.Client.OpenAuthorizedView does, that behaves exactly as a Table
// opened on table with schema (a view shows a subset of its table's cells,
// with the table's timestamps and GC rules); its requests name the view,
// so the server applies the view's restrictions too
// (docs/design.md#views). Open's verification needs admin permission on
// the table: callers granted only the view pass WithoutVerify. Raw is nil
// on the returned Table.
func (c *Client) OpenAuthorizedView(ctx context.Context, table, authorizedView string, schema Schema, opts ...TableOption) (*Table, error) {
	return c.open(ctx, table, func(bc *bigtable.Client) bigtable.TableAPI { return bc.OpenAuthorizedView(table, authorizedView) }, schema, opts, true)
}

// MaterializedView is a read-only handle on a materialized view whose
// families follow a schema: reads get the TTL filter of the schema's
// managed families, as Table's do. A continuous materialized view's
// aggregates include the expired cells GC has not collected yet, which no
// read filter can take out: declare managed only the families that hold
// source cells as they are, with their timestamps, and aggregates
// Unmanaged (docs/design.md#views).
type MaterializedView struct{ t *Table }

// OpenMaterializedView returns a read-only handle on materializedView, as
// bigtable.Client.OpenMaterializedView does, whose families follow schema.
// Families the schema does not name are read untouched. A view has no GC
// rules of its own, so nothing is verified and no admin call is made; reads
// through it refresh nothing (strategy.WithIdleTTL): a refresh is a write.
func (c *Client) OpenMaterializedView(materializedView string, schema Schema, opts ...TableOption) (*MaterializedView, error) {
	t, err := c.open(context.Background(), materializedView, func(bc *bigtable.Client) bigtable.TableAPI { return bc.OpenMaterializedView(materializedView) }, schema, opts, false)
	if err != nil {
		return nil, err
	}
	// A time-to-idle refresh is a write, which a view never takes: reads
	// through the view queue none (reads of its source table refresh the
	// source's cells; docs/design.md#views).
	t.idle = nil
	return &MaterializedView{t}, nil
}

// Name is the materialized view's ID.
func (v *MaterializedView) Name() string { return v.t.name }

// ReadRow reads one row, like Table.ReadRow.
func (v *MaterializedView) ReadRow(ctx context.Context, row string, opts ...bigtable.ReadOption) (bigtable.Row, error) {
	return v.t.ReadRow(ctx, row, opts...)
}

// ReadRows reads rows, like Table.ReadRows.
func (v *MaterializedView) ReadRows(ctx context.Context, arg bigtable.RowSet, f func(bigtable.Row) bool, opts ...bigtable.ReadOption) error {
	return v.t.ReadRows(ctx, arg, f, opts...)
}

// SampleRowKeys returns a sample of row keys, like Table.SampleRowKeys.
func (v *MaterializedView) SampleRowKeys(ctx context.Context) ([]string, error) {
	return v.t.SampleRowKeys(ctx)
}

// API returns the view as a bigtable.TableAPI, the interface
// bigtable.Client.OpenMaterializedView returns. Its reads are the view's;
// its writes fail with ErrReadOnlyView, in a *CellError, before any RPC.
func (v *MaterializedView) API() bigtable.TableAPI { return materializedAPI{v} }

type materializedAPI struct{ v *MaterializedView }

var _ bigtable.TableAPI = materializedAPI{}

func (a materializedAPI) readOnly(row string) error {
	return &CellError{Table: a.v.t.name, Row: row, Err: ErrReadOnlyView, text: a.v.t.keyText}
}

func (a materializedAPI) ReadRow(ctx context.Context, row string, opts ...bigtable.ReadOption) (bigtable.Row, error) {
	return a.v.ReadRow(ctx, row, opts...)
}

func (a materializedAPI) ReadRows(ctx context.Context, arg bigtable.RowSet, f func(bigtable.Row) bool, opts ...bigtable.ReadOption) error {
	return a.v.ReadRows(ctx, arg, f, opts...)
}

func (a materializedAPI) SampleRowKeys(ctx context.Context) ([]string, error) {
	return a.v.SampleRowKeys(ctx)
}

func (a materializedAPI) Apply(_ context.Context, row string, _ *bigtable.Mutation, _ ...bigtable.ApplyOption) error {
	return a.readOnly(row)
}

// ApplyBulk refuses every row, each with its error at its index, as a
// refused row of Table.ApplyBulk has.
func (a materializedAPI) ApplyBulk(_ context.Context, rowKeys []string, muts []*bigtable.Mutation, _ ...bigtable.ApplyOption) ([]error, error) {
	if len(rowKeys) != len(muts) {
		return nil, fmt.Errorf("bttl: mismatched rowKeys and mutation array lengths: %d, %d", len(rowKeys), len(muts))
	}
	errs := make([]error, len(rowKeys))
	for i, row := range rowKeys {
		errs[i] = a.readOnly(row)
	}
	return errs, nil
}

func (a materializedAPI) ApplyReadModifyWrite(_ context.Context, row string, _ *bigtable.ReadModifyWrite) (bigtable.Row, error) {
	return nil, a.readOnly(row)
}
