package model

import (
	"math"
	"time"

	"github.com/bttl/bttl/strategy"
)

// lastMilli is the largest timestamp Bigtable stores at millisecond
// granularity: MaxInt64 rounded down to a millisecond. A cell there has no
// TTL (docs/design.md#lifecycle-conditions).
const lastMilli = math.MaxInt64 - math.MaxInt64%1000

// milliEnd is the exclusive end of ts's millisecond, 0 ("no end") for the
// last one, where ts+1000 would overflow.
func milliEnd(ts int64) int64 {
	if ms(ts) >= lastMilli {
		return 0
	}
	return ms(ts) + 1000
}

// Cond is an expire condition, as docs/design.md#lifecycle-conditions
// states it (Redis EXPIRE's flags).
type Cond uint8

// The conditions, in ttlclient's order.
const (
	CondAlways Cond = iota
	CondNX          // no TTL: the cell is at the last millisecond
	CondXX          // a TTL
	CondGT          // the new expiry is later
	CondLT          // the new expiry is earlier
	CondXXLT        // a TTL and earlier
)

// The per-cell results, numbered as Redis HEXPIRE answers (-2 no such
// field, 0 not met, 1 set, 2 deleted); -3 is bttl's "changed", which a
// sequential history only shows when a move's target millisecond holds
// another cell.
const (
	ResChanged = -3
	ResNoCell  = -2
	ResNotMet  = 0
	ResSet     = 1
	ResDeleted = 2
)

// ClassCannotPersist: Persist where a cell cannot be kept forever
// (ttlclient.ErrCannotPersist).
const ClassCannotPersist Class = "cannot-persist"

// holds is whether c holds for a cell at cur moving to target: within a
// family a later timestamp is a later expiry.
func holds(c Cond, cur, target int64) bool {
	switch c {
	case CondNX:
		return cur >= lastMilli
	case CondXX:
		return cur < lastMilli
	case CondGT:
		return target > cur
	case CondLT:
		return target < cur
	case CondXXLT:
		return cur < lastMilli && target < cur
	}
	return true
}

// ageFamily checks a lifecycle operation's row and family.
func (m *Model) ageFamily(rowKey, fam string) (family, error) {
	if rowKey == "" {
		return family{}, refused(ClassInvalid, "empty row key")
	}
	f, ok := m.fams[fam]
	if !ok {
		return f, refused(ClassUnknownFamily, "unknown family %q", fam)
	}
	if f.kind != strategy.KindOneSecond && f.kind != strategy.KindDefaultExpiry {
		return f, refused(ClassNotApplicable, "a %s family", f.kind)
	}
	return f, nil
}

// expireTo moves the newest live cell of fam:col (or the one at at's
// millisecond when hasAt) to target when c holds, at read time t; a
// target no longer live deletes it.
func (m *Model) expireTo(rowKey, fam, col string, t, target, at int64, hasAt bool, c Cond) int {
	for _, cl := range m.liveColumn(rowKey, fam, col, t) {
		if hasAt && cl.ts != ms(at) {
			continue
		}
		if !holds(c, cl.ts, target) {
			return ResNotMet
		}
		if !m.move(rowKey, fam, col, cl, target, t) {
			return ResChanged
		}
		if target < 0 || !m.fams[fam].live(target, t) {
			return ResDeleted
		}
		return ResSet
	}
	return ResNoCell
}

// ExpireCond is ttlclient.Table.Expire with a condition, answering as
// ExpireResultTo does.
func (m *Model) ExpireCond(rowKey, fam, col string, now time.Time, ttl time.Duration, at int64, hasAt bool, c Cond) (int, error) {
	if rowKey == "" {
		return 0, refused(ClassInvalid, "empty row key")
	}
	_, target, err := m.expireTarget(fam, now, ttl)
	if err != nil {
		return 0, err
	}
	return m.expireTo(rowKey, fam, col, now.UnixMicro(), target, at, hasAt, c), nil
}

