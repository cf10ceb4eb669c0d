package filters

import (
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"errors"
	"fmt"

	"cloud.google.com/go/bigtable"
	"google.golang.org/protobuf/proto"
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
	ms := ts - ts%1000
	// Non-nil start: an empty value pins the empty value ("" closed), not an open start.
	start := append(make([]byte, 0, len(value)), value...)
	end := append(append(make([]byte, 0, len(value)+1), value...), 0)
	f := bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"),
		bigtable.TimestampRangeFilterMicros(ms, ms+1000),
		bigtable.ValueRangeFilter(start, end),
	)
	if n := cellPinSize(family, column, ms, start, end); n > MaxFilterBytes {
		return nil, &PinError{Family: family, Column: column, Timestamp: ts, ValueBytes: len(value), FilterBytes: n}
	}
	return f, nil
}

// cellPinSize is the serialized size of the predicate Cell builds (the Go
// client's filters do not expose their protos, so it is built here as the
// client would).
func cellPinSize(family, column string, ms bigtable.Timestamp, start, end []byte) int {
	cr := &btpb.ColumnRange{FamilyName: family, EndQualifier: &btpb.ColumnRange_EndQualifierOpen{EndQualifierOpen: []byte(column + "\x00")}}
	if column != "" {
		cr.StartQualifier = &btpb.ColumnRange_StartQualifierClosed{StartQualifierClosed: []byte(column)}
	}
	p := chainProto(
		&btpb.RowFilter{Filter: &btpb.RowFilter_ColumnRangeFilter{ColumnRangeFilter: cr}},
		rangeProto(ms, ms+1000),
		&btpb.RowFilter{Filter: &btpb.RowFilter_ValueRangeFilter{ValueRangeFilter: &btpb.ValueRange{
			StartValue: &btpb.ValueRange_StartValueClosed{StartValueClosed: start},
			EndValue:   &btpb.ValueRange_EndValueOpen{EndValueOpen: end},
		}}},
	)
	return proto.Size(p)
}
