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
	"github.com/bttl/bttl/internal/lifecycle"
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

// ExpireOption adjusts Expire, ExpireAt and Persist: ExpireCellAt, an
// ExpireCondition, ExpireResultTo. As with the bigtable client's options,
// of two options setting the same thing the last wins.
type ExpireOption interface{ applyExpire(*expireSettings) }

// ExpireColumnOption adjusts ExpireColumn and ExpireRow: an
// ExpireCondition, checked for each cell.
type ExpireColumnOption interface{ applyExpireColumn(*expireSettings) }

type expireSettings struct {
	ts     bigtable.Timestamp
	hasTS  bool
	cond   lifecycle.Condition
	result *ExpireResult
}

type cellAtOption bigtable.Timestamp

func (o cellAtOption) applyExpire(s *expireSettings) { s.ts, s.hasTS = bigtable.Timestamp(o), true }

// ExpireCellAt makes Expire act on the live cell stored at timestamp ts
// (its millisecond), as read through the table, instead of the column's
// newest live cell. A negative ts (bigtable.ServerTime included) is refused
// (strategy.ErrBeforeEpoch).
func ExpireCellAt(ts bigtable.Timestamp) ExpireOption { return cellAtOption(ts) }

// ExpireCondition makes an expire apply only when it holds, like Redis
// EXPIRE's NX, XX, GT and LT flags (docs/design.md#lifecycle-conditions).
// It compares the cell's current expiry with the new one; a cell without a
// TTL (one stored at the largest timestamp, where Persist puts it) counts
// as expiring last, so OnlyIfLater never applies to it and OnlyIfEarlier
// always does, as in Redis. The condition is part of the predicate of the
// conditional mutation (a timestamp range the pinned cell must lie in), so
// the server decides it on the cell it stores, never a stale read. A cell
// it does not hold for is left alone (ExpireNotMet).
type ExpireCondition uint8

const (
	// OnlyIfNoTTL (NX): only a cell without a TTL.
	OnlyIfNoTTL = ExpireCondition(lifecycle.IfNoTTL)
	// OnlyIfTTL (XX): only a cell with a TTL.
	OnlyIfTTL = ExpireCondition(lifecycle.IfTTL)
	// OnlyIfLater (GT): only when the new expiry is later.
	OnlyIfLater = ExpireCondition(lifecycle.IfLater)
	// OnlyIfEarlier (LT): only when the new expiry is earlier.
	OnlyIfEarlier = ExpireCondition(lifecycle.IfEarlier)
	// OnlyIfTTLAndEarlier (XX LT): only a cell with a TTL, to an earlier
	// expiry. (XX GT is OnlyIfLater: a cell without a TTL is never
	// extended.)
	OnlyIfTTLAndEarlier = ExpireCondition(lifecycle.IfTTLAndEarlier)
)

func (c ExpireCondition) applyExpire(s *expireSettings)       { s.cond = lifecycle.Condition(c) }
func (c ExpireCondition) applyExpireColumn(s *expireSettings) { s.cond = lifecycle.Condition(c) }

// String is the condition's Redis flags ("NX", "XX LT").
func (c ExpireCondition) String() string { return lifecycle.Condition(c).String() }

// ExpireResult is what a lifecycle operation did to one cell, numbered as
// Redis HEXPIRE answers where it has a counterpart.
type ExpireResult int8

const (
	// ExpireChanged: the cell read changed before the conditional
	// mutation ran (rewritten, moved by a concurrent Expire or time-to-idle
	// refresh, deleted, collected or expired), or the move would have
	// overwritten or lifted the cell over a concurrent write: nothing
	// changed; read again and retry if needed.
	ExpireChanged = ExpireResult(lifecycle.Changed)
	// ExpireNoCell: no live cell to act on (HEXPIRE's -2).
	ExpireNoCell = ExpireResult(lifecycle.NoCell)
	// ExpireNotMet: the condition does not hold, or Persist found no TTL
	// to remove (HEXPIRE's 0, HPERSIST's -1); nothing sent.
	ExpireNotMet = ExpireResult(lifecycle.NotMet)
	// ExpireSet: the cell has the new expiry (HEXPIRE's 1): moved, or
	// already there (nothing sent).
	ExpireSet = ExpireResult(lifecycle.Set)
	// ExpireDeleted: the instant was already past, and the cell was
	// deleted (HEXPIRE's 2): its millisecond, and its write-time
	// companion, are deleted from storage (not hidden); the column's older
	// live versions, if any, stay.
	ExpireDeleted = ExpireResult(lifecycle.Deleted)
)

