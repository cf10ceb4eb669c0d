package ttlclient

import (
	"context"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// writeTimeCompanion adds to s the companion changes op o needs on a
// family with write-time companions, after o's own: a Set (at ts) writes
// its companion at the same timestamp, holding the write time now (to the
// millisecond); a column or range delete deletes the companions too (a
// single-value Set's delete of older cells included). A column in the
// reserved range is refused. It is the write path's only change for
// strategy.WithWriteTime (docs/design.md#write-time).
func (t *Table) writeTimeCompanion(row string, o *op, ts, now bigtable.Timestamp, s *sentMutation) error {
	switch o.kind {
	case opSet, opDeleteColumn, opDeleteRange:
		if strings.HasPrefix(o.column, companionHidesFrom) {
			return t.opError(row, o, fmt.Errorf("%w: %q", ErrReservedColumn, o.column))
		}
	default:
		return nil // a family or row delete takes the companions with it
	}
	q := companionQualifier(o.column)
	bm := s.extra()
	switch o.kind {
	case opSet:
		if p := t.schema[o.family]; p.IsSingleValue() {
			bm.DeleteCellsInColumn(o.family, q)
		}
		bm.Set(o.family, q, ts, strategy.WriteTimeValue(now))
	case opDeleteColumn:
		bm.DeleteCellsInColumn(o.family, q)
	case opDeleteRange:
		bm.DeleteTimestampRange(o.family, q, o.ts, o.end())
	}
	return nil
}

// CompanionPrefix starts the qualifier of every write-time companion cell
// (strategy.WithWriteTime): the companion of column c is
// CompanionPrefix+c, in the same family, at the same timestamp as the cell
// it describes, so the family's GC rule removes both together. Columns
// starting with it are reserved in such a family. It sorts after every
// qualifier not starting with 0xFF 0xFF, so reads hide companions with one
// column range, no regex (docs/design.md#write-time).
const CompanionPrefix = strategy.WriteTimePrefix

// companionHidesFrom is the first qualifier a read of a write-time family
// hides: every qualifier from it on is reserved.
const companionHidesFrom = filters.ReservedQualifierStart

func companionQualifier(column string) string { return strategy.WriteTimeColumn(column) }

// readCompanion is the stored value of column's companion in the
// millisecond ms, or nil when there is none.
func (t *Table) readCompanion(ctx context.Context, row, family, column string, ms bigtable.Timestamp) ([]byte, error) {
	q := companionQualifier(column)
	r, err := t.raw.ReadRow(wire(ctx), row, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, q, q+"\x00"),
		bigtable.TimestampRangeFilterMicros(ms, strategy.MilliEnd(ms)),
		bigtable.LatestNFilter(1),
	)))
	if err != nil {
		return nil, err
	}
	for _, it := range r[family] {
		return it.Value, nil
	}
	return nil, nil
}

// WriteTime is the real time item was written (to the millisecond), like
// Cassandra's WRITETIME: item is a cell read through this table from a
// family with strategy.WithWriteTime, whose every write also stores the
// write time in a hidden companion cell with the same timestamp. It costs
// one single-cell read. The write time survives Expire (the companion
// moves with its cell) and is gone when the cell is: both expire together.
// Other families are a *CellError wrapping ErrNotApplicable; a cell with
// no companion one wrapping ErrNoWriteTime.
func (t *Table) WriteTime(ctx context.Context, item bigtable.ReadItem) (time.Time, error) {
	p, err := t.itemPolicy(item)
	family, column, _ := strings.Cut(item.Column, ":")
	if err == nil && !p.HasWriteTime() {
		err = t.readError(item.Row, family, column, item.Timestamp, fmt.Errorf("%w: family %q does not record write times (strategy.WithWriteTime)", ErrNotApplicable, family))
	}
	if err != nil {
		return time.Time{}, err
	}
	v, err := t.readCompanion(ctx, item.Row, family, column, strategy.Millis(item.Timestamp))
	if err != nil {
		return time.Time{}, err
	}
	wt, err := strategy.ParseWriteTime(v)
	if err != nil {
		return time.Time{}, t.readError(item.Row, family, column, item.Timestamp, ErrNoWriteTime)
	}
	return time.UnixMicro(int64(wt)), nil
}
