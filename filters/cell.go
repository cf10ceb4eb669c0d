package filters

import (
	"errors"
	"fmt"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/bttl/bttl/internal/keytext"
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

// Error names the column as every bttl message does (keytext.Quote:
// quoted, cut to 64 bytes); the Column field keeps it whole.
func (e *PinError) Error() string {
	return fmt.Sprintf("%v: %s:%s@%d has a %d-byte value, the predicate would be %d bytes (limit %d)",
		ErrCellTooLargeToPin, e.Family, keytext.Quote(e.Column), e.Timestamp, e.ValueBytes, e.FilterBytes, MaxFilterBytes)
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

// RowMove builds the predicate of one conditional mutation that moves or
// deletes several cells of a row at once: it matches while every pinned
// cell (Cell's pin) is stored and every target slot (a column's
// millisecond) is empty. Slots are checked together, Condition(any slot,
// BlockAll, pins); the pins as Chain(Interleave(pins), CellsPerRowOffset(n-1)),
// which yields a cell only when all n pins matched (each pins one distinct
// stored cell, so the interleave yields one cell per pin present). Nesting
// stays a few levels deep whatever n, and one pin with one slot is the
// shape CellMove sends. Add refuses a cell that would take the predicate
// past MaxFilterBytes; the caller sends what it has and starts another.
// The zero value is empty and ready to use.
type RowMove struct {
	pinArgs     []pinArgs
	slotArgs    []slotKey
	pinN, slotN int // bytes of the elements as repeated fields
	// Past a few dozen cells, sets of the slots and pins added (below it
	// the slices are searched: no maps to allocate for a row's move).
	seenSlot, seenPin map[slotKey]bool
}

// rowMoveSmall is how many pins and slots RowMove searches as slices.
const rowMoveSmall = 32

type slotKey struct {
	family, column string
	ms             bigtable.Timestamp
}

// rowMoveSlack bounds the bytes the wrappers around the pin and slot lists
// add (a condition, a chain, two interleaves, an offset, each with a tag
// and a length of at most 3 bytes under MaxFilterBytes).
const rowMoveSlack = 64

// Len is how many cells are pinned.
func (m *RowMove) Len() int { return len(m.pinArgs) }

// Add pins the cell family:column at ts holding value and, when toFamily
// is not empty, requires toFamily:column's millisecond of toTS to be
// empty. It returns false, changing nothing, when the predicate would be
// larger than MaxFilterBytes with it; a *PinError (ErrCellTooLargeToPin)
// when the cell cannot be pinned even alone. A slot that is the
// millisecond of a cell pinned before it (a cell moving onto one that
// moves away earlier in the same mutation) is not required empty: its pin
// says what is there.
func (m *RowMove) Add(family, column string, ts bigtable.Timestamp, value []byte, toFamily string, toTS bigtable.Timestamp) (bool, error) {
	ms := strategy.Millis(ts)
	pn := element(pinBytes(family, column, ms, len(value)))
	sn := 0
	to := slotKey{toFamily, column, strategy.Millis(toTS)}
	slot := toFamily != "" && !m.seen(to)
	if slot {
		sn = element(slotBytes(toFamily, column, to.ms))
	}
	if m.pinN+pn+m.slotN+sn+rowMoveSlack > MaxFilterBytes {
		if len(m.pinArgs) == 0 {
			return false, &PinError{Family: family, Column: column, Timestamp: ts, ValueBytes: len(value), FilterBytes: pn + sn + rowMoveSlack}
		}
		return false, nil
	}
	m.pinArgs = append(m.pinArgs, pinArgs{family, column, ms, value})
	m.pinN += pn
	if slot {
		m.slotArgs = append(m.slotArgs, to)
		m.slotN += sn
	}
	if m.seenPin != nil || len(m.pinArgs) > rowMoveSmall || len(m.slotArgs) > rowMoveSmall {
		if m.seenPin == nil {
			m.seenSlot, m.seenPin = map[slotKey]bool{}, map[slotKey]bool{}
			for _, a := range m.pinArgs[:len(m.pinArgs)-1] {
				m.seenPin[slotKey{a.family, a.column, a.ms}] = true
			}
			for _, k := range m.slotArgs {
				m.seenSlot[k] = true
			}
		}
		m.seenPin[slotKey{family, column, ms}] = true
		if slot {
			m.seenSlot[to] = true
		}
	}
	return true, nil
}

// seen reports whether k is a slot already required or the millisecond of
// a cell already pinned.
func (m *RowMove) seen(k slotKey) bool {
	if m.seenPin != nil {
		return m.seenSlot[k] || m.seenPin[k]
	}
	for _, s := range m.slotArgs {
		if s == k {
			return true
		}
	}
	for _, a := range m.pinArgs {
		if a.ms == k.ms && a.column == k.column && a.family == k.family {
			return true
		}
	}
	return false
}

type pinArgs struct {
	family, column string
	ms             bigtable.Timestamp
	value          []byte
}

// pinFilter is cellPin's filter alone.
func pinFilter(family, column string, ms bigtable.Timestamp, value []byte) bigtable.Filter {
	// One copy holds both bounds: value, and value + 0. Non-nil start: an
	// empty value pins the empty value ("" closed), not an open start.
	end := append(append(make([]byte, 0, len(value)+1), value...), 0)
	start := end[:len(value):len(value)]
	return bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"),
		bigtable.TimestampRangeFilterMicros(ms, strategy.MilliEnd(ms)),
		bigtable.ValueRangeFilter(start, end),
	)
}

// The sizes of the protos cellPin and the slot filter build, counted
// without building them (a test checks they agree with proto.Size): the
// RowFilter fields used all have numbers below 16, a one-byte tag.
func lenField(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

func columnBytes(family, column string) int {
	n := lenField(len(family)) + lenField(len(column)+1)
	if column != "" {
		n += lenField(len(column))
	}
	return lenField(n)
}

func rangeBytes(ms bigtable.Timestamp) int {
	n := 0
	for _, b := range []bigtable.Timestamp{ms, strategy.MilliEnd(ms)} {
		if b != 0 {
			n += 1 + protowire.SizeVarint(uint64(b))
		}
	}
	return lenField(n)
}

func pinBytes(family, column string, ms bigtable.Timestamp, valueLen int) int {
	value := lenField(lenField(valueLen) + lenField(valueLen+1))
	return lenField(element(columnBytes(family, column)) + element(rangeBytes(ms)) + element(value))
}

func slotBytes(family, column string, ms bigtable.Timestamp) int {
	return lenField(element(columnBytes(family, column)) + element(rangeBytes(ms)))
}

// element is what a message of n bytes adds as one element of a repeated
// field: a tag byte, its length, itself.
func element(n int) int { return lenField(n) }

// Filter is the predicate; nil when nothing is pinned.
func (m *RowMove) Filter() bigtable.Filter {
	pins := m.pinsFilter()
	if pins == nil {
		return nil
	}
	switch len(m.slotArgs) {
	case 0:
		return pins
	case 1:
		return bigtable.ConditionFilter(slotFilter(m.slotArgs[0]), bigtable.BlockAllFilter(), pins)
	}
	slots := make([]bigtable.Filter, len(m.slotArgs))
	for i, k := range m.slotArgs {
		slots[i] = slotFilter(k)
	}
	return bigtable.ConditionFilter(bigtable.InterleaveFilters(slots...), bigtable.BlockAllFilter(), pins)
}

// pinsFilter is the pins' part of Filter; nil when nothing is pinned.
func (m *RowMove) pinsFilter() bigtable.Filter {
	switch len(m.pinArgs) {
	case 0:
		return nil
	case 1:
		a := m.pinArgs[0]
		return pinFilter(a.family, a.column, a.ms, a.value)
	}
	pins := make([]bigtable.Filter, len(m.pinArgs))
	for i, a := range m.pinArgs {
		pins[i] = pinFilter(a.family, a.column, a.ms, a.value)
	}
	return bigtable.ChainFilters(bigtable.InterleaveFilters(pins...), bigtable.CellsPerRowOffsetFilter(len(pins)-1))
}

// slotFilter selects what is stored in a slot: its column, its millisecond.
func slotFilter(k slotKey) bigtable.Filter {
	return bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(k.family, k.column, k.column+"\x00"),
		bigtable.TimestampRangeFilterMicros(k.ms, strategy.MilliEnd(k.ms)),
	)
}

// Span is a region of a row: the cells of Family from FirstColumn to
// LastColumn (both included) stamped in [Start, End) (End 0: no end).
type Span struct {
	Family                  string
	FirstColumn, LastColumn string
	Start, End              bigtable.Timestamp
}

// Holds reports whether the cell family:column at ts lies in s.
func (s Span) Holds(family, column string, ts bigtable.Timestamp) bool {
	return family == s.Family && column >= s.FirstColumn && column <= s.LastColumn &&
		ts >= s.Start && (s.End == 0 || ts < s.End)
}

// Span is the smallest region holding every target slot Add required
// empty: its columns and milliseconds; ok is false when there is none (no
// slot, or slots in more than one family).
func (m *RowMove) Span() (s Span, ok bool) {
	if len(m.slotArgs) == 0 {
		return Span{}, false
	}
	first := m.slotArgs[0]
	s = Span{Family: first.family, FirstColumn: first.column, LastColumn: first.column, Start: first.ms, End: strategy.MilliEnd(first.ms)}
	for _, k := range m.slotArgs[1:] {
		if k.family != s.Family {
			return Span{}, false
		}
		s.FirstColumn, s.LastColumn = min(s.FirstColumn, k.column), max(s.LastColumn, k.column)
		s.Start = min(s.Start, k.ms)
		if e := strategy.MilliEnd(k.ms); s.End != 0 && (e == 0 || e > s.End) {
			s.End = e
		}
	}
	return s, true
}

// SpanFilter is Filter with the slots checked as one region, Span, in
// place of one filter per slot (Condition(span, BlockAll, pins)): the
// region holds every slot, so SpanFilter matches only when Filter does,
// and it is smaller and cheaper to evaluate (a server copies the row for
// each branch of an interleave). It does not match when the region holds
// any other cell, a pinned one included: a caller uses it for a row that,
// as read, holds nothing in Span, and sends Filter when it does not match,
// to tell a cell changed since the read from a cell merely in the region.
// Filter when there is no Span.
func (m *RowMove) SpanFilter() bigtable.Filter {
	s, ok := m.Span()
	if !ok {
		return m.Filter()
	}
	region := bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(s.Family, s.FirstColumn, s.LastColumn+"\x00"),
		bigtable.TimestampRangeFilterMicros(s.Start, s.End),
	)
	return bigtable.ConditionFilter(region, bigtable.BlockAllFilter(), m.pinsFilter())
}

