package ttlclient

import (
	"context"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/lifecycle"
)

// Build exposes the write path without I/O, for the pure benchmarks and
// allocation tests: what Apply does before its RPC.
func (t *Table) Build(row string, m *Mutation) (*bigtable.Mutation, error) {
	return t.build(row, m, t.clock.Now(), false)
}

// BuildOps is what Build sends for a mutation that is not conditional, as
// the data API's protos.
func (t *Table) BuildOps(row string, m *Mutation) ([]*btpb.Mutation, error) {
	now := t.clock.Now()
	ps, err := t.stamp(row, m, now)
	if err != nil {
		return nil, err
	}
	// Not released: the caller keeps the protos.
	return t.complete(row, ps.Mutations, now)
}

// Filters is the table's filter builder.
func (t *Table) Filters() *filters.Builder { return t.filters }

// Now is the table's clock in microseconds.
func (t *Table) Now() bigtable.Timestamp { return t.now() }

// MoveCell exposes lifecycle.Ops.MoveCell, the atomic cell move Expire and time-to-idle
// build on.
func (t *Table) MoveCell(ctx context.Context, row, family, column string, oldTS bigtable.Timestamp, value []byte, newTS bigtable.Timestamp) (bool, error) {
	return t.life.MoveCell(ctx, row, family, column, oldTS, value, newTS, lifecycle.MoveAny)
}

// PurgeBelow exposes lifecycle.Ops.PurgeBelow, the deletion of the versions a
// max-versions family hides, given the bound its read found.
func (t *Table) PurgeBelow(ctx context.Context, row, family, column string, below bigtable.Timestamp) error {
	return t.life.PurgeBelow(ctx, row, family, column, t.schema[family], below)
}

// AfterIdleRead exposes the time-to-idle look at a row a read returned
// (the caller's-path part of time-to-idle).
func (t *Table) AfterIdleRead(r bigtable.Row, now bigtable.Timestamp) {
	t.idle.AfterRead(context.Background(), r, now)
}

// ReadFilter is the filter bttl's interceptor sends for a read of the
// table without a filter of the caller's, at the table's clock.
func (t *Table) ReadFilter() *btpb.RowFilter { return t.rules.Filter(t.clock.Now(), nil) }
