package lifecycle

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
)

// Ops runs the lifecycle operations on one table. ttlclient's Table
// supplies what they need of it (its policies, clock and read filter, a
// raw read and a conditional mutation sent on its wire context, its
// refusals) and its exported methods are thin wrappers of these.
type Ops struct {
	// Policy is the policy of family (the table's rules: unlisted
	// families included), and whether it has one.
	Policy func(family string) (strategy.Policy, bool)
	// Schema is the table's listed families (ExpireRow's families).
	Schema  strategy.Schema
	Clock   strategy.Clock
	Filters *filters.Builder
	// ReadRow reads row from the raw table with filter (nil: none), on
	// the table's wire context.
	ReadRow func(ctx context.Context, row string, filter bigtable.Filter) (bigtable.Row, error)
	// CheckAndMutate applies the conditional mutation m to row: through
	// ttlclient's Table.transact, the one path of every CheckAndMutateRow.
	CheckAndMutate func(ctx context.Context, row string, m *bigtable.Mutation, opts ...bigtable.ApplyOption) error
	// CheckRowKey refuses a row key no write may have.
	CheckRowKey func(row string) error
	// Refuse is a refused operation on the cell c: counted as a refusal.
	Refuse func(c Cell, err error) error
	// ReadError is an error about the cell c, which was read: not a
	// refusal.
	ReadError func(c Cell, err error) error
}

// Cell names the cell an error is about, for ttlclient's *CellError.
type Cell struct {
	Row, Family, Column string
	Timestamp           bigtable.Timestamp
	TTL                 time.Duration
	Named               bool // the message names the family even when it is ""
}

// Settings are an expire's options (ttlclient's ExpireOption and
// ExpireColumnOption).
type Settings struct {
	TS     bigtable.Timestamp // ExpireCellAt's, when HasTS
	HasTS  bool
	Cond   Condition
	Result *Result // ExpireResultTo's
	// Lengthen makes the move apply only to a cell expiring no later
	// than the target (Persist on a clamping family, where "forever" is
	// the cap: a cell living longer is not shortened to it).
	Lengthen bool
	// OnCell gets each cell's result, for ExpireColumn and ExpireRow
	// (ttlclient's ExpireResultsTo): the cell's timestamp as read (0 for
	// a column without a live cell, NoCell).
	OnCell func(family, column string, ts bigtable.Timestamp, r Result)
}

// now is the clock in microseconds. UnixMicro, unlike bigtable.Time, stays
// exact past the year 2262.
func (o *Ops) now() bigtable.Timestamp { return bigtable.Timestamp(o.Clock.Now().UnixMicro()) }

// AgePolicy is p, the policy of a family for a lifecycle operation
// (ok: the table has it), when it is an age family; else ErrUnknownFamily
// or ErrNotApplicable.
func AgePolicy(p strategy.Policy, ok bool) (strategy.Policy, error) {
	if !ok {
		return p, rules.ErrUnknownFamily
	}
	if k := p.Kind(); k != strategy.KindOneSecond && k != strategy.KindDefaultExpiry {
		return p, fmt.Errorf("%w: a %s family's cells do not expire by age", rules.ErrNotApplicable, k)
	}
	return p, nil
}

func (o *Ops) agePolicy(family string) (strategy.Policy, error) { return AgePolicy(o.Policy(family)) }

// itemPolicy is the age policy of the family of a read item.
func (o *Ops) itemPolicy(item bigtable.ReadItem) (strategy.Policy, error) {
	family, column, ok := strings.Cut(item.Column, ":")
	if !ok {
		return strategy.Policy{}, o.ReadError(Cell{Row: item.Row, Column: item.Column, Timestamp: item.Timestamp}, fmt.Errorf("%w: the column is not family:qualifier", rules.ErrUnknownFamily))
	}
	p, err := o.agePolicy(family)
	if err != nil {
		return p, o.ReadError(Cell{Row: item.Row, Family: family, Column: column, Timestamp: item.Timestamp}, err)
	}
	return p, nil
}

// Expiry is ttlclient's Table.Expiry.
func (o *Ops) Expiry(item bigtable.ReadItem) (time.Time, error) {
	p, err := o.itemPolicy(item)
	if err != nil {
		return time.Time{}, err
	}
	return p.ExpiryTime(item.Timestamp), nil
}

