package lifecycle

import (
	"context"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
)

// MoveCell moves one stored cell of an age family, family:column at oldTS
// holding value, to newTS, atomically: one conditional row mutation whose
// predicate pins that exact cell (filters.Cell: column, the millisecond of
// oldTS, the value) and whose true branch deletes the old cell (every cell
// in oldTS's millisecond, which is only that one: stored timestamps are
// whole milliseconds) and writes value at newTS; the false branch is
// empty. applied reports whether the predicate matched, that is whether
// the cell was still stored, with that value, when the server ran the
// mutation. A concurrent writer's newer value at another timestamp is
// neither overwritten nor deleted, and a cell GC has collected is not
// revived (the predicate no longer matches). Nor is a cell stored at
// newTS's millisecond (a concurrent write whose timestamp is exactly the
// target) overwritten: the predicate also requires that millisecond to be
// empty, and the move does not apply.
//
// The caller has checked the family (an age family) and computed newTS by
// its convention (strategy.Policy.WriteTimestamp). A newTS already expired
// at the table's clock (an older version shifted down by ExpireColumn)
// makes the move a delete. A cell already expired
// at the table's clock is not moved (applied false, no RPC), as the TTL
// filter in front of a predicate would not match it either. A value too big
// to pin is a *CellError wrapping a *filters.PinError
// (filters.ErrCellTooLargeToPin), with nothing sent.
//
// On a family with a write-time companion (see writetime.go) the companion
// cell at oldTS moves with it, keeping its value (MoveCell reads it
// first).
//
// mode says what else the move must not do: MoveNoCrossing (Expire of a
// column's newest cell, ExpireColumn, ExpireRow) refuses to lift the cell
// over any cell stored above it up to the target (filters.CellLift), so a
// value written since the read, or a version not moved, is never hidden
// under it; MoveOnlyIfNewest (time-to-idle) requires it to be still its
// column's newest. Every millisecond is movable, the last one
// (strategy.MaxTimestamp's) included: its ranges end with "no end"
// (strategy.MilliEnd). Each filter of also is chained after the predicate:
// the pinned cell must pass it too (a conditional Expire's timestamp
// window, internal/lifecycle.Window).
func (o *Ops) MoveCell(ctx context.Context, row, family, column string, oldTS bigtable.Timestamp, value []byte, newTS bigtable.Timestamp, mode MoveMode, also ...bigtable.Filter) (applied bool, err error) {
	applied, _, err = o.MoveCellKept(ctx, row, family, column, oldTS, value, newTS, mode, also...)
	return applied, err
}

// MoveCellKept is MoveCell also reporting whether the move kept the cell
// (wrote it at the target, or found it there) rather than only deleted
// it, as decided when the mutation was sent: the target may expire
// while it is in flight, and the cell was still written.
func (o *Ops) MoveCellKept(ctx context.Context, row, family, column string, oldTS bigtable.Timestamp, value []byte, newTS bigtable.Timestamp, mode MoveMode, also ...bigtable.Filter) (applied, keep bool, err error) {
	p, ok := o.Policy(family)
	if !ok {
		return false, false, o.Refuse(Cell{Row: row, Family: family, Column: column, Named: true}, rules.ErrUnknownFamily)
	}
	old, target := strategy.Millis(oldTS), strategy.Millis(newTS)
	if !p.IsLive(old, o.now()) {
		return false, false, nil
	}
	if old == target {
		// Already there: nothing to change, no mutation sent (Expire and
		// ExpireColumn count the cell as given its TTL).
		return true, true, nil
	}
	var companion []byte
	if p.HasCompanions() {
		if companion, err = o.readCompanion(ctx, row, family, column, old); err != nil {
			return false, false, err
		}
	}
	// Liveness again after the last read, as close to sending as the
	// client can check it: a cell expiring from here on, while the
	// mutation is in flight, is moved (docs/design.md#expire).
	now := o.now()
	if !p.IsLive(old, now) {
		return false, false, nil
	}
	// A target already expired (a shortened older version) is not
	// written: the move only deletes. Otherwise nothing may be stored at
	// the target millisecond: the move's Set would overwrite it (a
	// concurrent write with the same timestamp). A move that only deletes
	// writes nothing there, so an expired cell GC has not collected yet at
	// the target does not block it.
	keep = p.IsLive(target, now)
	var pin bigtable.Filter
	switch {
	case !keep:
		pin, err = filters.Cell(family, column, old, value)
	case mode == MoveNoCrossing && target > old:
		pin, err = filters.CellLift(family, column, old, value, target)
	default:
		pin, err = filters.CellMove(family, column, old, value, family, target)
	}
	if err != nil {
		return false, false, o.Refuse(Cell{Row: row, Family: family, Column: column, Timestamp: oldTS}, err)
	}
	if mode == MoveOnlyIfNewest && old < strategy.MaxTimestamp {
		// The cell must still be its column's newest (time-to-idle, idle.go):
		// moving it above a concurrent newer write would hide that write.
		// (Nothing is stored after the last millisecond.)
		pin = bigtable.ConditionFilter(NewerCells(family, column, old), bigtable.BlockAllFilter(), pin)
	}
	if len(also) > 0 {
		pin = bigtable.ChainFilters(append([]bigtable.Filter{pin}, also...)...)
	}
	m := bigtable.NewMutation()
	m.DeleteTimestampRange(family, column, old, strategy.MilliEnd(old))
	if keep {
		m.Set(family, column, target, value)
	}
	if p.HasCompanions() {
		q := strategy.WriteTimeColumn(column)
		m.DeleteTimestampRange(family, q, old, strategy.MilliEnd(old))
		if companion != nil && keep {
			m.Set(family, q, target, companion)
		}
	}
	cm := bigtable.NewCondMutation(pin, m, nil)
	if err := o.CheckAndMutate(ctx, row, cm, bigtable.GetCondMutationResult(&applied)); err != nil {
		return false, false, err
	}
	return applied, keep, nil
}

// MoveMode is what a move must not do besides overwriting or reviving.
type MoveMode uint8

const (
	MoveAny          MoveMode = iota // ExpireCellAt: the caller named the cell
	MoveNoCrossing                   // never lifted over another cell
	MoveOnlyIfNewest                 // time-to-idle: still its column's newest
)

// NewerCells matches any cell of family:column after the millisecond ms.
func NewerCells(family, column string, ms bigtable.Timestamp) bigtable.Filter {
	return bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"),
		bigtable.TimestampRangeFilterMicros(strategy.MilliEnd(ms), 0), // ms < MaxTimestamp: MoveCell
	)
}
