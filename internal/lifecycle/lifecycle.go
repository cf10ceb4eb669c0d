package lifecycle

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"google.golang.org/protobuf/proto"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
)

// ErrCannotPersist: Persist on a family where a cell cannot be kept
// forever: a sequence or unmanaged family (whose cells do not expire by
// age at all) or a family whose TTL cap refuses longer TTLs
// (strategy.RefuseLonger).
// Declared in internal/rules, with the other refusals' sentinels.
var ErrCannotPersist = rules.ErrCannotPersist

// Condition is when a conditional expire applies, by the cell's current
// expiry and the new one. Its values mirror Redis EXPIRE's flags; a cell
// without a TTL (HasTTL false) counts as expiring last, as Redis counts a
// key without a TTL as infinite, so IfLater never applies to it and
// IfEarlier always does.
type Condition uint8

const (
	Always          Condition = iota // no condition
	IfNoTTL                          // NX: only when the cell has no TTL
	IfTTL                            // XX: only when the cell has a TTL
	IfLater                          // GT: only when the new expiry is later
	IfEarlier                        // LT: only when the new expiry is earlier
	IfTTLAndEarlier                  // XX LT: only when the cell has a TTL and the new expiry is earlier
)

// String is the condition's Redis flags.
func (c Condition) String() string {
	switch c {
	case Always:
		return "always"
	case IfNoTTL:
		return "NX"
	case IfTTL:
		return "XX"
	case IfLater:
		return "GT"
	case IfEarlier:
		return "LT"
	case IfTTLAndEarlier:
		return "XX LT"
	}
	return fmt.Sprintf("Condition(%d)", uint8(c))
}

// HasTTL reports whether a cell of an age family stored at ts has a TTL:
// every cell does but one stored at the largest millisecond
// (strategy.MaxTimestamp), which is where Persist puts a cell, and which
// expires after the year 294,000 (one-second) or D later (default expiry).
func HasTTL(ts bigtable.Timestamp) bool { return strategy.Millis(ts) < strategy.MaxTimestamp }

// Holds reports whether c holds for a cell stored at cur that would move
// to target. Within one family a later timestamp is a later expiry (the
// expiry is the timestamp, or the timestamp + D), so the expiries compare
// as the milliseconds do; equal expiries are neither later nor earlier.
func Holds(c Condition, cur, target bigtable.Timestamp) bool {
	cur, target = strategy.Millis(cur), strategy.Millis(target)
	switch c {
	case Always:
		return true
	case IfNoTTL:
		return !HasTTL(cur)
	case IfTTL:
		return HasTTL(cur)
	case IfLater:
		return target > cur
	case IfEarlier:
		return target < cur
	case IfTTLAndEarlier:
		return HasTTL(cur) && target < cur
	}
	return false
}

// Window is the range of timestamps [start, end) (end 0: no end) of the
// stored cells for which c holds, given target: what the predicate of the
// conditional mutation requires of the pinned cell, so the server, not a
// read, decides. ok is false when no cell can satisfy c (IfEarlier of the
// first millisecond); Always has the whole range.
func Window(c Condition, target bigtable.Timestamp) (start, end bigtable.Timestamp, ok bool) {
	target = strategy.Millis(target)
	switch c {
	case Always:
		return 0, 0, true
	case IfNoTTL:
		return strategy.MaxTimestamp, 0, true
	case IfTTL:
		return 0, strategy.MaxTimestamp, true
	case IfLater:
		return 0, target, target > 0
	case IfEarlier:
		if target >= strategy.MaxTimestamp {
			return 0, 0, false
		}
		return target + 1000, 0, true
	case IfTTLAndEarlier:
		if target >= strategy.MaxTimestamp-1000 {
			return 0, 0, false
		}
		return target + 1000, strategy.MaxTimestamp, true
	}
	return 0, 0, false
}

// Result is the outcome of a lifecycle operation on one cell, numbered as
// Redis HEXPIRE answers where it has a counterpart.
type Result int8

const (
	// Changed: the cell read was no longer stored as read (rewritten,
	// moved by a concurrent Expire or time-to-idle refresh, deleted or
	// collected), or the move would have overwritten a concurrent write
	// or lifted the cell above one, when the server ran the mutation:
	// nothing changed. Redis, single-threaded, has no counterpart.
	Changed Result = -3
	// NoCell: no live cell to act on (HEXPIRE's -2).
	NoCell Result = -2
	// NotMet: the condition does not hold, or Persist found the cell
	// already without a TTL (HEXPIRE's 0, HPERSIST's -1). Nothing changed.
	NotMet Result = 0
	// Set: the cell has the new expiry (HEXPIRE's 1): moved, or already
	// there (nothing sent).
	Set Result = 1
	// Deleted: the new expiry was already past, so the cell was deleted
	// (HEXPIRE's 2).
	Deleted Result = 2
)

