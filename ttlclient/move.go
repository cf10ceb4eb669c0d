package ttlclient

import (
	"context"
	"fmt"

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
// (ErrCellTooLargeToPin), with nothing sent.
//
// On a family with a write-time companion (see companion.go) the companion
// cell at oldTS moves with it, keeping its value: pass the companion's
// stored value as companion (nil when the family has none, or to have
// moveCell read it first).
func (t *Table) moveCell(ctx context.Context, row, family, column string, oldTS bigtable.Timestamp, value []byte, newTS bigtable.Timestamp) (applied bool, err error) {
	return t.moveCellWith(ctx, row, family, column, oldTS, value, newTS, nil)
}

// moveCellWith is moveCell with the write-time companion's value when the
// caller already read it.
func (t *Table) moveCellWith(ctx context.Context, row, family, column string, oldTS bigtable.Timestamp, value []byte, newTS bigtable.Timestamp, companion []byte) (applied bool, err error) {
	p, ok := t.schema[family]
	if !ok {
		return false, t.refuse(row, family, column, ErrUnknownFamily)
	}
	old, target := strategy.Millis(oldTS), strategy.Millis(newTS)
	if old >= strategy.MaxTimestamp || target >= strategy.MaxTimestamp {
		// Its millisecond's end would overflow int64 microseconds.
		e := t.refuse(row, family, column, fmt.Errorf("%w: a cell in the last millisecond of int64 microseconds cannot be moved", ErrTimestampOverflow))
		e.Timestamp = oldTS
		return false, e
	}
	now := t.now()
	if !p.IsLive(old, now) {
		return false, nil
	}
	// A target already expired (a shortened older version) is not
	// written: the move only deletes. Otherwise nothing may be stored at
	// the target millisecond: the move's Set would overwrite it (a
	// concurrent write with the same timestamp). A move that only deletes
	// writes nothing there, so an expired cell GC has not collected yet at
	// the target does not block it.
	keep := p.IsLive(target, now)
	var pin bigtable.Filter
	if target != old && keep {
		pin, err = filters.CellMove(family, column, old, value, family, target)
	} else {
		pin, err = filters.Cell(family, column, old, value)
	}
	if err != nil {
		e := t.refuse(row, family, column, err)
		e.Timestamp = oldTS
		return false, e
	}
	if onlyIfNewest(ctx) {
		// The cell must still be its column's newest (time-to-idle, idle.go):
		// moving it above a concurrent newer write would hide that write.
		pin = bigtable.ConditionFilter(newerCells(family, column, old), bigtable.BlockAllFilter(), pin)
	}
	m := bigtable.NewMutation()
	m.DeleteTimestampRange(family, column, old, old+1000)
	if keep {
		m.Set(family, column, target, value)
	}
	if p.HasWriteTime() {
		if companion == nil {
			if companion, err = t.readCompanion(ctx, row, family, column, old); err != nil {
				return false, err
			}
		}
		q := companionQualifier(column)
		m.DeleteTimestampRange(family, q, old, old+1000)
		if companion != nil && keep {
			m.Set(family, q, target, companion)
		}
	}
	cm := bigtable.NewCondMutation(pin, m, nil)
	if err := t.raw.Apply(wire(ctx), row, cm, bigtable.GetCondMutationResult(&applied)); err != nil {
		return false, err
	}
	return applied, nil
}
