package model

import (
	"encoding/binary"
	"strings"
	"time"

	"github.com/bttl/bttl/strategy"
)

// CompanionPrefix starts the qualifier of a write-time companion, as
// ttlclient writes it (the model does not import the library; a test in
// the conformance suite checks the two agree).
const CompanionPrefix = ReservedStart + "bttl.wt\x00"

// ReservedStart is the first qualifier reserved in a family with write
// times.
const ReservedStart = "\xff\xff"

// StoredRaw is Stored with the write-time companions a family with
// strategy.WithWriteTime stores beside each cell (same timestamp, qualifier
// CompanionPrefix+column, the write time as 8 bytes big-endian
// microseconds): what a raw read of a server that never ran GC returns.
func (m *Model) StoredRaw(rowKey string) []Cell {
	var out []Cell
	r := m.rows[rowKey]
	for _, fam := range sortedKeys(r) {
		cols := r[fam]
		for _, col := range sortedKeys(cols) {
			for _, c := range cols[col] {
				out = append(out, Cell{Row: rowKey, Family: fam, Column: col, TS: c.ts, Value: c.value})
			}
		}
		if !m.fams[fam].writeTime {
			continue
		}
		for _, col := range sortedKeys(cols) {
			for _, c := range cols[col] {
				out = append(out, Cell{Row: rowKey, Family: fam, Column: CompanionPrefix + col, TS: c.ts, Value: WriteTimeValue(c.wt)})
			}
		}
	}
	return out
}

// WriteTimeValue is a companion's value for write time wt (microseconds).
func WriteTimeValue(wt int64) string {
	return string(binary.BigEndian.AppendUint64(nil, uint64(wt)))
}

// WriteTime is the write time of the cell of fam:col at ts (microseconds),
// false when the family records none or there is no such cell.
func (m *Model) WriteTime(rowKey, fam, col string, ts int64) (int64, bool) {
	if !m.fams[fam].writeTime {
		return 0, false
	}
	for _, c := range m.rows[rowKey][fam][col] {
		if c.ts == ms(ts) {
			return c.wt, true
		}
	}
	return 0, false
}

// companionColumn is the column a companion qualifier belongs to.
func companionColumn(col string) (string, bool) {
	return strings.CutPrefix(col, CompanionPrefix)
}

// expireTarget checks an Expire of fam with ttl at now as the library
// does (the guardrails of a write with that TTL, age families only) and
// returns the target timestamp.
func (m *Model) expireTarget(fam string, now time.Time, ttl time.Duration) (family, int64, error) {
	f, ok := m.fams[fam]
	if !ok {
		return f, 0, refused(ClassUnknownFamily, "unknown family %q", fam)
	}
	if f.kind != strategy.KindOneSecond && f.kind != strategy.KindDefaultExpiry {
		return f, 0, refused(ClassNotApplicable, "Expire on a %s family", f.kind)
	}
	ts, err := f.timestamp(Op{Kind: SetTTL, TTL: ttl}, now)
	return f, ts, err
}

// liveColumn is fam:col's cells as a read through the library at t sees
// them, newest first (the view: live, the N newest of a max-versions rule).
func (m *Model) liveColumn(rowKey, fam, col string, t int64) []cell {
	f := m.fams[fam]
	var out []cell
	for _, c := range m.rows[rowKey][fam][col] {
		if f.live(c.ts, t) {
			out = append(out, c)
		}
	}
	if f.versions > 0 && len(out) > f.versions {
		out = out[:f.versions]
	}
	return out
}

