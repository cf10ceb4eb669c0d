package ttlclient

import (
	"context"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/filters"
)

// Build exposes the write path without I/O, for the pure benchmarks and
// allocation tests: what Apply does before its RPC.
// The first build of m may send m's own cells, as Apply does; building m
// again builds them anew.
func (t *Table) Build(row string, m *Mutation) (*bigtable.Mutation, error) {
	return t.build(row, m, t.clock.Now(), false)
}

// MutationRecord is m's recorded operation i: for a Mutation's own, the
// proto its first Apply sends.
func MutationRecord(m *Mutation, i int) *btpb.Mutation { return m.ops[i] }

// ReadOptions exposes the read path without I/O: the options ReadRow sends.
func (t *Table) ReadOptions(opts ...bigtable.ReadOption) ([]bigtable.ReadOption, error) {
	return t.readOptions(opts)
}

// Filters is the table's filter builder.
func (t *Table) Filters() *filters.Builder { return t.filters }

// Now is the table's clock in microseconds.
func (t *Table) Now() bigtable.Timestamp { return t.now() }

// MoveCell exposes moveCell, the atomic cell move Expire and time-to-idle
// build on.
func (t *Table) MoveCell(ctx context.Context, row, family, column string, oldTS bigtable.Timestamp, value []byte, newTS bigtable.Timestamp) (bool, error) {
	return t.moveCell(ctx, row, family, column, oldTS, value, newTS, moveAny)
}

// PurgeBelow exposes purgeBelow, the deletion of the versions a
// max-versions family hides, given the bound its read found.
func (t *Table) PurgeBelow(ctx context.Context, row, family, column string, below bigtable.Timestamp) error {
	return t.purgeBelow(ctx, row, family, column, t.schema[family], below)
}

// AfterIdleRead exposes the time-to-idle look at a row a read returned
// (the caller's-path part of time-to-idle).
func (t *Table) AfterIdleRead(r bigtable.Row, now bigtable.Timestamp) {
	t.afterIdleRead(context.Background(), r, now)
}
