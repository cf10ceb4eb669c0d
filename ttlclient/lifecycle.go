package ttlclient

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// agePolicy is the policy of family for a lifecycle operation: an age
// family, or ErrUnknownFamily / ErrNotApplicable.
func (t *Table) agePolicy(family string) (strategy.Policy, error) {
	p, ok := t.policy(family)
	if !ok {
		return p, ErrUnknownFamily
	}
	if k := p.Kind(); k != strategy.KindOneSecond && k != strategy.KindDefaultExpiry {
		return p, fmt.Errorf("%w: a %s family's cells do not expire by age", ErrNotApplicable, k)
	}
	return p, nil
}

// readError is a *CellError about a cell that was read: unlike a refused
// write (Table.refuse) it is not counted as a refusal.
func (t *Table) readError(row, family, column string, ts bigtable.Timestamp, err error) *CellError {
	return &CellError{Table: t.name, Row: row, Family: family, Column: column, Timestamp: ts, Err: err, text: t.keyText}
}

// itemPolicy is the age policy of the family of a read item.
func (t *Table) itemPolicy(item bigtable.ReadItem) (strategy.Policy, error) {
	family, column, ok := strings.Cut(item.Column, ":")
	if !ok {
		return strategy.Policy{}, t.readError(item.Row, "", item.Column, item.Timestamp, fmt.Errorf("%w: the column is not family:qualifier", ErrUnknownFamily))
	}
	p, err := t.agePolicy(family)
	if err != nil {
		return p, t.readError(item.Row, family, column, item.Timestamp, err)
	}
	return p, nil
}

// Expiry is the instant the cell item stops being live, by its family's
// policy: its timestamp on a one-second family, timestamp + D on a
// default-expiry one. item is a cell read through this table (its Column
// is "family:qualifier"). It makes no RPC and allocates nothing; a sequence
// or unmanaged family's cell is a *CellError wrapping ErrNotApplicable. The
// instant is exact to the microsecond for any timestamp, past the year 2262
// too (no conversion goes through nanoseconds since the epoch).
func (t *Table) Expiry(item bigtable.ReadItem) (time.Time, error) {
	p, err := t.itemPolicy(item)
	if err != nil {
		return time.Time{}, err
	}
	return p.ExpiryTime(item.Timestamp), nil
}

// RemainingTTL is how long the cell item has left at the table's clock:
// Expiry minus now, like Redis PTTL, exact. It is zero or negative for a
// cell expired since it was read. An expiry more than the largest
// time.Duration (about 292 years) away is a *CellError wrapping
// strategy.ErrTimestampOverflow, returned with that largest Duration (use Expiry
// for such a cell). Other errors as for Expiry.
func (t *Table) RemainingTTL(item bigtable.ReadItem) (time.Duration, error) {
	exp, err := t.Expiry(item)
	if err != nil {
		return 0, err
	}
	now := t.clock.Now()
	left := exp.Sub(now) // saturates: checked below
	if left == math.MaxInt64 && exp.After(now.Add(left)) {
		family, column, _ := strings.Cut(item.Column, ":")
		return left, t.readError(item.Row, family, column, item.Timestamp,
			fmt.Errorf("%w: the cell expires at %s, more than %s after now", strategy.ErrTimestampOverflow, exp.UTC().Format(time.RFC3339), left))
	}
	return left, nil
}

// ExpireOption adjusts Expire.
type ExpireOption func(*expireSettings)

type expireSettings struct {
	ts    bigtable.Timestamp
	hasTS bool
}

// ExpireCellAt makes Expire act on the live cell stored at timestamp ts
// (its millisecond), as read through the table, instead of the column's
// newest live cell. A negative ts (bigtable.ServerTime included) is refused
// (strategy.ErrBeforeEpoch).
func ExpireCellAt(ts bigtable.Timestamp) ExpireOption {
	return func(s *expireSettings) { s.ts, s.hasTS = ts, true }
}