// expiryOffset is what a cell's expiry adds to its timestamp: 0 on
// one-second, D on default expiry.
func (f family) expiryOffset() int64 {
	if f.kind == strategy.KindDefaultExpiry {
		return f.d
	}
	return 0
}

// ExpireAt is ttlclient.Table.ExpireAt at clock reading now: the cell
// moves to the timestamp whose expiry is at (at, or at - D, rounded down
// to the millisecond); an instant whose cell is already expired deletes
// it; the cap refuses or clamps as for a write with that TTL.
func (m *Model) ExpireAt(rowKey, fam, col string, now, at time.Time, atCell int64, hasAt bool, c Cond) (int, error) {
	f, err := m.ageFamily(rowKey, fam)
	if err != nil {
		return 0, err
	}
	target, _, err := f.atTarget(now, at)
	if err != nil {
		return 0, err
	}
	return m.expireTo(rowKey, fam, col, now.UnixMicro(), target, atCell, hasAt, c), nil
}

// atTarget is the timestamp of a cell of f expiring at at, at clock
// reading now; past (target before the epoch, a delete) when such a cell
// is already expired.
func (f family) atTarget(now, at time.Time) (target int64, past bool, err error) {
	t := now.UnixMicro()
	off := time.Duration(f.expiryOffset()) * time.Microsecond
	if !at.After(time.Unix(0, 0)) {
		return 0, false, refused(ClassBeforeEpoch, "instant %s not after the epoch", at)
	}
	if !at.After(now) {
		return -1000, true, nil
	}
	if at.After(time.UnixMicro(lastMilli).Add(off)) {
		return 0, false, refused(ClassOverflow, "expiry %s past the last timestamp", at)
	}
	ts := ms(at.Add(-off).UnixMicro())
	if ts < 0 {
		return 0, false, refused(ClassBeforeEpoch, "expiry %s less than D after the epoch", at)
	}
	if !f.live(ts, t) {
		return -1000, true, nil
	}
	if f.maxTTL > 0 && ts+f.expiryOffset()-t > int64(f.maxTTL/time.Microsecond) {
		if !f.clampTTL {
			return 0, false, refused(ClassTTLTooLong, "expiry %s over the max TTL %s", at, f.maxTTL)
		}
		ts, err = f.timestamp(Op{Kind: SetTTL, TTL: f.maxTTL}, now)
		return ts, false, err
	}
	return ts, false, nil
}

// Persist is ttlclient.Table.Persist: the newest live cell moves to the
// last millisecond (to the cap on a clamping family), when it has a TTL.
func (m *Model) Persist(rowKey, fam, col string, now time.Time) (int, error) {
	f, err := m.ageFamily(rowKey, fam)
	if err != nil {
		if r, ok := err.(*Refusal); ok && r.Class == ClassNotApplicable {
			return 0, refused(ClassCannotPersist, "a %s family", f.kind)
		}
		return 0, err
	}
	target := int64(lastMilli)
	if f.maxTTL > 0 {
		if !f.clampTTL {
			return 0, refused(ClassCannotPersist, "the max TTL %s refuses longer TTLs", f.maxTTL)
		}
		if target, err = f.timestamp(Op{Kind: SetTTL, TTL: f.maxTTL}, now); err != nil {
			return 0, err
		}
		// "Forever" is the cap: a cell living longer is not shortened.
		if live := m.liveColumn(rowKey, fam, col, now.UnixMicro()); len(live) > 0 && live[0].ts < lastMilli && live[0].ts > target {
			return ResNotMet, nil
		}
	}
	return m.expireTo(rowKey, fam, col, now.UnixMicro(), target, 0, false, CondXX), nil
}

