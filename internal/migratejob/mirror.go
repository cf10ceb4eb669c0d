package migratejob

import (
	"fmt"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// Mirror carries the deletions writers make in a copy's source family to
// the cells copied from them into the target family, so that a cell
// deleted (or overwritten, or re-stamped earlier by Expire) after its row
// was copied is not served by the target family later. The copy alone
// (Migrator.Run) cannot see a deletion: it copies what is stored, and a
// copied cell whose source is gone stays. From before the first copy
// (docs/design.md#migrate, step 2) until the source family is dropped,
// every writer of the source builds its deleting mutations through a
// Mirror of the plan. CheckCopy proves the result: no target cell without
// its source.
//
// The methods mirror bigtable.Mutation's, on the source family (Set,
// DeleteTimestampRange) or the target (SetTarget,
// DeleteTargetTimestampRange, for writers already switched), adding to
// mut both the change and its mirror in the other family, so the writer's
// one row mutation stays atomic. DeleteCellsInColumn and
// DeleteCellsInFamily delete in both. DeleteRow needs no mirror (it
// deletes every family). A Mirror holds the plan only: safe for
// concurrent use, independent of ttlclient and wireguard (a plain
// client's mutation, or one sent through either).
type Mirror struct{ plan Plan }

// NewMirror returns the Mirror of a copy plan (Plan.ToFamily set);
// in place nothing is copied, and it refuses (ErrInvalidPlan).
func NewMirror(p Plan) (*Mirror, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.inPlace() {
		return nil, &PlanError{Field: "ToFamily", Reason: "empty: a mirror carries deletions to a copy's target family; in place there is none"}
	}
	return &Mirror{plan: p}, nil
}

// shift is how far a copy moves the timestamps of row's column: a source
// cell at millisecond t is copied to t + shift (every cell of a column
// moves by the same amount: TTL rules are per prefix and column, and
// timestamps and TTLs are whole milliseconds). ok is false when no rule
// gives the column a TTL (not after Validate).
func (m *Mirror) shift(row, column string) (bigtable.Timestamp, bool) {
	const base = bigtable.Timestamp(1_000_000_000_000_000) // 2001, whole ms
	n, ok := m.plan.newTimestamp(row, column, base)
	return n - base, ok
}

// Set adds to mut a Set of value at ts in the source family's column and,
// since a Set at a stored cell's very timestamp replaces its value, the
// deletion of the copy of the cell at ts (the next copy run copies the
// new value; a copy left with the old value would be served). From a
// single-value family, whose Set deletes the column's older cells, it
// deletes every copy in the target's column.
func (m *Mirror) Set(mut *bigtable.Mutation, row, column string, ts bigtable.Timestamp, value []byte) {
	mut.Set(m.plan.Family, column, ts, value)
	if m.plan.From.ReplacesColumn() {
		// bttl (or the wire guard) deletes the source column's older
		// cells with the Set: their copies go too.
		mut.DeleteCellsInColumn(m.plan.ToFamily, column)
		return
	}
	if ts == bigtable.ServerTime {
		return // a new timestamp: no copy can be at it
	}
	ms := strategy.Millis(ts)
	m.deleteCopies(mut, row, column, ms, strategy.MilliEnd(ms))
}

// DeleteCellsInColumn adds to mut the deletion of every cell of the
// source family's column and of the target family's.
func (m *Mirror) DeleteCellsInColumn(mut *bigtable.Mutation, column string) {
	mut.DeleteCellsInColumn(m.plan.Family, column)
	mut.DeleteCellsInColumn(m.plan.ToFamily, column)
}

// DeleteCellsInFamily adds to mut the deletion of every cell of the row
// in the source family and in the target family.
func (m *Mirror) DeleteCellsInFamily(mut *bigtable.Mutation) {
	mut.DeleteCellsInFamily(m.plan.Family)
	mut.DeleteCellsInFamily(m.plan.ToFamily)
}

// DeleteTimestampRange adds to mut the deletion of the source family's
// column's cells in [start, end) (end 0: no end), as
// bigtable.Mutation.DeleteTimestampRange, and of their copies: the target
// column's cells in the range the copy moved those timestamps to. Stored
// timestamps are whole milliseconds, so the range is taken from the
// first whole millisecond at or after start to the first at or after
// end, on both sides. An Expire that re-stamps a cell earlier is a
// DeleteTimestampRange of its millisecond and a Set: mirror the delete.
func (m *Mirror) DeleteTimestampRange(mut *bigtable.Mutation, row, column string, start, end bigtable.Timestamp) {
	mut.DeleteTimestampRange(m.plan.Family, column, start, end)
	m.deleteCopies(mut, row, column, ceilMillis(start), ceilMillis(end))
}

// deleteCopies deletes the target column's copies of the source cells in
// [start, end) (whole milliseconds; end 0: no end).
func (m *Mirror) deleteCopies(mut *bigtable.Mutation, row, column string, start, end bigtable.Timestamp) {
	d, ok := m.shift(row, column)
	if !ok {
		return // no rule: nothing of that column is copied
	}
	s, e := start+d, end
	if end != 0 {
		e = end + d
		if e <= 0 {
			return // copies would be before the epoch: none was made
		}
	}
	s = max(s, 0)
	if e != 0 && s >= e {
		return
	}
	mut.DeleteTimestampRange(m.plan.ToFamily, column, s, e)
}

// SetTarget and DeleteTargetTimestampRange are for writers already
// switched to the target family (step 5 on): their change of a copied
// cell also removes its source, which the next copy run would otherwise
// copy back (a deleted cell revived, or an overwrite counted as a
// collision).

// SetTarget adds to mut a Set of value at ts in the target family's
// column and the deletion of the source cell a copy would put at ts; into
// a single-value family, whose Set deletes the column's older cells, the
// deletion of the source's whole column.
func (m *Mirror) SetTarget(mut *bigtable.Mutation, row, column string, ts bigtable.Timestamp, value []byte) {
	mut.Set(m.plan.ToFamily, column, ts, value)
	if m.plan.To.ReplacesColumn() {
		// bttl (or the wire guard) deletes the target column's older
		// cells with the Set: their sources go too, or the next copy run
		// would copy them back over this write.
		mut.DeleteCellsInColumn(m.plan.Family, column)
		return
	}
	if ts == bigtable.ServerTime {
		return
	}
	ms := strategy.Millis(ts)
	m.deleteSources(mut, row, column, ms, strategy.MilliEnd(ms))
}

// DeleteTargetTimestampRange adds to mut the deletion of the target
// family's column's cells in [start, end) (end 0: no end) and of the
// source cells a copy would put there.
func (m *Mirror) DeleteTargetTimestampRange(mut *bigtable.Mutation, row, column string, start, end bigtable.Timestamp) {
	mut.DeleteTimestampRange(m.plan.ToFamily, column, start, end)
	m.deleteSources(mut, row, column, ceilMillis(start), ceilMillis(end))
}

// deleteSources deletes the source column's cells whose copies fall in
// [start, end) of the target (whole milliseconds; end 0: no end).
func (m *Mirror) deleteSources(mut *bigtable.Mutation, row, column string, start, end bigtable.Timestamp) {
	d, ok := m.shift(row, column)
	if !ok {
		return
	}
	s, e := start-d, end
	if end != 0 {
		if e = end - d; e <= 0 {
			return
		}
	}
	s = max(s, 0)
	if e != 0 && s >= e {
		return
	}
	mut.DeleteTimestampRange(m.plan.Family, column, s, e)
}

// ceilMillis is the first whole millisecond at or after ts.
func ceilMillis(ts bigtable.Timestamp) bigtable.Timestamp {
	if ms := strategy.Millis(ts); ms != ts {
		return ms + 1000
	}
	return ts
}

func (m *Mirror) String() string { return fmt.Sprintf("mirror of %s", m.plan) }