// expireTimestamp checks a lifecycle write: row key, family, column and
// TTL, with the same guardrails as a write with SetTTL(..., ttl, ...) (cap,
// overflow, below 1ms), and returns the policy and the timestamp a cell
// given ttl now gets.
func (t *Table) expireTimestamp(row, family, column string, ttl time.Duration) (strategy.Policy, bigtable.Timestamp, error) {
	if err := t.checkRowKey(row); err != nil {
		return strategy.Policy{}, 0, err
	}
	p, err := t.agePolicy(family)
	if err != nil {
		e := t.refuse(row, family, column, err)
		e.TTL = ttl
		return p, 0, e
	}
	if err := checkReserved(p, column); err != nil {
		return p, 0, t.refuse(row, family, column, err)
	}
	ts, err := p.WriteTimestamp(t.clock.Now(), ttl)
	if err != nil {
		e := t.refuse(row, family, column, err)
		e.TTL = ttl
		return p, 0, e
	}
	return p, ts, nil
}

// checkReserved refuses a column holding write-time companions.
func checkReserved(p strategy.Policy, column string) error {
	if p.HasWriteTime() && strings.HasPrefix(column, companionHidesFrom) {
		return ErrReservedColumn // the *CellError names the column
	}
	return nil
}

// liveCells reads family:column's live cells of row, newest first, through
// the TTL filter (so an expired cell is never found, and never revived),
// restricted to the millisecond of ts when one is given.
func (t *Table) liveCells(ctx context.Context, row, family, column string, s expireSettings, latest bool) ([]bigtable.ReadItem, error) {
	f := []bigtable.Filter{bigtable.ColumnRangeFilter(family, column, column+"\x00")}
	if s.hasTS {
		f = append(f, bigtable.TimestampRangeFilterMicros(strategy.Millis(s.ts), strategy.MilliEnd(s.ts)))
	}
	if latest {
		f = append(f, bigtable.LatestNFilter(1))
	}
	var user bigtable.Filter = f[0]
	if len(f) > 1 {
		user = bigtable.ChainFilters(f...)
	}
	r, err := t.raw.ReadRow(t.wire(ctx), row, bigtable.RowFilter(t.filters.Compose(t.now(), user)))
	if err != nil {
		return nil, err
	}
	return r[family], nil
}

// Expire gives a cell of row a new TTL, like Redis EXPIRE: the column's
// newest live cell, or the one ExpireCellAt names. The cell moves to the
// timestamp a write with SetTTL(..., ttl, ...) gets now (its family's convention),
// and leaves its old one, in one atomic conditional row mutation whose
// predicate pins the exact cell (column, timestamp, value): a concurrent
// writer's value is never overwritten or deleted, nor, when Expire takes
// the column's newest cell, hidden under the moved cell (the move does not
// apply if anything was stored between the cell and its target since the
// read). A cell expired at the table's clock when the mutation is about to
// be sent is not moved; one expiring while it is in flight is
// (docs/design.md#expire). applied reports whether the cell has the new
// TTL: true when it moved, or was already at its target (then nothing is
// sent); false when no live cell was found or it changed before the
// mutation ran (read it and retry if needed). ttl may extend or shorten
// the TTL. With ExpireCellAt the named cell moves even over newer
// versions.
//
// The guardrails are a write's: a TTL below 1ms, over the family's cap or
// overflowing the timestamp, a sequence or unmanaged family
// (ErrNotApplicable) and a value too large to pin (filters.ErrCellTooLargeToPin,
// over about 10 KB) are refused with a *CellError before any write. It
// costs one read and one CheckAndMutateRow (and a read of the write-time
// companion on a family with strategy.WithWriteTime, which moves too).
func (t *Table) Expire(ctx context.Context, row, family, column string, ttl time.Duration, opts ...ExpireOption) (applied bool, err error) {
	var s expireSettings
	for _, o := range opts {
		o(&s)
	}
	p, ts, err := t.expireTimestamp(row, family, column, ttl)
	if err != nil {
		return false, err
	}
	if s.hasTS && s.ts < 0 {
		// No cell has one; its millisecond's end, 0, would read as an
		// open end and select the newest cell.
		e := t.refuse(row, family, column, fmt.Errorf("%w: ExpireCellAt(%d)", strategy.ErrBeforeEpoch, s.ts))
		e.Timestamp = s.ts
		return false, e
	}
	cells, err := t.liveCells(ctx, row, family, column, s, true)
	if err != nil || len(cells) == 0 {
		return false, err
	}
	c := cells[0]
	if ts < strategy.Millis(c.Timestamp) {
		if err := t.purgeHidden(ctx, row, family, column, p); err != nil {
			return false, err
		}
	}
	mode := moveNoCrossing // the newest: never lifted over a value written since the read
	if s.hasTS {
		mode = moveAny // the caller named the cell
	}
	return t.moveCell(ctx, row, family, column, c.Timestamp, c.Value, ts, mode)
}