// move is the library's atomic cell move at read time t: it applies while
// the cell is stored (the caller took it from the view) and nothing else
// is stored at the target's millisecond; a target no longer live makes it
// a delete, which applies whatever is stored there.
func (m *Model) move(rowKey, fam, col string, c cell, target, t int64) bool {
	r := m.rows[rowKey]
	keep := target >= 0 && m.fams[fam].live(target, t) // no cell is stored before the epoch
	if target != c.ts && keep {
		for _, o := range r[fam][col] {
			if o.ts == target {
				return false
			}
		}
	}
	r.deleteColumn(fam, col, c.ts, milliEnd(c.ts))
	if keep {
		c.ts, c.shadowed = target, false
		r.set(fam, col, c)
	}
	m.markShadowed(r)
	if len(r) == 0 {
		delete(m.rows, rowKey)
	}
	return true
}

// Expire is ttlclient.Table.Expire at clock reading now: the newest live
// cell of fam:col, or the live one in at's millisecond when hasAt, moves
// to the timestamp a write with ttl gets. It reports whether it moved, or
// a refusal (nothing changed).
func (m *Model) Expire(rowKey, fam, col string, now time.Time, ttl time.Duration, at int64, hasAt bool) (bool, error) {
	if rowKey == "" {
		return false, refused(ClassInvalid, "empty row key")
	}
	_, target, err := m.expireTarget(fam, now, ttl)
	if err != nil {
		return false, err
	}
	t := now.UnixMicro()
	for _, c := range m.liveColumn(rowKey, fam, col, t) {
		if !hasAt || c.ts == ms(at) {
			return m.move(rowKey, fam, col, c, target, t), nil
		}
	}
	return false, nil
}

// ExpireColumn is ttlclient.Table.ExpireColumn: every live cell of
// fam:col moves by the amount that gives the newest ttl, one move at a
// time (newest first when extending, oldest first when shortening).
func (m *Model) ExpireColumn(rowKey, fam, col string, now time.Time, ttl time.Duration) (int, error) {
	return m.ExpireColumnCond(rowKey, fam, col, now, ttl, CondAlways)
}

// ExpireColumnCond is ExpireColumn with a condition checked for each
// cell against its own target.
func (m *Model) ExpireColumnCond(rowKey, fam, col string, now time.Time, ttl time.Duration, cond Cond) (int, error) {
	res, err := m.ExpireColumnResults(rowKey, fam, col, now, ttl, cond)
	return Moved(res), err
}

// CellRes is one cell's result of an ExpireColumn or ExpireRow
// (ttlclient.ExpireResultsTo): the cell's timestamp before (0 with
// ResNoCell) and the result.
type CellRes struct {
	Family, Column string
	TS             int64
	Res            int
}

// Moved counts the cells set or deleted.
func Moved(res []CellRes) int {
	n := 0
	for _, r := range res {
		if r.Res == ResSet || r.Res == ResDeleted {
			n++
		}
	}
	return n
}

// ExpireColumnResults is ExpireColumnCond answering per cell.
func (m *Model) ExpireColumnResults(rowKey, fam, col string, now time.Time, ttl time.Duration, cond Cond) ([]CellRes, error) {
	if rowKey == "" {
		return nil, refused(ClassInvalid, "empty row key")
	}
	_, target, err := m.expireTarget(fam, now, ttl)
	if err != nil {
		return nil, err
	}
	return m.expireColumnTo(rowKey, fam, col, now.UnixMicro(), target, false, cond, true), nil
}

// ExpireColumnAt is ttlclient.Table.ExpireColumnAt: the newest live cell
// gets the expiry at (as ExpireAt), the others keep their spacing; an
// instant already past deletes them all.
func (m *Model) ExpireColumnAt(rowKey, fam, col string, now, at time.Time, cond Cond) ([]CellRes, error) {
	f, err := m.ageFamily(rowKey, fam)
	if err != nil {
		return nil, err
	}
	target, past, err := f.atTarget(now, at)
	if err != nil {
		return nil, err
	}
	return m.expireColumnTo(rowKey, fam, col, now.UnixMicro(), target, past, cond, true), nil
}