// String names the result ("set", "not-met").
func (r ExpireResult) String() string { return lifecycle.Result(r).String() }

type resultToOption struct{ r *ExpireResult }

func (o resultToOption) applyExpire(s *expireSettings) { s.result = o.r }

// ExpireResultTo makes Expire store what it did in *r, as
// bigtable.GetCondMutationResult does for Apply: applied alone does not
// tell a condition not met from a cell changed or absent. A call refused
// before any RPC leaves *r as it was; an RPC error stores ExpireChanged.
func ExpireResultTo(r *ExpireResult) ExpireOption { return resultToOption{r} }

// ErrCannotPersist: Persist on a family with no "forever": a sequence or
// unmanaged family, or a TTL cap that refuses longer TTLs.
var ErrCannotPersist = lifecycle.ErrCannotPersist

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
	s := expireOptions(opts)
	p, ts, err := t.expireTimestamp(row, family, column, ttl)
	if err == nil {
		err = t.checkCellAt(row, family, column, s)
	}
	if err != nil {
		return false, err
	}
	r, err := t.expireCell(ctx, row, family, column, p, ts, s)
	return r == ExpireSet, err
}

func expireOptions(opts []ExpireOption) expireSettings {
	var s expireSettings
	for _, o := range opts {
		o.applyExpire(&s)
	}
	return s
}

// checkCellAt refuses a negative ExpireCellAt.
func (t *Table) checkCellAt(row, family, column string, s expireSettings) error {
	if s.hasTS && s.ts < 0 {
		// No cell has one; its millisecond's end, 0, would read as an
		// open end and select the newest cell.
		e := t.refuse(row, family, column, fmt.Errorf("%w: ExpireCellAt(%d)", strategy.ErrBeforeEpoch, s.ts))
		e.Timestamp = s.ts
		return e
	}
	return nil
}

// expireCell moves the cell Expire, ExpireAt and Persist act on to
// target (a target not live at the table's clock deletes it) if s's
// condition holds, and stores the result where ExpireResultTo asked.
func (t *Table) expireCell(ctx context.Context, row, family, column string, p strategy.Policy, target bigtable.Timestamp, s expireSettings) (r ExpireResult, err error) {
	defer func() {
		if s.result != nil {
			*s.result = r
		}
	}()
	cells, err := t.liveCells(ctx, row, family, column, s, true)
	if err != nil {
		return ExpireChanged, err
	}
	if len(cells) == 0 {
		return ExpireNoCell, nil
	}
	c := cells[0]
	if lifecycle.Holds(s.cond, c.Timestamp, target) && target < strategy.Millis(c.Timestamp) {
		if err := t.purgeHidden(ctx, row, family, column, p); err != nil {
			return ExpireChanged, err
		}
	}
	mode := moveNoCrossing // the newest: never lifted over a value written since the read
	if s.hasTS {
		mode = moveAny // the caller named the cell
	}
	return t.expireOne(ctx, row, family, column, p, c, target, s.cond, mode)
}

// expireOne moves cell c to target when cond holds: the condition, as a
// timestamp range the pinned cell must lie in, joins the move's predicate.
func (t *Table) expireOne(ctx context.Context, row, family, column string, p strategy.Policy, c bigtable.ReadItem, target bigtable.Timestamp, cond lifecycle.Condition, mode moveMode) (ExpireResult, error) {
	cur := strategy.Millis(c.Timestamp)
	if !lifecycle.Holds(cond, cur, target) {
		return ExpireNotMet, nil
	}
	var window []bigtable.Filter
	if cond != lifecycle.Always {
		start, end, _ := lifecycle.Window(cond, target) // ok: Holds
		window = append(window, bigtable.TimestampRangeFilterMicros(start, end))
	}
	applied, kept, err := t.moveCellKept(ctx, row, family, column, c.Timestamp, c.Value, target, mode, window...)
	switch {
	case err != nil || !applied:
		return ExpireChanged, err
	case !kept: // what was sent: a target expiring in flight was still written
		return ExpireDeleted, nil
	}
	return ExpireSet, nil
}

