package model

import (
	"time"

	"github.com/bttl/bttl/strategy"
)

// idleFamily is a family's time-to-idle: the idle TTL and the remaining
// TTL, in microseconds, below which a read cell is refreshed.
type idleFamily struct {
	ttl       time.Duration
	debounce  float64
	threshold int64
}

func idleFamilies(schema strategy.Schema) map[string]idleFamily {
	out := map[string]idleFamily{}
	for name, p := range schema {
		if p.IdleTTL() > 0 {
			// Written out here rather than asked of the policy: the
			// debounce is a fraction of the idle TTL.
			out[name] = idleFamily{ttl: p.IdleTTL(), debounce: p.IdleDebounce(),
				threshold: int64(float64(p.IdleTTL()/time.Microsecond) * (1 - p.IdleDebounce()))}
		}
	}
	return out
}

// IdleFigures is the time-to-idle of family as the model decides it: the
// idle TTL, the debounce, and the remaining TTL (microseconds) below which
// a cell read is due for a refresh; ok is false when the family has no
// idle TTL. For failure reports (the matrix's).
func (m *Model) IdleFigures(family string) (ttl time.Duration, debounce float64, threshold int64, ok bool) {
	f, ok := m.idle[family]
	return f.ttl, f.debounce, f.threshold, ok
}

// expiry is the instant a cell with timestamp ts stops being live.
func (f family) expiry(ts int64) int64 {
	if f.kind == strategy.KindDefaultExpiry {
		return ts + f.d
	}
	return ts
}

// IdleDue lists the cells a read that returned cs at t queues for a
// time-to-idle refresh: per row and column of a family with an idle TTL,
// the newest cell returned (largest timestamp), when it is live at t and
// has less than the idle TTL less the debounce left. cs is in Bigtable
// order (a read's result).
func (m *Model) IdleDue(cs []Cell, t int64) []Cell {
	var out []Cell
	for i := 0; i < len(cs); {
		newest, j := i, i+1
		for ; j < len(cs) && cs[j].Row == cs[i].Row && cs[j].Family == cs[i].Family && cs[j].Column == cs[i].Column; j++ {
			if cs[j].TS > cs[newest].TS {
				newest = j
			}
		}
		c := cs[newest]
		i = j
		idle, ok := m.idle[c.Family]
		f := m.fams[c.Family]
		if ok && f.live(c.TS, t) && f.expiry(c.TS)-t < idle.threshold {
			out = append(out, c)
		}
	}
	return out
}

// Refresh applies the time-to-idle refresh of c, a cell a read returned,
// at clock reading now: an extend of c to the idle TTL (the move Expire
// makes), which applies only
// while c is stored as read (same millisecond, same value), live at now,
// and still the newest cell of its column (so nothing is stored at the
// target millisecond either), and whose target lies after c. It reports
// whether the refresh applied.
func (m *Model) Refresh(c Cell, now time.Time) bool {
	idle, ok := m.idle[c.Family]
	if !ok {
		return false
	}
	f := m.fams[c.Family]
	target, err := f.timestamp(Op{Kind: SetTTL, Family: c.Family, Column: c.Column, TTL: idle.ttl}, now)
	if err != nil || target <= c.TS || !f.live(c.TS, now.UnixMicro()) {
		return false
	}
	cs := m.rows[c.Row][c.Family][c.Column]
	if len(cs) == 0 || cs[0].ts != c.TS || cs[0].value != c.Value {
		return false // gone, changed, or not the newest (cells are newest first)
	}
	// The extend itself is Expire's move (its write time moves with it).
	return m.move(c.Row, c.Family, c.Column, cs[0], target, now.UnixMicro())
}