// Proto is Filter as the client sends it (nil when nothing is pinned),
// built on demand: Add counts the bytes without building it.
func (m *RowMove) Proto() *btpb.RowFilter {
	if len(m.pinArgs) == 0 {
		return nil
	}
	pinP := make([]*btpb.RowFilter, len(m.pinArgs))
	for i, a := range m.pinArgs {
		_, pinP[i] = cellPin(a.family, a.column, a.ms, a.value)
	}
	slotP := make([]*btpb.RowFilter, len(m.slotArgs))
	for i, a := range m.slotArgs {
		slotP[i] = chainProto(columnProto(a.family, a.column), rangeProto(a.ms, strategy.MilliEnd(a.ms)))
	}
	pins := pinP[0]
	if len(pinP) > 1 {
		pins = chainProto(interleaveProto(pinP...), &btpb.RowFilter{Filter: &btpb.RowFilter_CellsPerRowOffsetFilter{CellsPerRowOffsetFilter: int32(len(pinP) - 1)}})
	}
	var slot *btpb.RowFilter
	switch len(slotP) {
	case 0:
		return pins
	case 1:
		slot = slotP[0]
	default:
		slot = interleaveProto(slotP...)
	}
	return &btpb.RowFilter{Filter: &btpb.RowFilter_Condition_{Condition: &btpb.RowFilter_Condition{
		PredicateFilter: slot,
		TrueFilter:      &btpb.RowFilter{Filter: &btpb.RowFilter_BlockAllFilter{BlockAllFilter: true}},
		FalseFilter:     pins,
	}}}
}