// ExpireAt gives a cell of row the expiry at, like Redis EXPIREAT
// (HEXPIREAT's per-field answer): the column's newest live cell, or the
// one ExpireCellAt names, moves to the timestamp whose cell expires at at
// (at itself on a one-second family, at - D on a default-expiry one,
// rounded down to the millisecond), with Expire's atomic move and
// guarantees. An instant already past (at or before the table's clock, or
// within its millisecond) deletes the cell (ExpireDeleted): its
// millisecond and its write-time companion are deleted from storage in the
// same pinned conditional mutation, and the column's older live versions
// stay visible. An ExpireCondition is checked as for Expire. The cap
// (strategy.WithMaxTTL) refuses or clamps an expiry too far away, as a
// write with that TTL; an instant past the family's last timestamp is
// strategy.ErrTimestampOverflow, a future one less than D after the epoch
// (a default TTL longer than the time since the epoch)
// strategy.ErrBeforeEpoch, as Expire refuses that TTL. Other guardrails
// as for Expire.
func (t *Table) ExpireAt(ctx context.Context, row, family, column string, at time.Time, opts ...ExpireOption) (ExpireResult, error) {
	s := expireOptions(opts)
	p, err := t.lifecyclePolicy(row, family, column)
	if err == nil {
		err = t.checkCellAt(row, family, column, s)
	}
	if err != nil {
		return ExpireNoCell, err
	}
	target, past, err := lifecycle.AtTimestamp(p, t.clock.Now(), at)
	if err != nil {
		return ExpireNoCell, t.refuse(row, family, column, err)
	}
	if past {
		// Before the epoch: never live, so the move deletes. (Timestamp 0
		// is live on a family whose D is longer than the time since the
		// epoch: a move there kept the cell.)
		target = -1000
	}
	return t.expireCell(ctx, row, family, column, p, target, s)
}

// Persist removes the TTL of a cell of row, like Redis PERSIST/HPERSIST:
// the column's newest live cell, or the one ExpireCellAt names, moves to
// the largest timestamp (strategy.MaxTimestamp), which expires after the
// year 294,000 (docs/design.md#lifecycle-conditions). On a family whose
// cap clamps (strategy.ClampLonger) "forever" is the cap: the cell gets
// the cap's TTL from now, as any longer TTL does there, and keeps a TTL.
// A family whose cap refuses longer TTLs, and a sequence or unmanaged
// family, are refused with a *CellError wrapping ErrCannotPersist. A cell
// already without a TTL is ExpireNotMet (HPERSIST's -1); otherwise the
// results and guarantees are Expire's, the move never lifting the newest
// cell over a value written since the read. An ExpireCondition replaces
// the default, OnlyIfTTL.
func (t *Table) Persist(ctx context.Context, row, family, column string, opts ...ExpireOption) (ExpireResult, error) {
	s := expireSettings{cond: lifecycle.IfTTL}
	for _, o := range opts {
		o.applyExpire(&s)
	}
	if err := t.checkRowKey(row); err != nil {
		return ExpireNoCell, err
	}
	p, ok := t.policy(family)
	if !ok {
		return ExpireNoCell, t.refuse(row, family, column, ErrUnknownFamily)
	}
	if err := checkReserved(p, column); err != nil {
		return ExpireNoCell, t.refuse(row, family, column, err)
	}
	if err := t.checkCellAt(row, family, column, s); err != nil {
		return ExpireNoCell, err
	}
	target, err := lifecycle.Forever(p, t.clock.Now())
	if err != nil {
		if !p.Managed() || p.Kind() == strategy.KindSequence {
			err = fmt.Errorf("%w (%w)", err, ErrNotApplicable)
		}
		return ExpireNoCell, t.refuse(row, family, column, err)
	}
	return t.expireCell(ctx, row, family, column, p, target, s)
}