// RemainingTTL is ttlclient's Table.RemainingTTL.
func (o *Ops) RemainingTTL(item bigtable.ReadItem) (time.Duration, error) {
	exp, err := o.Expiry(item)
	if err != nil {
		return 0, err
	}
	now := o.Clock.Now()
	left := exp.Sub(now) // saturates: checked below
	if left == math.MaxInt64 && exp.After(now.Add(left)) {
		family, column, _ := strings.Cut(item.Column, ":")
		return left, o.ReadError(Cell{Row: item.Row, Family: family, Column: column, Timestamp: item.Timestamp},
			fmt.Errorf("%w: the cell expires at %s, more than %s after now", strategy.ErrTimestampOverflow, exp.UTC().Format(time.RFC3339), left))
	}
	return left, nil
}

// expireTimestamp checks a lifecycle write: row key, family, column and
// TTL, with the same guardrails as a write with SetTTL(..., ttl, ...) (cap,
// overflow, below 1ms), and returns the policy and the timestamp a cell
// given ttl now gets.
func (o *Ops) expireTimestamp(row, family, column string, ttl time.Duration) (strategy.Policy, bigtable.Timestamp, error) {
	if err := o.CheckRowKey(row); err != nil {
		return strategy.Policy{}, 0, err
	}
	p, err := o.agePolicy(family)
	if err != nil {
		return p, 0, o.Refuse(Cell{Row: row, Family: family, Column: column, TTL: ttl}, err)
	}
	if err := checkReserved(p, column); err != nil {
		return p, 0, o.Refuse(Cell{Row: row, Family: family, Column: column}, err)
	}
	ts, err := p.WriteTimestamp(o.Clock.Now(), ttl)
	if err != nil {
		return p, 0, o.Refuse(Cell{Row: row, Family: family, Column: column, TTL: ttl}, err)
	}
	return p, ts, nil
}

// checkReserved refuses a column holding write-time companions.
func checkReserved(p strategy.Policy, column string) error {
	if p.Reserved(column) {
		return rules.ErrReservedColumn // the *CellError names the column
	}
	return nil
}

// liveCells reads family:column's live cells of row, newest first, through
// the TTL filter (so an expired cell is never found, and never revived),
// restricted to the millisecond of ts when one is given.
func (o *Ops) liveCells(ctx context.Context, row, family, column string, s Settings, latest bool) ([]bigtable.ReadItem, error) {
	f := []bigtable.Filter{bigtable.ColumnRangeFilter(family, column, column+"\x00")}
	if s.HasTS {
		f = append(f, bigtable.TimestampRangeFilterMicros(strategy.Millis(s.TS), strategy.MilliEnd(s.TS)))
	}
	if latest {
		f = append(f, bigtable.LatestNFilter(1))
	}
	var user bigtable.Filter = f[0]
	if len(f) > 1 {
		user = bigtable.ChainFilters(f...)
	}
	r, err := o.ReadRow(ctx, row, o.Filters.Compose(o.now(), user))
	if err != nil {
		return nil, err
	}
	return r[family], nil
}

// Expire is ttlclient's Table.Expire.
func (o *Ops) Expire(ctx context.Context, row, family, column string, ttl time.Duration, s Settings) (applied bool, err error) {
	p, ts, err := o.expireTimestamp(row, family, column, ttl)
	if err == nil {
		err = o.checkCellAt(row, family, column, s)
	}
	if err != nil {
		return false, err
	}
	r, err := o.expireCell(ctx, row, family, column, p, ts, s)
	return r == Set, err
}

// checkCellAt refuses a negative ExpireCellAt.
func (o *Ops) checkCellAt(row, family, column string, s Settings) error {
	if s.HasTS && s.TS < 0 {
		// No cell has one; its millisecond's end, 0, would read as an
		// open end and select the newest cell.
		return o.Refuse(Cell{Row: row, Family: family, Column: column, Timestamp: s.TS}, fmt.Errorf("%w: ExpireCellAt(%d)", strategy.ErrBeforeEpoch, s.TS))
	}
	return nil
}

// expireCell moves the cell Expire, ExpireAt and Persist act on to
// target (a target not live at the table's clock deletes it) if s's
// condition holds, and stores the result where ExpireResultTo asked.
func (o *Ops) expireCell(ctx context.Context, row, family, column string, p strategy.Policy, target bigtable.Timestamp, s Settings) (r Result, err error) {
	defer func() {
		if s.Result != nil {
			*s.Result = r
		}
	}()
	cells, err := o.liveCells(ctx, row, family, column, s, true)
	if err != nil {
		return Changed, err
	}
	if len(cells) == 0 {
		return NoCell, nil
	}
	c := cells[0]
	if Holds(s.Cond, c.Timestamp, target) && !s.Lengthen && target < strategy.Millis(c.Timestamp) {
		if err := o.purgeHidden(ctx, row, family, column, p); err != nil {
			return Changed, err
		}
	}
	mode := MoveNoCrossing // the newest: never lifted over a value written since the read
	if s.HasTS {
		mode = MoveAny // the caller named the cell
	}
	return o.expireOne(ctx, row, family, column, p, c, target, s, mode)
}