// purgeHidden deletes the cells of family:column that a max-versions age
// family (strategy.WithMaxVersions) hides: those beyond the column's newest
// N live ones, which GC's max-versions rule removes and no read returns.
// A move to an older timestamp must not run while they are stored: the
// moved cell would sort below them and bring them back into view as live
// versions (and push a live one out). They are dead, so deleting them
// changes nothing any read sees. A family without the rule has none.
func (t *Table) purgeHidden(ctx context.Context, row, family, column string, p strategy.Policy) error {
	n := p.Versions()
	if n == 0 {
		return nil
	}
	r, err := t.raw.ReadRow(t.wire(ctx), row, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"),
		bigtable.TimestampRangeFilterMicros(p.LiveFrom(t.now()), 0),
		bigtable.StripValueFilter(),
	)))
	if err != nil {
		return err
	}
	cells := r[family] // newest first
	if len(cells) <= n {
		return nil
	}
	return t.purgeBelow(ctx, row, family, column, p, strategy.Millis(cells[n-1].Timestamp))
}

// purgeBelow deletes family:column's cells under below, the n-th newest
// live cell's millisecond when purgeHidden read the column, and their
// companions.
func (t *Table) purgeBelow(ctx context.Context, row, family, column string, p strategy.Policy, below bigtable.Timestamp) error {
	n := p.Versions()
	m := bigtable.NewMutation()
	m.DeleteTimestampRange(family, column, 0, below)
	if p.HasWriteTime() {
		m.DeleteTimestampRange(family, companionQualifier(column), 0, below)
	}
	// Only while at least n cells are still stored from below on: then
	// every cell under it is beyond the n newest, collectable by GC's
	// max-versions rule whatever moved meanwhile (a concurrent Expire may
	// have moved a live cell under below, and the column have fewer).
	atLeastN := bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"),
		bigtable.TimestampRangeFilterMicros(below, 0),
		bigtable.CellsPerRowOffsetFilter(n-1),
	)
	return t.transact("CheckAndMutateRow", func(tbl bigtable.TableAPI) error {
		return tbl.Apply(t.wire(ctx), row, bigtable.NewCondMutation(atLeastN, m, nil))
	})
}

// ExpireColumn gives every live cell of family:column a new TTL: the newest
// gets ttl, as with Expire, and each older one is moved by the same amount,
// so the versions keep their order and spacing (an older one shifted into
// the past is deleted). Each cell moves in its own atomic conditional
// mutation, with Expire's guarantees (none is lifted over a cell it did
// not move); moved counts the cells given the new TTL, those already at
// their target included (nothing is sent for them).
// Guardrails and errors as for Expire (every cell read is checked for
// filters.ErrCellTooLargeToPin before the first move); a move that fails stops the
// call, with the cells moved until then counted.
func (t *Table) ExpireColumn(ctx context.Context, row, family, column string, ttl time.Duration) (moved int, err error) {
	if _, _, err := t.expireTimestamp(row, family, column, ttl); err != nil {
		return 0, err
	}
	cells, err := t.liveCells(ctx, row, family, column, expireSettings{}, false)
	if err != nil {
		return 0, err
	}
	return t.expireCells(ctx, row, family, column, cells, ttl)
}