// lifecyclePolicy checks the row key, the family (an age family) and the
// column (not reserved) of a lifecycle operation.
func (t *Table) lifecyclePolicy(row, family, column string) (strategy.Policy, error) {
	if err := t.checkRowKey(row); err != nil {
		return strategy.Policy{}, err
	}
	p, err := t.agePolicy(family)
	if err != nil {
		return p, t.refuse(row, family, column, err)
	}
	if err := checkReserved(p, column); err != nil {
		return p, t.refuse(row, family, column, err)
	}
	return p, nil
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
func (t *Table) ExpireColumn(ctx context.Context, row, family, column string, ttl time.Duration, opts ...ExpireColumnOption) (moved int, err error) {
	if _, _, err := t.expireTimestamp(row, family, column, ttl); err != nil {
		return 0, err
	}
	s := columnOptions(opts)
	cells, err := t.liveCells(ctx, row, family, column, s, false)
	if err != nil {
		return 0, err
	}
	return t.expireCells(ctx, row, family, column, cells, ttl, s.cond)
}

// ExpireRow gives every live cell of row's age families (one-second and
// default-expiry) a new TTL, column by column as ExpireColumn does; cells
// of sequence and unmanaged families are left alone. A table without an
// age family gets ErrNotApplicable. moved counts the cells given the new
// TTL, as ExpireColumn does. Refusals come before the first move; an RPC
// error stops the call, with the cells moved until then counted.
func (t *Table) ExpireRow(ctx context.Context, row string, ttl time.Duration, opts ...ExpireColumnOption) (moved int, err error) {
	cond := columnOptions(opts).cond
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
			n, err := t.expireCells(ctx, row, fam, column, items[i:j], ttl, cond)
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
func (t *Table) expireCells(ctx context.Context, row, family, column string, cells []bigtable.ReadItem, ttl time.Duration, cond lifecycle.Condition) (int, error) {
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
			// Before the epoch: deleted (a target before the epoch is never
			// live) when its new expiry is past; else the earliest
			// timestamp, 0 (live on a family whose D is longer than the
			// time since the epoch, which expires it later than asked
			// rather than lose a live cell).
			if p.ExpiryTime(target).After(t.clock.Now()) {
				target = 0
			} else {
				target = -1000
			}
		}
		r, err := t.expireOne(ctx, row, family, column, p, c, target, cond, moveNoCrossing)
		if err != nil {
			return moved, err
		}
		if r == ExpireSet || r == ExpireDeleted {
			moved++
		}
	}
	return moved, nil
}

