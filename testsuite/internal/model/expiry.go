package model

import "github.com/bttl/bttl/strategy"

// This file is the model's side of expiry events (issue 38): when each
// stored cell expires, which stored cells have expired at a time, and what
// the server's garbage collection removes. The change-stream acceptance
// test (testsuite/internal/expiryhistory) derives every expected event from
// it, so the live rule here is the one reference for expiry everywhere.

// Expiry is the instant, in microseconds, from which a cell of fam stored
// at ts is no longer live (the first t at which the live rule fails):
// one-second ts, default expiry ts + D. false for a family that does not
// expire by age.
func (m *Model) Expiry(fam string, ts int64) (int64, bool) {
	f, ok := m.fams[fam]
	if !ok {
		return 0, false
	}
	switch f.kind {
	case strategy.KindOneSecond:
		return ts, true
	case strategy.KindDefaultExpiry:
		return ts + f.d, true
	}
	return 0, false
}

// Expired is every stored cell of a family expiring by age that is no
// longer live at t (whether or not GC removed it yet: the model holds
// what a server that never ran GC stores; see GC), in Bigtable order.
// Write-time companions are not cells of their own and are left out.
func (m *Model) Expired(t int64) []Cell {
	var out []Cell
	for _, k := range m.RowKeys() {
		for _, c := range m.Stored(k) {
			if _, ok := m.Expiry(c.Family, c.TS); ok && !m.fams[c.Family].live(c.TS, t) {
				out = append(out, c)
			}
		}
	}
	return out
}

// GC is a complete run of the server's garbage collection at now
// (microseconds), as the families' GC rules say (strategy.Policy.GCPolicy):
// an age family deletes each cell whose timestamp lies before now minus
// its max age (one-second 1s, default expiry D), a max-versions limit every
// cell of a column beyond its N newest stored, either one sufficing. It
// removes those cells from the model and returns them in Bigtable order,
// each write-time companion after its family's cells (StoredRaw's
// layout), so the count is the server's.
func (m *Model) GC(now int64) []Cell {
	var out []Cell
	for _, k := range m.RowKeys() {
		r := m.rows[k]
		gone := map[Cell]bool{}
		for _, c := range m.StoredRaw(k) {
			col := c.Column
			if base, ok := companionColumn(col); ok && m.fams[c.Family].writeTime {
				col = base
			}
			if m.collects(r, c.Family, col, c.TS, now) {
				out = append(out, c)
				gone[Cell{Family: c.Family, Column: col, TS: c.TS}] = true
			}
		}
		for c := range gone {
			r.deleteColumn(c.Family, c.Column, c.TS, c.TS+1)
		}
		if len(r) == 0 {
			delete(m.rows, k)
		}
	}
	return out
}

// collects is one GC rule's verdict on the cell of fam:col at ts.
func (m *Model) collects(r row, fam, col string, ts, now int64) bool {
	f := m.fams[fam]
	if (f.kind == strategy.KindOneSecond || f.kind == strategy.KindDefaultExpiry) && ts < now-f.d {
		return true
	}
	if f.versions > 0 {
		for i, c := range r[fam][col] {
			if c.ts == ts {
				return i >= f.versions
			}
		}
	}
	return false
}