// String names the result.
func (r Result) String() string {
	switch r {
	case Changed:
		return "changed"
	case NoCell:
		return "no-cell"
	case NotMet:
		return "not-met"
	case Set:
		return "set"
	case Deleted:
		return "deleted"
	}
	return fmt.Sprintf("Result(%d)", int8(r))
}

// AtTimestamp is the timestamp of a cell of p that expires at the instant
// at (ExpireAt), at the clock reading now: at itself (one-second) or at - D
// (default expiry), in whole milliseconds rounded down, as
// strategy.Policy.WriteTimestamp rounds. past reports an instant at which
// such a cell is already expired (at, or within the millisecond of, now or
// earlier): the cell is to be deleted, and ts is meaningless. An instant
// at or before the epoch (the zero time.Time included) is
// strategy.ErrBeforeEpoch (CheckInstant), not a delete. An instant
// whose timestamp would pass strategy.MaxTimestamp is
// strategy.ErrTimestampOverflow, one whose timestamp would be before the
// epoch (at - D < 0) strategy.ErrBeforeEpoch; an expiry over the family's cap is
// refused (strategy.ErrTTLTooLong) or clamped to the cap as a write with
// that TTL is (strategy.Policy.CheckExplicit decides). p must be an age
// family.
func AtTimestamp(p strategy.Policy, now, at time.Time) (ts bigtable.Timestamp, past bool, err error) {
	if err := CheckInstant(at); err != nil {
		return 0, false, err
	}
	nowUS := bigtable.Timestamp(now.UnixMicro())
	if !at.After(now) {
		return 0, true, nil
	}
	last := p.ExpiryTime(strategy.MaxTimestamp)
	if at.After(last) {
		return 0, false, fmt.Errorf("%w: expiry %s is after %s, the last a cell of the family can have",
			strategy.ErrTimestampOverflow, at.UTC().Format(time.RFC3339Nano), last.UTC().Format(time.RFC3339Nano))
	}
	// at <= last, so at - D fits in int64 microseconds.
	d := p.ExpiryOffset()
	us := at.Add(-d).UnixMicro()
	ts = strategy.Millis(bigtable.Timestamp(us))
	if ts < 0 {
		// A future instant less than D away on a family whose D is longer
		// than the time since the epoch: no timestamp has that expiry.
		// Refused as a write with that TTL is, not taken for a past
		// instant (which deletes the cell).
		return 0, false, fmt.Errorf("%w: expiry %s is less than the default TTL %s after the epoch",
			strategy.ErrBeforeEpoch, at.UTC().Format(time.RFC3339Nano), d)
	}
	if !p.IsLive(ts, nowUS) {
		return 0, true, nil
	}
	out, err := p.CheckExplicit(nowUS, ts)
	if err != nil {
		return 0, false, err
	}
	if out != ts {
		// Clamped to the cap: from the clock reading itself, sub-microsecond
		// part included, as a write with the cap's TTL is (CheckExplicit
		// has the clock in microseconds only).
		limit, _ := p.TTLCap()
		out, err = p.WriteTimestamp(now, limit)
		return out, false, err
	}
	return ts, false, nil
}

