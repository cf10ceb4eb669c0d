package ttlclient

import (
	"context"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// moveCell moves one stored cell of an age family, family:column at oldTS
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
// On a family with a write-time companion (see companion.go) the companion
// cell at oldTS moves with it, keeping its value (moveCell reads it
// first).
//
// mode says what else the move must not do: moveNoCrossing (Expire of a
// column's newest cell, ExpireColumn, ExpireRow) refuses to lift the cell
// over any cell stored above it up to the target (filters.CellLift), so a
// value written since the read, or a version not moved, is never hidden
// under it; moveOnlyIfNewest (time-to-idle) requires it to be still its
// column's newest. Every millisecond is movable, the last one
// (strategy.MaxTimestamp's) included: its ranges end with "no end"
// (strategy.MilliEnd). Each filter of also is chained after the predicate:
// the pinned cell must pass it too (a conditional Expire's timestamp
// window, internal/lifecycle.Window).
func (t *Table) moveCell(ctx context.Context, row, family, column string, oldTS bigtable.Timestamp, value []byte, newTS bigtable.Timestamp, mode moveMode, also ...bigtable.Filter) (applied bool, err error) {
	applied, _, err = t.moveCellKept(ctx, row, family, column, oldTS, value, newTS, mode, also...)
	return applied, err
}

// moveCellKept is moveCell also reporting whether the move kept the cell
// (wrote it at the target, or found it there) rather than only deleted
// it, as decided when the mutation was sent: the target may expire
// while it is in flight, and the cell was still written.
func (t *Table) moveCellKept(ctx context.Context, row, family, column string, oldTS bigtable.Timestamp, value []byte, newTS bigtable.Timestamp, mode moveMode, also ...bigtable.Filter) (applied, keep bool, err error) {
	p, ok := t.policy(family)
	if !ok {
		return false, false, t.refuseOp(row, family, column, ErrUnknownFamily)
	}
	old, target := strategy.Millis(oldTS), strategy.Millis(newTS)
	if !p.IsLive(old, t.now()) {
		return false, false, nil
	}
	if old == target {
		// Already there: nothing to change, no mutation sent (Expire and
		// ExpireColumn count the cell as given its TTL).
		return true, true, nil
	}
	var companion []byte
	if p.HasWriteTime() {
		if companion, err = t.readCompanion(ctx, row, family, column, old); err != nil {
			return false, false, err
		}
	}
	// Liveness again after the last read, as close to sending as the
	// client can check it: a cell expiring from here on, while the
	// mutation is in flight, is moved (docs/design.md#expire).
	now := t.now()
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
	case mode == moveNoCrossing && target > old:
		pin, err = filters.CellLift(family, column, old, value, target)
	default:
		pin, err = filters.CellMove(family, column, old, value, family, target)
	}
	if err != nil {
		e := t.refuse(row, family, column, err)
		e.Timestamp = oldTS
		return false, false, e
	}
	if mode == moveOnlyIfNewest && old < strategy.MaxTimestamp {
		// The cell must still be its column's newest (time-to-idle, idle.go):
		// moving it above a concurrent newer write would hide that write.
		// (Nothing is stored after the last millisecond.)
		pin = bigtable.ConditionFilter(newerCells(family, column, old), bigtable.BlockAllFilter(), pin)
	}
	if len(also) > 0 {
		pin = bigtable.ChainFilters(append([]bigtable.Filter{pin}, also...)...)
	}
	m := bigtable.NewMutation()
	m.DeleteTimestampRange(family, column, old, strategy.MilliEnd(old))
	if keep {
		m.Set(family, column, target, value)
	}
	if p.HasWriteTime() {
		q := companionQualifier(column)
		m.DeleteTimestampRange(family, q, old, strategy.MilliEnd(old))
		if companion != nil && keep {
			m.Set(family, q, target, companion)
		}
	}
	cm := bigtable.NewCondMutation(pin, m, nil)
	if err := t.transact("CheckAndMutateRow", func(tbl bigtable.TableAPI) error {
		return tbl.Apply(t.wire(ctx), row, cm, bigtable.GetCondMutationResult(&applied))
	}); err != nil {
		return false, false, err
	}
	return applied, keep, nil
}

// moveMode is what a move must not do besides overwriting or reviving.
type moveMode uint8

const (
	moveAny          moveMode = iota // ExpireCellAt: the caller named the cell
	moveNoCrossing                   // never lifted over another cell
	moveOnlyIfNewest                 // time-to-idle: still its column's newest
)
