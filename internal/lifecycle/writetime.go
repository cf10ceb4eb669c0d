package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
)

// readCompanion is the stored value of column's companion in the
// millisecond ms, or nil when there is none.
func (o *Ops) readCompanion(ctx context.Context, row, family, column string, ms bigtable.Timestamp) ([]byte, error) {
	q := strategy.WriteTimeColumn(column)
	r, err := o.ReadRow(ctx, row, bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, q, q+"\x00"),
		bigtable.TimestampRangeFilterMicros(ms, strategy.MilliEnd(ms)),
		bigtable.LatestNFilter(1),
	))
	if err != nil {
		return nil, err
	}
	for _, it := range r[family] {
		return it.Value, nil
	}
	return nil, nil
}

// WriteTime is ttlclient's Table.WriteTime.
func (o *Ops) WriteTime(ctx context.Context, item bigtable.ReadItem) (time.Time, error) {
	p, err := o.itemPolicy(item)
	family, column, _ := strings.Cut(item.Column, ":")
	if err == nil && !p.HasCompanions() {
		err = o.ReadError(Cell{Row: item.Row, Family: family, Column: column, Timestamp: item.Timestamp}, fmt.Errorf("%w: family %q does not record write times (strategy.WithWriteTime)", rules.ErrNotApplicable, family))
	}
	if err != nil {
		return time.Time{}, err
	}
	ms := strategy.Millis(item.Timestamp)
	q := strategy.WriteTimeColumn(column)
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
	r, err := o.ReadRow(ctx, item.Row, bigtable.InterleaveFilters(
		cell,
		bigtable.ChainFilters(bigtable.ColumnRangeFilter(family, q, q+"\x00"), inMilli, bigtable.LatestNFilter(1)),
	))
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
		return o.movedWriteTime(ctx, item, family, column)
	}
	if !p.IsLive(ms, o.now()) {
		// Still where it was read, but expired since: it has no write time
		// any read could pair with a live cell.
		return time.Time{}, o.ReadError(Cell{Row: item.Row, Family: family, Column: column, Timestamp: item.Timestamp}, rules.ErrNoWriteTime)
	}
	wt, err := strategy.ParseWriteTime(companion)
	if err != nil {
		return time.Time{}, o.ReadError(Cell{Row: item.Row, Family: family, Column: column, Timestamp: item.Timestamp}, rules.ErrNoWriteTime)
	}
	return time.UnixMicro(int64(wt)), nil
}

// movedWriteTime is WriteTime of a cell no longer stored in its
// millisecond: the write time of the live cells of its column holding its
// value (a move keeps value and companion), read in one read. An empty
// value may be a stripped one, which any live cell of the column may
// have held: all of them are the candidates.
func (o *Ops) movedWriteTime(ctx context.Context, item bigtable.ReadItem, family, column string) (time.Time, error) {
	noWriteTime := func() (time.Time, error) {
		return time.Time{}, o.ReadError(Cell{Row: item.Row, Family: family, Column: column, Timestamp: item.Timestamp}, rules.ErrNoWriteTime)
	}
	if _, err := filters.Cell(family, column, item.Timestamp, item.Value); err != nil {
		return noWriteTime() // too large to pin: never moved, so deleted
	}
	q := strategy.WriteTimeColumn(column)
	value := append(make([]byte, 0, len(item.Value)), item.Value...) // non-nil: "" is a closed start
	sameValue := bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"),
		bigtable.ValueRangeFilter(value, append(append(make([]byte, 0, len(value)+1), value...), 0)),
		bigtable.StripValueFilter(),
	)
	if len(item.Value) == 0 {
		sameValue = bigtable.ChainFilters(bigtable.ColumnRangeFilter(family, column, column+"\x00"), bigtable.StripValueFilter())
	}
	r, err := o.ReadRow(ctx, item.Row, bigtable.InterleaveFilters(
		o.Filters.Compose(o.now(), sameValue), // as a read through the table sees the column
		bigtable.ColumnRangeFilter(family, q, q+"\x00"),
	))
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
			return time.Time{}, o.ReadError(Cell{Row: item.Row, Family: family, Column: column, Timestamp: item.Timestamp}, rules.ErrCellMoved)
		}
		found, wt = true, w
	}
	if !found {
		return noWriteTime()
	}
	return time.UnixMicro(int64(wt)), nil
}
