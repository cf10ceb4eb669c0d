package filters

import (
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"errors"
	"fmt"

	"cloud.google.com/go/bigtable"
	"google.golang.org/protobuf/proto"

	"github.com/bttl/bttl/strategy"
)

// ErrCellTooLargeToPin: a predicate pinning a cell by its value would be
// larger than MaxFilterBytes (the value is over about 10 KB); see *PinError.
var ErrCellTooLargeToPin = errors.New("bttl: cell value too large to pin in a predicate")

// PinError is a cell whose pinning predicate is over the limit.
type PinError struct {
	Family, Column string
	Timestamp      bigtable.Timestamp
	ValueBytes     int // the value's size
	FilterBytes    int // the predicate's size
}

func (e *PinError) Error() string {
	return fmt.Sprintf("%v: %s:%s@%d has a %d-byte value, the predicate would be %d bytes (limit %d)",
		ErrCellTooLargeToPin, e.Family, e.Column, e.Timestamp, e.ValueBytes, e.FilterBytes, MaxFilterBytes)
}

func (e *PinError) Unwrap() error { return ErrCellTooLargeToPin }

// Cell is a predicate (for bigtable.NewCondMutation) that matches exactly one
// stored cell: family and column by name (a column range, no regex: names
// are bytes), the timestamp as the millisecond holding ts (stored
// timestamps are whole milliseconds), and the value by a range holding only
// value. A conditional mutation on it applies only while that very cell is
// stored: a concurrent writer's newer or different value at the same
// column makes it not match, and so does a cell GC has removed. That is how
// a cell is moved to a new timestamp atomically (delete it and write it
// again in one row mutation, guarded by this predicate) without
// overwriting a concurrent write or reviving a collected cell.
//
// A value over about 10 KB makes the predicate larger than Bigtable serves:
// Cell returns a *PinError (ErrCellTooLargeToPin) rather than a weaker
// predicate; the caller decides what to do with such cells.
func Cell(family, column string, ts bigtable.Timestamp, value []byte) (bigtable.Filter, error) {
	f, p := cellPin(family, column, ts, value)
	if n := proto.Size(p); n > MaxFilterBytes {
		return nil, &PinError{Family: family, Column: column, Timestamp: ts, ValueBytes: len(value), FilterBytes: n}
	}
	return f, nil
}

// CellMove is the predicate of a conditional mutation that moves a stored
// cell to toFamily:column at toTS (the same family, or another for a
// copy): it matches while the cell Cell pins is stored and nothing is
// stored in the target column's millisecond of toTS, so the move's Set
// never replaces a cell a concurrent writer put there after the caller
// read the row. The size limit counts the whole predicate (*PinError,
// ErrCellTooLargeToPin).
func CellMove(family, column string, ts bigtable.Timestamp, value []byte, toFamily string, toTS bigtable.Timestamp) (bigtable.Filter, error) {
	return cellMove(family, column, ts, value, toFamily, strategy.Millis(toTS), strategy.MilliEnd(toTS))
}

// CellLift is CellMove within the cell's own column to a later toTS that
// must not pass another cell: it matches while the cell Cell pins is
// stored and nothing is stored in the column after the cell's millisecond
// up to and including toTS's. So a move on it never lifts the cell above a
// value written since the caller read the column (which a max-versions
// rule would then hide), nor above a version the caller did not move.
// toTS must be after ts's millisecond. Size limit as for CellMove.
func CellLift(family, column string, ts bigtable.Timestamp, value []byte, toTS bigtable.Timestamp) (bigtable.Filter, error) {
	return cellMove(family, column, ts, value, family, strategy.MilliEnd(ts), strategy.MilliEnd(toTS))
}

// cellMove is the predicate "the pinned cell is stored and nothing is
// stored in toFamily:column in [from, end)" (end 0: no end).
func cellMove(family, column string, ts bigtable.Timestamp, value []byte, toFamily string, from, end bigtable.Timestamp) (bigtable.Filter, error) {
	pin, pinProto := cellPin(family, column, ts, value)
	slot := bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(toFamily, column, column+"\x00"),
		bigtable.TimestampRangeFilterMicros(from, end),
	)
	p := &btpb.RowFilter{Filter: &btpb.RowFilter_Condition_{Condition: &btpb.RowFilter_Condition{
		PredicateFilter: chainProto(columnProto(toFamily, column), rangeProto(from, end)),
		TrueFilter:      &btpb.RowFilter{Filter: &btpb.RowFilter_BlockAllFilter{BlockAllFilter: true}},
		FalseFilter:     pinProto,
	}}}
	if n := proto.Size(p); n > MaxFilterBytes {
		return nil, &PinError{Family: family, Column: column, Timestamp: ts, ValueBytes: len(value), FilterBytes: n}
	}
	return bigtable.ConditionFilter(slot, bigtable.BlockAllFilter(), pin), nil
}

// cellPin is the predicate Cell builds and its proto, built here as the
// client would send it (the Go client's filters do not expose their
// protos) to measure it.
func cellPin(family, column string, ts bigtable.Timestamp, value []byte) (bigtable.Filter, *btpb.RowFilter) {
	ms, msEnd := strategy.Millis(ts), strategy.MilliEnd(ts) // the last millisecond's end: none
	// Non-nil start: an empty value pins the empty value ("" closed), not an open start.
	start := append(make([]byte, 0, len(value)), value...)
	end := append(append(make([]byte, 0, len(value)+1), value...), 0)
	f := bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"),
		bigtable.TimestampRangeFilterMicros(ms, msEnd),
		bigtable.ValueRangeFilter(start, end),
	)
	p := chainProto(
		columnProto(family, column),
		rangeProto(ms, msEnd),
		&btpb.RowFilter{Filter: &btpb.RowFilter_ValueRangeFilter{ValueRangeFilter: &btpb.ValueRange{
			StartValue: &btpb.ValueRange_StartValueClosed{StartValueClosed: start},
			EndValue:   &btpb.ValueRange_EndValueOpen{EndValueOpen: end},
		}}},
	)
	return f, p
}

// columnProto is ColumnRangeFilter(family, column, column+"\x00"), one
// column, as the client sends it (an empty start qualifier is left unset).
func columnProto(family, column string) *btpb.RowFilter {
	cr := &btpb.ColumnRange{FamilyName: family, EndQualifier: &btpb.ColumnRange_EndQualifierOpen{EndQualifierOpen: []byte(column + "\x00")}}
	if column != "" {
		cr.StartQualifier = &btpb.ColumnRange_StartQualifierClosed{StartQualifierClosed: []byte(column)}
	}
	return &btpb.RowFilter{Filter: &btpb.RowFilter_ColumnRangeFilter{ColumnRangeFilter: cr}}
}