// SetKeepTTL is ttlclient.Table.SetKeepTTL: value replaces the newest
// live cell at its timestamp, with a write time of now; a single-value
// family loses the column's other cells; no live cell, nothing written.
func (m *Model) SetKeepTTL(rowKey, fam, col string, now time.Time, value string) (int, error) {
	f, err := m.ageFamily(rowKey, fam)
	if err != nil {
		return 0, err
	}
	live := m.liveColumn(rowKey, fam, col, now.UnixMicro())
	if len(live) == 0 {
		return ResNoCell, nil
	}
	c := live[0]
	r := m.rows[rowKey]
	if f.singleValue {
		r.deleteColumn(fam, col, 0, 0)
	} else {
		r.deleteColumn(fam, col, c.ts, milliEnd(c.ts))
	}
	c.value, c.wt, c.shadowed = value, ms(now.UnixMicro()), false
	r.set(fam, col, c)
	m.markShadowed(r)
	return ResSet, nil
}

// MaxWriteTime is ttlclient.Table.MaxWriteTime: the largest write time of
// the live cells (the view) of fam, or of cols; ok false when none.
func (m *Model) MaxWriteTime(rowKey, fam string, cols []string, now time.Time) (wt int64, ok bool, err error) {
	f, err := m.ageFamily(rowKey, fam)
	if err != nil {
		return 0, false, err
	}
	if !f.writeTime {
		return 0, false, refused(ClassNotApplicable, "family %q records no write times", fam)
	}
	want := map[string]bool{}
	for _, c := range cols {
		want[c] = true
	}
	for col := range m.rows[rowKey][fam] {
		if len(want) > 0 && !want[col] {
			continue
		}
		for _, c := range m.liveColumn(rowKey, fam, col, now.UnixMicro()) {
			if !ok || c.wt > wt {
				wt, ok = c.wt, true
			}
		}
	}
	return wt, ok, nil
}

// ReadRowAndMove is ttlclient.Table.ReadRowAndExpire (persist false, the
// target a write with ttl gets) or ReadRowAndPersist (persist true): the
// newest live cell of every column of the row's age families moves to its
// family's target, all or nothing (a target millisecond holding another
// cell fails the whole move: ResChanged). A refusal of the first family,
// by name, with a live cell, before anything changes.
func (m *Model) ReadRowAndMove(rowKey string, now time.Time, ttl time.Duration, persist bool) (int, error) {
	return m.readRowAndMove(rowKey, now, ttl, nil, persist)
}

// ReadRowAndExpireAt is ttlclient.Table.ReadRowAndExpireAt: as
// ReadRowAndMove, each family's target the timestamp expiring at at (as
// ExpireAt); an instant already past deletes the cells (ResDeleted).
func (m *Model) ReadRowAndExpireAt(rowKey string, now, at time.Time) (int, error) {
	return m.readRowAndMove(rowKey, now, 0, &at, false)
}