func columnOptions(opts []ExpireColumnOption) expireSettings {
	var s expireSettings
	for _, o := range opts {
		o.applyExpireColumn(&s)
	}
	return s
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

// SetKeepTTL writes value to family:column of row keeping the TTL of the
// column's newest live cell, like Redis SET ... KEEPTTL: the new value
// takes that cell's timestamp, replacing it, in one conditional row
// mutation whose predicate pins the cell (column, millisecond, value) and
// requires it to be still the column's newest, so a concurrent write is
// never overwritten and a concurrent Expire or refresh is never undone
// (ExpireChanged, nothing written). With no live cell nothing is written
// and the result is ExpireNoCell: unlike KEEPTTL on a missing key, which
// creates a key without a TTL, bttl does not pick a TTL the caller did not
// ask for (docs/design.md#lifecycle-conditions). On a single-value family
// the column's other stored cells are deleted as a write's are; on a
// write-time family the companion records this write's time. A cell that
// expires at the table's clock before the mutation is sent is not
// replaced (ExpireNoCell). Guardrails: an age family, a column not
// reserved, a value within MaxValueBytes and small enough, with the old
// one, to pin (filters.ErrCellTooLargeToPin is about the cell read).
func (t *Table) SetKeepTTL(ctx context.Context, row, family, column string, value []byte) (ExpireResult, error) {
	p, err := t.lifecyclePolicy(row, family, column)
	if err != nil {
		return ExpireNoCell, err
	}
	if len(value) > MaxValueBytes {
		return ExpireNoCell, t.refuse(row, family, column, fmt.Errorf("%w: %d bytes", ErrValueTooLarge, len(value)))
	}
	cells, err := t.liveCells(ctx, row, family, column, expireSettings{}, true)
	if err != nil || len(cells) == 0 {
		return ExpireNoCell, err
	}
	c := cells[0]
	ms := strategy.Millis(c.Timestamp)
	pin, err := filters.Cell(family, column, ms, c.Value)
	if err != nil {
		e := t.refuse(row, family, column, err)
		e.Timestamp = c.Timestamp
		return ExpireNoCell, e
	}
	if ms < strategy.MaxTimestamp {
		pin = bigtable.ConditionFilter(newerCells(family, column, ms), bigtable.BlockAllFilter(), pin)
	}
	now := t.now()
	if !p.IsLive(ms, now) {
		return ExpireNoCell, nil
	}
	m := lifecycle.KeepTTLMutation(p, family, column, ms, value, now)
	var applied bool
	if err := t.transact("CheckAndMutateRow", func(tbl bigtable.TableAPI) error {
		return tbl.Apply(t.wire(ctx), row, bigtable.NewCondMutation(pin, m, nil), bigtable.GetCondMutationResult(&applied))
	}); err != nil {
		return ExpireChanged, err
	}
	if !applied {
		return ExpireChanged, nil
	}
	return ExpireSet, nil
}

// MaxWriteTime is the newest write time of row's live cells of family,
// or of the named columns only, like Cassandra 5's MAXWRITETIME: the
// largest write-time companion among the cells a read through the table
// returns (live, and the newest n of a max-versions family). One raw read
// of the family's live range, so the answer is one instant of the row,
// whatever moves concurrently. family must record write times
// (strategy.WithWriteTime), else a *CellError wrapping ErrNotApplicable;
// no such live cell with a companion is ErrNoWriteTime.
func (t *Table) MaxWriteTime(ctx context.Context, row, family string, columns ...string) (time.Time, error) {
	if err := t.checkRowKey(row); err != nil {
		return time.Time{}, err
	}
	p, err := t.agePolicy(family)
	if err == nil && !p.HasWriteTime() {
		err = fmt.Errorf("%w: family %q does not record write times (strategy.WithWriteTime)", ErrNotApplicable, family)
	}
	if err != nil {
		return time.Time{}, t.readError(row, family, "", 0, err)
	}
	now := t.now()
	if p.AllExpired(now) {
		return time.Time{}, t.readError(row, family, "", 0, ErrNoWriteTime)
	}
	r, err := t.raw.ReadRow(t.wire(ctx), row, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, "", ""),
		bigtable.TimestampRangeFilterMicros(p.LiveFrom(now), 0),
	)))
	if err != nil {
		return time.Time{}, err
	}
	wt, ok := lifecycle.MaxWriteTime(p, family, r[family], columns)
	if !ok {
		return time.Time{}, t.readError(row, family, "", 0, ErrNoWriteTime)
	}
	return time.UnixMicro(int64(wt)).UTC(), nil
}

// ReadRowAndExpire reads row, like Redis GETEX/HGETEX with a TTL, and
// gives the cells it returns of the age families the TTL ttl, atomically:
// one read through the table (the TTL filter, then filter when not nil),
// then one CheckAndMutateRow moving, for each column, the newest cell
// returned to the timestamp a write with ttl gets now (older versions
// returned keep their TTL, as with time-to-idle). Its predicate pins every
// such cell (column, millisecond, value), requires each to be still its
// column's newest and each lower target millisecond to be empty: a write,
// Expire, delete or refresh since the read makes the whole move not apply
// (ExpireChanged, nothing changed: read again), so no concurrent write is
// overwritten or hidden and no dead cell revived. It returns the row as
// read (the timestamps before the move) and ExpireSet, or ExpireNoCell
// when no age-family cell was returned (nothing sent). Sequence and
// unmanaged families' cells are returned and left alone. The reads do not
// count as use for time-to-idle (this is the use, synchronous).
// Refusals before any write, for the whole row: a TTL a returned family
// refuses (cap, overflow, below 1ms), cells too large to pin together
// (filters.ErrCellTooLargeToPin).
func (t *Table) ReadRowAndExpire(ctx context.Context, row string, filter bigtable.Filter, ttl time.Duration) (bigtable.Row, ExpireResult, error) {
	return t.readRowAndMove(ctx, row, filter, false, func(p strategy.Policy) (bigtable.Timestamp, error) {
		return p.WriteTimestamp(t.clock.Now(), ttl)
	})
}