// ExpireRow gives every live cell of row's age families (one-second and
// default-expiry) a new TTL, column by column as ExpireColumn does; cells
// of sequence and unmanaged families are left alone. A table without an
// age family gets ErrNotApplicable. moved counts the cells given the new
// TTL, as ExpireColumn does. Refusals come before the first move; an RPC
// error stops the call, with the cells moved until then counted.
func (t *Table) ExpireRow(ctx context.Context, row string, ttl time.Duration) (moved int, err error) {
	if err := t.checkRowKey(row); err != nil {
		return 0, err
	}
	var families []string
	for fam, p := range t.schema {
		if _, err := t.agePolicy(fam); err == nil {
			if _, err := p.WriteTimestamp(t.clock.Now(), ttl); err != nil {
				e := t.refuse(row, fam, "", err)
				e.TTL = ttl
				return 0, e
			}
			families = append(families, fam)
		}
	}
	if len(families) == 0 {
		e := t.refuse(row, "", "", fmt.Errorf("%w: the table has no one-second or default-expiry family", ErrNotApplicable))
		e.TTL = ttl
		return 0, e
	}
	sort.Strings(families)
	r, err := t.raw.ReadRow(t.wire(ctx), row, bigtable.RowFilter(t.filters.TTL(t.now())))
	if err != nil {
		return 0, err
	}
	for _, fam := range families {
		for _, it := range r[fam] {
			if err := t.checkPinnable(row, fam, strings.TrimPrefix(it.Column, fam+":"), it); err != nil {
				return 0, err
			}
		}
	}
	for _, fam := range families {
		items := r[fam]
		for i := 0; i < len(items); {
			j := i + 1
			for j < len(items) && items[j].Column == items[i].Column {
				j++
			}
			column := strings.TrimPrefix(items[i].Column, fam+":")
			n, err := t.expireCells(ctx, row, fam, column, items[i:j], ttl)
			moved += n
			if err != nil {
				return moved, err
			}
			i = j
		}
	}
	return moved, nil
}

// expireCells moves the live cells of one column (newest first, as read)
// so that the newest gets ttl and the others keep their spacing.
func (t *Table) expireCells(ctx context.Context, row, family, column string, cells []bigtable.ReadItem, ttl time.Duration) (int, error) {
	if len(cells) == 0 {
		return 0, nil
	}
	p, ts, err := t.expireTimestamp(row, family, column, ttl)
	if err != nil {
		return 0, err
	}
	// delta 0: every cell is already where it goes; moveCell counts each
	// live one without sending anything.
	delta := ts - strategy.Millis(cells[0].Timestamp)
	if delta < 0 {
		if err := t.purgeHidden(ctx, row, family, column, p); err != nil {
			return 0, err
		}
	}
	for _, c := range cells {
		if err := t.checkPinnable(row, family, column, c); err != nil {
			return 0, err
		}
	}
	order := make([]int, len(cells))
	for i := range order {
		order[i] = i
		if delta < 0 { // shortening: oldest first, so no target is a cell not yet moved
			order[i] = len(cells) - 1 - i
		}
	}
	moved := 0
	for _, i := range order {
		c := cells[i]
		target := strategy.Millis(c.Timestamp) + delta // no overflow: between c's and ts
		if target < 0 {
			target = 0
		}
		ok, err := t.moveCell(ctx, row, family, column, c.Timestamp, c.Value, target, moveNoCrossing)
		if err != nil {
			return moved, err
		}
		if ok {
			moved++
		}
	}
	return moved, nil
}

// checkPinnable refuses, as moveCell would, a cell whose value is too large
// to pin: ExpireColumn and ExpireRow check every cell they read before the
// first move, so such a cell found late leaves nothing moved in part.
func (t *Table) checkPinnable(row, family, column string, c bigtable.ReadItem) error {
	if _, err := filters.Cell(family, column, strategy.Millis(c.Timestamp), c.Value); err != nil {
		e := t.refuse(row, family, column, err)
		e.Timestamp = c.Timestamp
		return e
	}
	return nil
}