// expireOne moves cell c to target when cond holds: the condition, as a
// timestamp range the pinned cell must lie in, joins the move's predicate.
func (o *Ops) expireOne(ctx context.Context, row, family, column string, p strategy.Policy, c bigtable.ReadItem, target bigtable.Timestamp, s Settings, mode MoveMode) (Result, error) {
	cur := strategy.Millis(c.Timestamp)
	if !Holds(s.Cond, cur, target) || (s.Lengthen && cur > strategy.Millis(target)) {
		return NotMet, nil
	}
	var window []bigtable.Filter
	if s.Cond != Always {
		start, end, _ := Window(s.Cond, target) // ok: Holds
		window = append(window, bigtable.TimestampRangeFilterMicros(start, end))
	}
	if s.Lengthen {
		window = append(window, bigtable.TimestampRangeFilterMicros(0, strategy.MilliEnd(target)))
	}
	applied, kept, err := o.MoveCellKept(ctx, row, family, column, c.Timestamp, c.Value, target, mode, window...)
	switch {
	case err != nil || !applied:
		return Changed, err
	case !kept: // what was sent: a target expiring in flight was still written
		return Deleted, nil
	}
	return Set, nil
}

// ExpireAt is ttlclient's Table.ExpireAt.
func (o *Ops) ExpireAt(ctx context.Context, row, family, column string, at time.Time, s Settings) (Result, error) {
	p, err := o.lifecyclePolicy(row, family, column)
	if err == nil {
		err = o.checkCellAt(row, family, column, s)
	}
	if err != nil {
		return NoCell, err
	}
	target, past, err := AtTimestamp(p, o.Clock.Now(), at)
	if err != nil {
		return NoCell, o.Refuse(Cell{Row: row, Family: family, Column: column}, err)
	}
	if past {
		// Before the epoch: never live, so the move deletes. (Timestamp 0
		// is live on a family whose D is longer than the time since the
		// epoch: a move there kept the cell.)
		target = -1000
	}
	return o.expireCell(ctx, row, family, column, p, target, s)
}

// Persist is ttlclient's Table.Persist; s's condition replaces the
// default, IfTTL, when the caller gave one.
func (o *Ops) Persist(ctx context.Context, row, family, column string, s Settings) (Result, error) {
	if err := o.CheckRowKey(row); err != nil {
		return NoCell, err
	}
	p, ok := o.Policy(family)
	if !ok {
		return NoCell, o.Refuse(Cell{Row: row, Family: family, Column: column}, rules.ErrUnknownFamily)
	}
	if err := checkReserved(p, column); err != nil {
		return NoCell, o.Refuse(Cell{Row: row, Family: family, Column: column}, err)
	}
	if err := o.checkCellAt(row, family, column, s); err != nil {
		return NoCell, err
	}
	target, err := Forever(p, o.Clock.Now())
	if err != nil {
		if !p.Managed() || p.Kind() == strategy.KindSequence {
			err = fmt.Errorf("%w (%w)", err, rules.ErrNotApplicable)
		}
		return NoCell, o.Refuse(Cell{Row: row, Family: family, Column: column}, err)
	}
	limit, _ := p.TTLCap()
	s.Lengthen = limit > 0 // "forever" is the cap: never shorten to it
	return o.expireCell(ctx, row, family, column, p, target, s)
}

// lifecyclePolicy checks the row key, the family (an age family) and the
// column (not reserved) of a lifecycle operation.
func (o *Ops) lifecyclePolicy(row, family, column string) (strategy.Policy, error) {
	if err := o.CheckRowKey(row); err != nil {
		return strategy.Policy{}, err
	}
	p, err := o.agePolicy(family)
	if err != nil {
		return p, o.Refuse(Cell{Row: row, Family: family, Column: column}, err)
	}
	if err := checkReserved(p, column); err != nil {
		return p, o.Refuse(Cell{Row: row, Family: family, Column: column}, err)
	}
	return p, nil
}