// ReadRowAndPersist is ReadRowAndExpire removing the TTL of the cells it
// returns (GETEX ... PERSIST), as Persist does: each moves to the largest
// timestamp, or the cap on a clamping family; a returned family where
// "forever" has no meaning refuses the call (ErrCannotPersist). A cell
// already without a TTL stays where it is, on a clamping family too.
func (t *Table) ReadRowAndPersist(ctx context.Context, row string, filter bigtable.Filter) (bigtable.Row, ExpireResult, error) {
	return t.readRowAndMove(ctx, row, filter, true, func(p strategy.Policy) (bigtable.Timestamp, error) {
		return lifecycle.Forever(p, t.clock.Now())
	})
}

func (t *Table) readRowAndMove(ctx context.Context, row string, filter bigtable.Filter, persist bool, target func(strategy.Policy) (bigtable.Timestamp, error)) (bigtable.Row, ExpireResult, error) {
	if err := t.checkRowKey(row); err != nil {
		return nil, ExpireNoCell, err
	}
	r, err := t.raw.ReadRow(t.wire(ctx), row, bigtable.RowFilter(t.filters.Compose(t.now(), filter)))
	if err != nil {
		return nil, ExpireNoCell, err
	}
	moves, fam, err := lifecycle.PlanRowMove(r, t.policy, target)
	if err != nil {
		return r, ExpireNoCell, t.refuse(row, fam, "", err)
	}
	if persist {
		// A cell already without a TTL stays where it is (Persist's XX):
		// on a clamping family "forever" is the cap, which would give it
		// one.
		kept := moves[:0]
		for _, mv := range moves {
			if lifecycle.HasTTL(mv.TS) {
				kept = append(kept, mv)
			}
		}
		moves = kept
	}
	if len(moves) == 0 {
		for fam := range r {
			if _, err := t.agePolicy(fam); err == nil {
				return r, ExpireSet, nil // every age cell already at its target
			}
		}
		return r, ExpireNoCell, nil // no age-family cell (sequence and unmanaged ones are left alone)
	}
	if _, _, err := lifecycle.RowMove(moves); err != nil { // the size, before any write
		return r, ExpireNoCell, t.refuse(row, moves[0].Family, "", err)
	}
	for _, mv := range moves {
		if p, _ := t.policy(mv.Family); mv.Target < mv.TS {
			if err := t.purgeHidden(ctx, row, mv.Family, mv.Column, p); err != nil {
				return r, ExpireChanged, err
			}
		}
	}
	for i := range moves {
		mv := &moves[i]
		if mv.WriteTime {
			if mv.Companion, err = t.readCompanion(ctx, row, mv.Family, mv.Column, mv.TS); err != nil {
				return r, ExpireChanged, err
			}
		}
	}
	now := t.now()
	for i := range moves {
		p, _ := t.policy(moves[i].Family)
		if !p.IsLive(moves[i].TS, now) {
			return r, ExpireChanged, nil // expired since the read: not revived
		}
		moves[i].Keep = p.IsLive(moves[i].Target, now)
	}
	pred, m, err := lifecycle.RowMove(moves)
	if err != nil {
		return r, ExpireNoCell, t.refuse(row, moves[0].Family, "", err)
	}
	var applied bool
	if err := t.transact("CheckAndMutateRow", func(tbl bigtable.TableAPI) error {
		return tbl.Apply(t.wire(ctx), row, bigtable.NewCondMutation(pred, m, nil), bigtable.GetCondMutationResult(&applied))
	}); err != nil {
		return r, ExpireChanged, err
	}
	if !applied {
		return r, ExpireChanged, nil
	}
	return r, ExpireSet, nil
}