// ExpireRow is ttlclient.Table.ExpireRow (at nil) or ExpireRowAt: every
// column of the row's age families as ExpireColumn (ExpireColumnAt) acts
// on it, families and columns in order; a family refusing the TTL or
// instant (the first by name) refuses the whole call first.
func (m *Model) ExpireRow(rowKey string, now time.Time, ttl time.Duration, at *time.Time, cond Cond) ([]CellRes, error) {
	if rowKey == "" {
		return nil, refused(ClassInvalid, "empty row key")
	}
	type tgt struct {
		ts   int64
		past bool
	}
	targets := map[string]tgt{}
	var fams []string
	for _, fam := range sortedKeys(m.fams) {
		f := m.fams[fam]
		if f.kind != strategy.KindOneSecond && f.kind != strategy.KindDefaultExpiry {
			continue
		}
		var x tgt
		var err error
		if at != nil {
			x.ts, x.past, err = f.atTarget(now, *at)
		} else {
			x.ts, err = f.timestamp(Op{Kind: SetTTL, TTL: ttl}, now)
		}
		if err != nil {
			return nil, err
		}
		targets[fam] = x
		fams = append(fams, fam)
	}
	if len(fams) == 0 {
		return nil, refused(ClassNotApplicable, "no age family")
	}
	var out []CellRes
	t := now.UnixMicro()
	for _, fam := range fams {
		for _, col := range sortedKeys(m.rows[rowKey][fam]) {
			out = append(out, m.expireColumnTo(rowKey, fam, col, t, targets[fam].ts, targets[fam].past, cond, false)...)
		}
	}
	return out, nil
}

// expireColumnTo moves fam:col's live cells so the newest goes to
// target, the others by the same amount (past: every one is deleted),
// one move at a time (newest first when extending, oldest first when
// shortening), each when cond holds for it. noCell: a column without a
// live cell answers ResNoCell.
func (m *Model) expireColumnTo(rowKey, fam, col string, t, target int64, past bool, cond Cond, noCell bool) []CellRes {
	cells := m.liveColumn(rowKey, fam, col, t)
	if len(cells) == 0 {
		if noCell {
			return []CellRes{{Family: fam, Column: col, Res: ResNoCell}}
		}
		return nil
	}
	delta := target - cells[0].ts // 0: each cell counts, as already given its TTL
	var out []CellRes
	for i := range cells {
		c := cells[i]
		if past || delta < 0 {
			c = cells[len(cells)-1-i]
		}
		to := c.ts + delta
		switch {
		case past:
			to = -1000
		case to < 0:
			// Before the epoch: deleted when its new expiry is past, else
			// the earliest timestamp (a default TTL longer than the time
			// since the epoch).
			if to+m.fams[fam].expiryOffset() > t {
				to = 0
			} else {
				to = -1000
			}
		}
		r := CellRes{Family: fam, Column: col, TS: c.ts}
		switch {
		case !holds(cond, c.ts, to):
			r.Res = ResNotMet
		case !m.move(rowKey, fam, col, c, to, t):
			r.Res = ResChanged
		case to < 0 || !m.fams[fam].live(to, t):
			r.Res = ResDeleted
		default:
			r.Res = ResSet
		}
		out = append(out, r)
	}
	return out
}

// ExpireUndecidable reports whether an Expire or ExpireColumn of fam:col
// has an outcome no read can check exactly: the column holds a version the
// server's max-versions GC may already have removed, so a move landing on
// it, or shortening a cell below it, depends on when GC ran. The
// conformance suite skips such operations (conservatively: any such
// version in the column).
func (m *Model) ExpireUndecidable(rowKey, fam, col string) bool {
	if m.fams[fam].versions == 0 {
		return false
	}
	for _, c := range m.rows[rowKey][fam][col] {
		if c.shadowed {
			return true
		}
	}
	return false
}

// CloneRow is a model holding a copy of rowKey alone, to try an operation
// on without changing m.
func (m *Model) CloneRow(rowKey string) *Model { return m.cloneRow(rowKey) }