// CheckInstant refuses an instant at or before the Unix epoch
// (strategy.ErrBeforeEpoch): no cell expires then, and as a past instant
// it would delete every cell it is applied to. The zero time.Time, an
// instant a program forgot to set, is one (as Redis refuses GETEX and SET
// with EXAT 0). A past instant after the epoch deletes, as documented.
func CheckInstant(at time.Time) error {
	if !at.After(time.Unix(0, 0)) {
		return fmt.Errorf("%w: the instant %s is not after the epoch (an unset time.Time?); a past instant deletes, so it is refused rather than taken for one",
			strategy.ErrBeforeEpoch, at.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Forever is the timestamp Persist gives a cell of p at now: the largest
// millisecond, strategy.MaxTimestamp, on a family without a TTL cap; on a
// family that clamps to its cap (strategy.ClampLonger) the timestamp of a
// cell written now with the cap's TTL, as any longer TTL is clamped (the
// cell keeps a TTL). A family whose cap refuses longer TTLs, and a sequence
// or unmanaged family, is ErrCannotPersist.
func Forever(p strategy.Policy, now time.Time) (bigtable.Timestamp, error) {
	switch k := p.Kind(); k {
	case strategy.KindOneSecond, strategy.KindDefaultExpiry:
	default:
		return 0, fmt.Errorf("%w: a %s family's cells do not expire by age", ErrCannotPersist, k)
	}
	limit, clamps := p.TTLCap()
	if limit == 0 {
		return strategy.MaxTimestamp, nil
	}
	if !clamps {
		return 0, fmt.Errorf("%w: its max TTL %s refuses longer TTLs (strategy.RefuseLonger)", ErrCannotPersist, limit)
	}
	return p.WriteTimestamp(now, limit)
}

// KeepTTLMutation is SetKeepTTL's mutation: value replaces the cell of
// family:column at the millisecond ms (the column's newest live cell,
// which the predicate pins), so it keeps that cell's expiry. On a
// single-value family the whole column is deleted first, as a write's
// single-value delete does; on a write-time family the companion at ms
// records now (microseconds) as the write time.
func KeepTTLMutation(p strategy.Policy, family, column string, ms bigtable.Timestamp, value []byte, now bigtable.Timestamp) *bigtable.Mutation {
	m := bigtable.NewMutation()
	AddKeepTTL(m, p, family, column, ms, value, now)
	return m
}

// AddKeepTTL adds KeepTTLMutation's operations to m (SetColumnsKeepTTL
// puts several columns' in one mutation).
func AddKeepTTL(m *bigtable.Mutation, p strategy.Policy, family, column string, ms bigtable.Timestamp, value []byte, now bigtable.Timestamp) {
	end := strategy.MilliEnd(ms)
	if p.ReplacesColumn() {
		m.DeleteCellsInColumn(family, column)
	} else {
		m.DeleteTimestampRange(family, column, ms, end)
	}
	m.Set(family, column, ms, value)
	if p.HasCompanions() {
		q := strategy.WriteTimeColumn(column)
		if p.ReplacesColumn() {
			m.DeleteCellsInColumn(family, q)
		} else {
			m.DeleteTimestampRange(family, q, ms, end)
		}
		m.Set(family, q, ms, strategy.WriteTimeValue(now))
	}
}

// MaxWriteTime is the largest write time recorded by the companions of
// the live cells among items (one family's cells of a row, newest first
// per column, as a raw read of the family's live timestamp range returns
// them, companions included): a column's newest p.VersionLimit() cells on a
// max-versions family, all otherwise; only the columns named, when any.
// ok is false when no such cell has a readable companion.
func MaxWriteTime(p strategy.Policy, family string, items []bigtable.ReadItem, columns []string) (wt bigtable.Timestamp, ok bool) {
	want := map[string]bool{}
	for _, c := range columns {
		want[c] = true
	}
	type key struct {
		column string
		ms     bigtable.Timestamp
	}
	companions := map[key][]byte{}
	seen := map[string]int{}
	var cells []key
	for _, it := range items {
		col := it.Column[len(family)+1:]
		if real, isComp := strings.CutPrefix(col, strategy.WriteTimePrefix); isComp {
			companions[key{real, strategy.Millis(it.Timestamp)}] = it.Value
			continue
		}
		if strings.HasPrefix(col, strategy.ReservedQualifierStart) || (len(want) > 0 && !want[col]) {
			continue
		}
		seen[col]++
		if n := p.VersionLimit(); n > 0 && seen[col] > n {
			continue
		}
		cells = append(cells, key{col, strategy.Millis(it.Timestamp)})
	}
	for _, c := range cells {
		v, found := companions[c]
		if !found {
			continue
		}
		w, err := strategy.ParseWriteTime(v)
		if err != nil {
			continue
		}
		if !ok || w > wt {
			wt, ok = w, true
		}
	}
	return wt, ok
}

// Move is one cell of a row-wide move (get-and-expire): the newest cell
// read of family:column, at TS holding Value, to Target; Keep false makes
// it a delete (the target is not live). Companion is its write-time
// companion's value (nil: none to move).
type Move struct {
	Family, Column string
	TS, Target     bigtable.Timestamp
	Value          []byte
	Keep           bool
	Companion      []byte
	WriteTime      bool // the family stores companions: delete the old one
}

// RowMove is the predicate and mutation moving every cell of moves in one
// CheckAndMutateRow (the mutation applies when the predicate matches):
// each cell pinned (column, millisecond, value: filters.RowMove), nothing
// stored in the column above a lifted cell up to its target (so no
// concurrent write, and no newer version, is hidden under the moved cell)
// and each target millisecond below a cell moved down empty (so none is
// overwritten). An error when
// the pins do not fit in one predicate (filters.ErrCellTooLargeToPin).
func RowMove(moves []Move) (bigtable.Filter, *bigtable.Mutation, error) {
	var rm filters.RowMove
	var guards []bigtable.Filter
	guardBytes := 16 // the condition and interleave around them
	m := bigtable.NewMutation()
	for _, mv := range moves {
		ms, target := strategy.Millis(mv.TS), strategy.Millis(mv.Target)
		slotFamily := ""
		if mv.Keep && target < ms {
			slotFamily = mv.Family // the slot below must be empty; above, the newer guard covers it
		}
		ok, err := rm.Add(mv.Family, mv.Column, ms, mv.Value, slotFamily, target)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, fmt.Errorf("%w: the %d cells of the row do not fit in one predicate of %d bytes", filters.ErrCellTooLargeToPin, len(moves), filters.MaxFilterBytes)
		}
		if mv.Keep && target > ms {
			// A lift: nothing may be stored above the cell up to its
			// target, as for Expire's MoveNoCrossing, so it is never
			// lifted over a value written since the read, nor over a
			// newer version the read did not return (a filter may
			// return an older one), which it would hide. A cell moved
			// down, or deleted, hides nothing: the target slot's check
			// (above) keeps a concurrent write there from being
			// overwritten. Bounded above: family, column twice, two
			// ranges, the tags and lengths of a chain of two.
			guardBytes += len(mv.Family) + 2*len(mv.Column) + 50
			guards = append(guards, bigtable.ChainFilters(
				bigtable.ColumnRangeFilter(mv.Family, mv.Column, mv.Column+"\x00"),
				bigtable.TimestampRangeFilterMicros(strategy.MilliEnd(ms), strategy.MilliEnd(target)),
			))
		}
		end := strategy.MilliEnd(ms)
		m.DeleteTimestampRange(mv.Family, mv.Column, ms, end)
		if mv.Keep {
			m.Set(mv.Family, mv.Column, target, mv.Value)
		}
		if mv.WriteTime {
			q := strategy.WriteTimeColumn(mv.Column)
			m.DeleteTimestampRange(mv.Family, q, ms, end)
			if mv.Keep && mv.Companion != nil {
				m.Set(mv.Family, q, target, mv.Companion)
			}
		}
	}
	if n := proto.Size(rm.Proto()) + guardBytes; n > filters.MaxFilterBytes {
		return nil, nil, fmt.Errorf("%w: the %d cells of the row need a predicate of about %d bytes (limit %d)", filters.ErrCellTooLargeToPin, len(moves), n, filters.MaxFilterBytes)
	}
	pred := rm.Filter()
	switch len(guards) {
	case 0:
	case 1:
		pred = bigtable.ConditionFilter(guards[0], bigtable.BlockAllFilter(), pred)
	default:
		pred = bigtable.ConditionFilter(bigtable.InterleaveFilters(guards...), bigtable.BlockAllFilter(), pred)
	}
	return pred, m, nil
}

// PlanRowMove is the moves of get-and-expire for the row r as read
// through the table: the newest returned cell of each column of the age
// families, to the target its family's policy gives (target), in family
// then column order; a cell already at its target is left out. A family
// whose target is refused stops the plan: its name and the error (the
// first family by name, so the refusal is the same every time).
func PlanRowMove(r bigtable.Row, policy func(family string) (strategy.Policy, bool), target func(strategy.Policy) (bigtable.Timestamp, error)) ([]Move, string, error) {
	fams := make([]string, 0, len(r))
	for fam := range r {
		fams = append(fams, fam)
	}
	sort.Strings(fams)
	var moves []Move
	for _, fam := range fams {
		p, ok := policy(fam)
		if !ok || (p.Kind() != strategy.KindOneSecond && p.Kind() != strategy.KindDefaultExpiry) {
			continue
		}
		ts, err := target(p)
		if err != nil {
			return nil, fam, err
		}
		seen := map[string]bool{}
		for _, it := range r[fam] { // newest first within a column
			col := strings.TrimPrefix(it.Column, fam+":")
			if seen[col] {
				continue
			}
			seen[col] = true
			if ms := strategy.Millis(it.Timestamp); ms != ts {
				moves = append(moves, Move{Family: fam, Column: col, TS: ms, Target: ts, Value: it.Value, Keep: true, WriteTime: p.HasCompanions()})
			}
		}
	}
	return moves, "", nil
}

// ColumnsExist is SetColumns' predicate (HSETEX's FNX and FXX), after the
// table's TTL filter, which ttlclient's Table.Apply puts in front of every
// predicate, so only live cells count: with all false it matches when any
// of family's columns holds a live cell; with all true only when every
// one does (a chain of conditions, one per column: each passes the row on
// when its column has a cell, else blocks it). columns is not empty.
func ColumnsExist(family string, columns []string, all bool) bigtable.Filter {
	has := func(c string) bigtable.Filter { return bigtable.ColumnRangeFilter(family, c, c+"\x00") }
	if !all {
		if len(columns) == 1 {
			return has(columns[0])
		}
		fs := make([]bigtable.Filter, len(columns))
		for i, c := range columns {
			fs[i] = has(c)
		}
		return bigtable.InterleaveFilters(fs...)
	}
	var f bigtable.Filter = bigtable.PassAllFilter()
	for i := len(columns) - 1; i >= 0; i-- {
		f = bigtable.ConditionFilter(has(columns[i]), f, bigtable.BlockAllFilter())
	}
	return f
}
