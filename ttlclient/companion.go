package ttlclient

import (
	"context"
	"encoding/binary"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// CompanionPrefix starts the qualifier of every write-time companion cell
// (strategy.WithWriteTime): the companion of column c is
// CompanionPrefix+c, in the same family, at the same timestamp as the cell
// it describes, so the family's GC rule removes both together. Columns
// starting with it are reserved in such a family. It sorts after every
// qualifier not starting with 0xFF 0xFF, so reads hide companions with one
// column range, no regex (docs/design.md#write-time).
const CompanionPrefix = "\xff\xffbttl.wt\x00"

// companionHidesFrom is the first qualifier a read of a write-time family
// hides: every qualifier from it on is reserved.
const companionHidesFrom = "\xff\xff"

func hasWriteTime(p strategy.Policy) bool { return p.HasWriteTime() }

func companionQualifier(column string) string { return CompanionPrefix + column }

// encodeWriteTime is a companion's value: the write time in microseconds
// since the epoch (a whole millisecond), 8 bytes big-endian.
func encodeWriteTime(us bigtable.Timestamp) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(us))
}

// readCompanion is the stored value of column's companion in the
// millisecond ms, or nil when there is none.
func (t *Table) readCompanion(ctx context.Context, row, family, column string, ms bigtable.Timestamp) ([]byte, error) {
	q := companionQualifier(column)
	r, err := t.raw.ReadRow(ctx, row, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, q, q+"\x00"),
		bigtable.TimestampRangeFilterMicros(ms, ms+1000),
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