func (m *Model) readRowAndMove(rowKey string, now time.Time, ttl time.Duration, at *time.Time, persist bool) (int, error) {
	if rowKey == "" {
		return 0, refused(ClassInvalid, "empty row key")
	}
	if at != nil && !at.After(time.Unix(0, 0)) {
		return 0, refused(ClassBeforeEpoch, "instant %s not after the epoch, whatever the row holds", *at)
	}
	if at == nil && !persist && ttl < time.Millisecond {
		return 0, refused(ClassInvalidTTL, "TTL %s, whatever the row holds", ttl)
	}
	t := now.UnixMicro()
	type mv struct {
		fam, col string
		c        cell
		target   int64
	}
	var moves []mv
	any := false
	for _, fam := range sortedKeys(m.rows[rowKey]) {
		f := m.fams[fam]
		var cols []string
		for _, col := range sortedKeys(m.rows[rowKey][fam]) {
			if len(m.liveColumn(rowKey, fam, col, t)) > 0 {
				cols = append(cols, col)
			}
		}
		if len(cols) == 0 {
			continue
		}
		if f.kind != strategy.KindOneSecond && f.kind != strategy.KindDefaultExpiry {
			continue // returned and left alone: not a cell for the result
		}
		any = true
		var target int64
		var err error
		switch {
		case at != nil:
			target, _, err = f.atTarget(now, *at)
		case !persist:
			target, err = f.timestamp(Op{Kind: SetTTL, TTL: ttl}, now)
		case f.maxTTL > 0 && !f.clampTTL:
			err = refused(ClassCannotPersist, "the max TTL %s refuses longer TTLs", f.maxTTL)
		case f.maxTTL > 0:
			target, err = f.timestamp(Op{Kind: SetTTL, TTL: f.maxTTL}, now)
		default:
			target = lastMilli
		}
		if err != nil {
			return 0, err
		}
		for _, col := range cols {
			c := m.liveColumn(rowKey, fam, col, t)[0]
			if persist && c.ts >= target {
				continue // already without a TTL, or living longer than the cap: stays
			}
			if c.ts != target {
				moves = append(moves, mv{fam, col, c, target})
			}
		}
	}
	if len(moves) == 0 {
		if !any {
			return ResNoCell, nil
		}
		return ResSet, nil
	}
	for _, x := range moves {
		if x.target < x.c.ts && m.fams[x.fam].live(x.target, t) {
			for _, o := range m.rows[rowKey][x.fam][x.col] {
				if o.ts == x.target {
					return ResChanged, nil
				}
			}
		}
	}
	kept := false
	for _, x := range moves {
		m.move(rowKey, x.fam, x.col, x.c, x.target, t)
		kept = kept || (x.target >= 0 && m.fams[x.fam].live(x.target, t))
	}
	if !kept {
		return ResDeleted, nil
	}
	return ResSet, nil
}

// RowUndecidable is ExpireUndecidable for every column of the row.
func (m *Model) RowUndecidable(rowKey string) bool {
	for fam, cols := range m.rows[rowKey] {
		for col := range cols {
			if m.ExpireUndecidable(rowKey, fam, col) {
				return true
			}
		}
	}
	return false
}

// The SetColumns conditions (ttlclient.SetCondition: HSETEX's FNX, FXX).
const (
	SetAlways = iota
	SetIfNoneExist
	SetIfAllExist
)

// SetColumns is ttlclient.Table.SetColumns: values (column -> value) are
// written to fam with ttl, all or none, when cond holds for the columns'
// live cells (the view) at now; refusals are a mutation's, an age family
// only.
func (m *Model) SetColumns(rowKey, fam string, values map[string]string, ttl time.Duration, cond int, now time.Time) (bool, error) {
	if _, err := m.ageFamily(rowKey, fam); err != nil {
		return false, err
	}
	var ops []Op
	for _, col := range sortedKeys(values) {
		ops = append(ops, Op{Kind: SetTTL, Family: fam, Column: col, TTL: ttl, Value: values[col]})
	}
	if err := m.Check(rowKey, now, ops); err != nil {
		return false, err
	}
	exist := 0
	for _, col := range sortedKeys(values) {
		if len(m.liveColumn(rowKey, fam, col, now.UnixMicro())) > 0 {
			exist++
		}
	}
	if (cond == SetIfNoneExist && exist > 0) || (cond == SetIfAllExist && exist < len(values)) {
		return false, nil
	}
	return true, m.Apply(rowKey, now, ops)
}

// SetColumnsKeepTTL is ttlclient.Table.SetColumnsKeepTTL: each value
// replaces its column's newest live cell (as SetKeepTTL), all or none;
// ResNoCell, nothing written, when a column has no live cell.
func (m *Model) SetColumnsKeepTTL(rowKey, fam string, values map[string]string, now time.Time) (int, error) {
	if _, err := m.ageFamily(rowKey, fam); err != nil {
		return 0, err
	}
	for col := range values {
		if len(m.liveColumn(rowKey, fam, col, now.UnixMicro())) == 0 {
			return ResNoCell, nil
		}
	}
	for _, col := range sortedKeys(values) {
		if _, err := m.SetKeepTTL(rowKey, fam, col, now, values[col]); err != nil {
			return 0, err
		}
	}
	return ResSet, nil
}
