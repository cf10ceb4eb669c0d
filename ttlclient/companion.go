package ttlclient

import (
	"bytes"
	"context"
	"fmt"
	"github.com/bttl/bttl/internal/rules"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// companionHidesFrom is the first qualifier a read of a write-time family
// hides: every qualifier from it on is reserved.
const companionHidesFrom = filters.ReservedQualifierStart

// readCompanion is the stored value of column's companion in the
// millisecond ms, or nil when there is none.
func (t *Table) readCompanion(ctx context.Context, row, family, column string, ms bigtable.Timestamp) ([]byte, error) {
	q := companionQualifier(column)
	r, err := t.raw.ReadRow(t.wire(ctx), row, bigtable.RowFilter(bigtable.ChainFilters(
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

// ErrCellMoved: WriteTime's cell is no longer stored where it was read
// (a time-to-idle refresh or an Expire moved it, or it was deleted), and
// the column holds several live cells with its value, written at different
// times, so which one it became is not known. Read the cell again and ask
// for the cell that read returns.
var ErrCellMoved = rules.ErrCellMoved

// WriteTime is the real time item was written (to the millisecond), like
// Cassandra's WRITETIME: item is a cell read through this table from a
// family with strategy.WithWriteTime, whose every write also stores the
// write time in a hidden companion cell with the same timestamp. The
// write time survives Expire and time-to-idle refreshes (the companion
// moves with its cell, keeping its value) and is gone when the cell is:
// both expire together.
//
// It costs one single-row read: the companion in item's millisecond, and
// whether a cell is still stored there. When none is (a refresh or an
// Expire, this client's or another's, moved the cell after the read
// returned it), a second read looks the cell up by value among the
// column's live cells, as a read through the table sees them: the write
// time of the cell holding item's value, or ErrCellMoved when several
// hold it with different write times. If the cell was deleted and the
// same value written again, that is the rewrite's time.
//
// An empty value (a read with bigtable.StripValueFilter returns every
// value empty) identifies the cell by its coordinates only: the cell
// stored in item's millisecond, or, moved, the column's live cells when
// they all hold one write time (else ErrCellMoved), never the write time
// of another cell that happens to hold an empty value.
//
// Other families are a *CellError wrapping ErrNotApplicable; a cell with
// no companion (written before the option, or by a plain client outside
// the wire guard), or no longer live, one wrapping ErrNoWriteTime.
func (t *Table) WriteTime(ctx context.Context, item bigtable.ReadItem) (time.Time, error) {
	p, err := t.itemPolicy(item)
	family, column, _ := strings.Cut(item.Column, ":")
	if err == nil && !p.HasWriteTime() {
		err = t.readError(item.Row, family, column, item.Timestamp, fmt.Errorf("%w: family %q does not record write times (strategy.WithWriteTime)", ErrNotApplicable, family))
	}
	if err != nil {
		return time.Time{}, err
	}
	ms := strategy.Millis(item.Timestamp)
	q := companionQualifier(column)
	inMilli := bigtable.TimestampRangeFilterMicros(ms, strategy.MilliEnd(ms))
	// The cell is still stored only if its millisecond holds its value: a
	// write at the same timestamp replaces it (with its own companion).
	// The value is compared by the filter when it can be pinned, else here.
	cell := bigtable.ChainFilters(bigtable.ColumnRangeFilter(family, column, column+"\x00"), inMilli, bigtable.LatestNFilter(1))
	_, pinErr := filters.Cell(family, column, item.Timestamp, item.Value)
	stripped := len(item.Value) == 0 // possibly StripValueFilter's: not compared
	switch {
	case stripped:
		cell = bigtable.ChainFilters(cell, bigtable.StripValueFilter())
	case pinErr == nil:
		value := append(make([]byte, 0, len(item.Value)), item.Value...) // non-nil: "" is a closed start
		cell = bigtable.ChainFilters(cell, bigtable.ValueRangeFilter(value, append(append(make([]byte, 0, len(value)+1), value...), 0)), bigtable.StripValueFilter())
	}
	r, err := t.raw.ReadRow(t.wire(ctx), item.Row, bigtable.RowFilter(bigtable.InterleaveFilters(
		cell,
		bigtable.ChainFilters(bigtable.ColumnRangeFilter(family, q, q+"\x00"), inMilli, bigtable.LatestNFilter(1)),
	)))
	if err != nil {
		return time.Time{}, err
	}
	var stored bool
	var companion []byte
	for _, it := range r[family] {
		if it.Column == item.Column {
			stored = stripped || pinErr == nil || bytes.Equal(it.Value, item.Value)
		} else {
			companion = it.Value
		}
	}
	if !stored {
		return t.movedWriteTime(ctx, item, family, column)
	}
	if !p.IsLive(ms, t.now()) {
		// Still where it was read, but expired since: it has no write time
		// any read could pair with a live cell.
		return time.Time{}, t.readError(item.Row, family, column, item.Timestamp, ErrNoWriteTime)
	}
	wt, err := strategy.ParseWriteTime(companion)
	if err != nil {
		return time.Time{}, t.readError(item.Row, family, column, item.Timestamp, ErrNoWriteTime)
	}
	return time.UnixMicro(int64(wt)), nil
}

// movedWriteTime is WriteTime of a cell no longer stored in its
// millisecond: the write time of the live cells of its column holding its
// value (a move keeps value and companion), read in one read. An empty
// value may be a stripped one, which any live cell of the column may
// have held: all of them are the candidates.
func (t *Table) movedWriteTime(ctx context.Context, item bigtable.ReadItem, family, column string) (time.Time, error) {
	noWriteTime := func() (time.Time, error) {
		return time.Time{}, t.readError(item.Row, family, column, item.Timestamp, ErrNoWriteTime)
	}
	if _, err := filters.Cell(family, column, item.Timestamp, item.Value); err != nil {
		return noWriteTime() // too large to pin: never moved, so deleted
	}
	q := companionQualifier(column)
	value := append(make([]byte, 0, len(item.Value)), item.Value...) // non-nil: "" is a closed start
	sameValue := bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"),
		bigtable.ValueRangeFilter(value, append(append(make([]byte, 0, len(value)+1), value...), 0)),
		bigtable.StripValueFilter(),
	)
	if len(item.Value) == 0 {
		sameValue = bigtable.ChainFilters(bigtable.ColumnRangeFilter(family, column, column+"\x00"), bigtable.StripValueFilter())
	}
	r, err := t.raw.ReadRow(t.wire(ctx), item.Row, bigtable.RowFilter(bigtable.InterleaveFilters(
		t.filters.Compose(t.now(), sameValue), // as a read through the table sees the column
		bigtable.ColumnRangeFilter(family, q, q+"\x00"),
	)))
	if err != nil {
		return time.Time{}, err
	}
	var cells []bigtable.Timestamp
	companions := map[bigtable.Timestamp][]byte{}
	for _, it := range r[family] {
		if it.Column == item.Column {
			cells = append(cells, it.Timestamp)
		} else {
			companions[it.Timestamp] = it.Value
		}
	}
	var found bool
	var wt bigtable.Timestamp
	for _, ts := range cells {
		w, err := strategy.ParseWriteTime(companions[ts])
		switch {
		case err != nil:
			continue
		case found && w != wt:
			return time.Time{}, t.readError(item.Row, family, column, item.Timestamp, ErrCellMoved)
		}
		found, wt = true, w
	}
	if !found {
		return noWriteTime()
	}
	return time.UnixMicro(int64(wt)), nil
}
