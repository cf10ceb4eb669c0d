package migratejob

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/strategy"
)

// CellRef names one stored cell: its row, family, column (a qualifier)
// and timestamp (the millisecond holding it).
type CellRef struct {
	Row, Family, Column string
	Timestamp           bigtable.Timestamp
}

func (c CellRef) String() string {
	return fmt.Sprintf("row %s, column %s:%s, timestamp %s", keytext.Quote(c.Row), c.Family, keytext.Quote(c.Column), formatTimestamp(c.Timestamp))
}

// Sentinel errors of MoveCell and DeleteCell (see *CellError).
var (
	// ErrNoSuchCell: no cell is stored at that row, column and
	// millisecond.
	ErrNoSuchCell = errors.New("bttl: no such cell")
	// ErrCellChanged: the cell changed (another value, or deleted) or its
	// target slot was taken between the read and the write: nothing was
	// written.
	ErrCellChanged = errors.New("bttl: the cell changed meanwhile: nothing written")
	// ErrInvalidCell: a CellRef or target timestamp that names no cell
	// slot; refused before any RPC.
	ErrInvalidCell = errors.New("bttl: invalid cell")
)

// CellError is a cell MoveCell or DeleteCell did not change, and why.
type CellError struct {
	Cell   CellRef
	Reason string
	Err    error // ErrNoSuchCell, ErrCellChanged, ErrInvalidCell, filters.ErrCellTooLargeToPin
}

func (e *CellError) Error() string {
	return fmt.Sprintf("%v: %s: %s", e.Err, e.Cell, e.Reason)
}

func (e *CellError) Unwrap() error { return e.Err }

func (c CellRef) check() error {
	bad := func(format string, a ...any) error {
		return &CellError{Cell: c, Reason: fmt.Sprintf(format, a...), Err: ErrInvalidCell}
	}
	switch {
	case c.Row == "":
		return bad("empty row key")
	case c.Family == "":
		return bad("empty family")
	case c.Timestamp < 0 || c.Timestamp > strategy.MaxTimestamp:
		return bad("timestamp out of range")
	}
	if err := (strategy.Schema{c.Family: strategy.Unmanaged()}).Validate(); err != nil {
		return bad("%v", err)
	}
	return nil
}

// read returns the value of the cell c names, or ErrNoSuchCell.
func readCell(ctx context.Context, tbl *bigtable.Table, c CellRef) ([]byte, error) {
	ms := strategy.Millis(c.Timestamp)
	row, err := tbl.ReadRow(ctx, c.Row, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(c.Family, c.Column, c.Column+"\x00"),
		bigtable.TimestampRangeFilterMicros(ms, strategy.MilliEnd(ms)),
		bigtable.LatestNFilter(1))))
	if err != nil {
		return nil, bttlerr.Wrap(err, "read %s", c)
	}
	items := row[c.Family]
	if len(items) == 0 {
		return nil, &CellError{Cell: c, Reason: "nothing stored there (deleted, collected, or never written)", Err: ErrNoSuchCell}
	}
	return items[0].Value, nil
}

// MoveCell moves the cell c names to timestamp to in its column (as
// migrate moves a cell proven a real write time: to = its expiry
// instant), resolving an ambiguous cell by hand. It reads the cell and
// writes with one conditional mutation pinning it (filters.CellMove: that
// column, millisecond and value stored, and nothing at to's millisecond),
// so a concurrent change is never overwritten: then nothing is written
// and the error wraps ErrCellChanged. A cell that is not stored wraps
// ErrNoSuchCell; a value too large to pin filters.ErrCellTooLargeToPin.
func MoveCell(ctx context.Context, tbl *bigtable.Table, c CellRef, to bigtable.Timestamp) error {
	if err := c.check(); err != nil {
		return err
	}
	if to < 0 || to > strategy.MaxTimestamp || to != strategy.Millis(to) {
		return &CellError{Cell: c, Reason: fmt.Sprintf("target timestamp %d: want whole milliseconds in [0, %d]", to, strategy.MaxTimestamp), Err: ErrInvalidCell}
	}
	if to == strategy.Millis(c.Timestamp) {
		return &CellError{Cell: c, Reason: "the target timestamp is the cell's own", Err: ErrInvalidCell}
	}
	v, err := readCell(ctx, tbl, c)
	if err != nil {
		return err
	}
	pin, err := filters.CellMove(c.Family, c.Column, c.Timestamp, v, c.Family, to)
	if err != nil {
		return &CellError{Cell: c, Reason: err.Error(), Err: filters.ErrCellTooLargeToPin}
	}
	ms := strategy.Millis(c.Timestamp)
	mut := bigtable.NewMutation()
	mut.DeleteTimestampRange(c.Family, c.Column, ms, strategy.MilliEnd(ms))
	mut.Set(c.Family, c.Column, to, v)
	return applyPinned(ctx, tbl, c, pin, mut)
}

// DeleteCell deletes the one cell c names (its millisecond of its column:
// cbt can only delete a whole column or row), pinned like MoveCell: a
// cell changed since it was read is not deleted (ErrCellChanged).
func DeleteCell(ctx context.Context, tbl *bigtable.Table, c CellRef) error {
	if err := c.check(); err != nil {
		return err
	}
	v, err := readCell(ctx, tbl, c)
	if err != nil {
		return err
	}
	pin, err := filters.Cell(c.Family, c.Column, c.Timestamp, v)
	if err != nil {
		return &CellError{Cell: c, Reason: err.Error(), Err: filters.ErrCellTooLargeToPin}
	}
	ms := strategy.Millis(c.Timestamp)
	mut := bigtable.NewMutation()
	mut.DeleteTimestampRange(c.Family, c.Column, ms, strategy.MilliEnd(ms))
	return applyPinned(ctx, tbl, c, pin, mut)
}

func applyPinned(ctx context.Context, tbl *bigtable.Table, c CellRef, pin bigtable.Filter, mut *bigtable.Mutation) error {
	var matched bool
	if err := tbl.Apply(ctx, c.Row, bigtable.NewCondMutation(pin, mut, nil), bigtable.GetCondMutationResult(&matched)); err != nil {
		return bttlerr.Wrap(err, "write %s", c)
	}
	if !matched {
		return &CellError{Cell: c, Reason: "its value changed, it was deleted, or its target slot was written since it was read", Err: ErrCellChanged}
	}
	return nil
}
