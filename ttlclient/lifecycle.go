package ttlclient

import (
	"context"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/lifecycle"
	"github.com/bttl/bttl/internal/rules"
)

// The lifecycle operations run in internal/lifecycle (lifecycle.Ops): these
// methods are their documented face.

// newLifecycle is what the lifecycle operations need of t.
func (t *Table) newLifecycle() *lifecycle.Ops {
	return &lifecycle.Ops{
		Policy:  t.rules.Policy,
		Schema:  t.schema,
		Clock:   t.clock,
		Filters: t.filters,
		ReadRow: func(ctx context.Context, row string, filter bigtable.Filter) (bigtable.Row, error) {
			return t.raw.ReadRow(t.wire(ctx), row, bigtable.RowFilter(filter))
		},
		CheckAndMutate: func(ctx context.Context, row string, m *bigtable.Mutation, opts ...bigtable.ApplyOption) error {
			return t.transact("CheckAndMutateRow", func(tbl bigtable.TableAPI) error {
				return tbl.Apply(t.wire(ctx), row, m, opts...)
			})
		},
		CheckRowKey: t.checkRowKey,
		Refuse: func(c lifecycle.Cell, err error) error {
			e := t.refuse(c.Row, c.Family, c.Column, err)
			e.Timestamp, e.TTL, e.named = c.Timestamp, c.TTL, c.Named
			return e
		},
		ReadError: func(c lifecycle.Cell, err error) error {
			return &CellError{Table: t.name, Row: c.Row, Family: c.Family, Column: c.Column, Timestamp: c.Timestamp, Err: err, text: t.keyText}
		},
	}
}

// Expiry is the instant the cell item stops being live, by its family's
// policy: its timestamp on a one-second family, timestamp + D on a
// default-expiry one. item is a cell read through this table (its Column
// is "family:qualifier"). It makes no RPC and allocates nothing; a sequence
// or unmanaged family's cell is a *CellError wrapping ErrNotApplicable. The
// instant is exact to the microsecond for any timestamp, past the year 2262
// too (no conversion goes through nanoseconds since the epoch).
func (t *Table) Expiry(item bigtable.ReadItem) (time.Time, error) {
	return t.life.Expiry(item)
}

// RemainingTTL is how long the cell item has left at the table's clock:
// Expiry minus now, like Redis PTTL, exact. It is zero or negative for a
// cell expired since it was read. An expiry more than the largest
// time.Duration (about 292 years) away is a *CellError wrapping
// strategy.ErrTimestampOverflow, returned with that largest Duration (use Expiry
// for such a cell). Other errors as for Expiry.
func (t *Table) RemainingTTL(item bigtable.ReadItem) (time.Duration, error) {
	return t.life.RemainingTTL(item)
}

// ExpireOption adjusts Expire, ExpireAt and Persist: ExpireCellAt, an
// ExpireCondition, ExpireResultTo. As with the bigtable client's options,
// of two options setting the same thing the last wins.
type ExpireOption interface{ applyExpire(*lifecycle.Settings) }

// ExpireColumnOption adjusts ExpireColumn, ExpireColumnAt, ExpireRow and
// ExpireRowAt: an ExpireCondition, checked for each cell, and
// ExpireResultsTo.
type ExpireColumnOption interface{ applyExpireColumn(*lifecycle.Settings) }

// ExpireCellResult is what ExpireColumn, ExpireColumnAt, ExpireRow or
// ExpireRowAt did to one cell (HEXPIRE's per-field answer): the cell's
// family, column and timestamp as read, and the result.
type ExpireCellResult struct {
	Family, Column string
	// Timestamp is the cell's before the call; 0 with ExpireNoCell.
	Timestamp bigtable.Timestamp
	Result    ExpireResult
}

type resultsToOption struct{ rs *[]ExpireCellResult }

func (o resultsToOption) applyExpireColumn(s *lifecycle.Settings) {
	*o.rs = nil
	s.OnCell = func(family, column string, ts bigtable.Timestamp, r lifecycle.Result) {
		*o.rs = append(*o.rs, ExpireCellResult{Family: family, Column: column, Timestamp: ts, Result: ExpireResult(r)})
	}
}

// ExpireResultsTo makes ExpireColumn, ExpireColumnAt, ExpireRow and
// ExpireRowAt store in *rs what they did to each cell, in the order they
// acted, as Redis HEXPIRE answers per field; a column without a live cell
// has one ExpireNoCell entry with timestamp 0. *rs is replaced (nil when
// the call is refused before any RPC).
func ExpireResultsTo(rs *[]ExpireCellResult) ExpireColumnOption { return resultsToOption{rs} }

type cellAtOption bigtable.Timestamp

func (o cellAtOption) applyExpire(s *lifecycle.Settings) { s.TS, s.HasTS = bigtable.Timestamp(o), true }

// ExpireCellAt makes Expire act on the live cell stored at timestamp ts
// (its millisecond), as read through the table, instead of the column's
// newest live cell. A negative ts (bigtable.ServerTime included) is refused
// (strategy.ErrBeforeEpoch).
func ExpireCellAt(ts bigtable.Timestamp) ExpireOption { return cellAtOption(ts) }

// ExpireCondition makes an expire apply only when it holds, like Redis
// EXPIRE's NX, XX, GT and LT flags, comparing the cell's current expiry
// with the new one; a cell without a TTL counts as expiring last. It is
// part of the conditional mutation's predicate, so the server decides it
// on the cell it stores (docs/design.md#lifecycle-conditions). A cell it
// does not hold for is left alone (ExpireNotMet).
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

func (c ExpireCondition) applyExpire(s *lifecycle.Settings)       { s.Cond = lifecycle.Condition(c) }
func (c ExpireCondition) applyExpireColumn(s *lifecycle.Settings) { s.Cond = lifecycle.Condition(c) }

// String is the condition's Redis flags ("NX", "XX LT").
func (c ExpireCondition) String() string { return lifecycle.Condition(c).String() }

// ExpireResult is what a lifecycle operation did to one cell, numbered as
// Redis HEXPIRE answers where it has a counterpart.
type ExpireResult int8

const (
	// ExpireChanged: the cell changed between the read and the conditional
	// mutation (rewritten, moved, deleted, collected or expired), or the
	// move would have overwritten or lifted it over a concurrent write:
	// nothing changed; read again and retry if needed.
	ExpireChanged = ExpireResult(lifecycle.Changed)
	// ExpireNoCell: no live cell to act on (HEXPIRE's -2).
	ExpireNoCell = ExpireResult(lifecycle.NoCell)
	// ExpireNotMet: the condition does not hold, or Persist found no TTL
	// to remove (HEXPIRE's 0, HPERSIST's -1); nothing sent.
	ExpireNotMet = ExpireResult(lifecycle.NotMet)
	// ExpireSet: the cell has the new expiry (HEXPIRE's 1): moved, or
	// already there (nothing sent).
	ExpireSet = ExpireResult(lifecycle.Set)
	// ExpireDeleted: the instant was already past, and the cell and its
	// write-time companion were deleted from storage (HEXPIRE's 2); the
	// column's older live versions stay.
	ExpireDeleted = ExpireResult(lifecycle.Deleted)
)

// String names the result ("set", "not-met").
func (r ExpireResult) String() string { return lifecycle.Result(r).String() }

type resultToOption struct{ r *ExpireResult }

func (o resultToOption) applyExpire(s *lifecycle.Settings) { s.Result = (*lifecycle.Result)(o.r) }

// ExpireResultTo makes Expire store what it did in *r, as
// bigtable.GetCondMutationResult does for Apply: applied alone does not
// tell a condition not met from a cell changed or absent. A call refused
// before any RPC leaves *r as it was; an RPC error stores ExpireChanged.
func ExpireResultTo(r *ExpireResult) ExpireOption { return resultToOption{r} }

// ErrCannotPersist: Persist on a family with no "forever": a sequence or
// unmanaged family, or a TTL cap that refuses longer TTLs.
var ErrCannotPersist = lifecycle.ErrCannotPersist

// Expire gives a cell of row a new TTL, like Redis EXPIRE: the column's
// newest live cell, or the one ExpireCellAt names, moves to the timestamp
// a write with SetTTL(..., ttl, ...) gets now, in one atomic conditional
// row mutation whose predicate pins the exact cell: a concurrent write is
// never overwritten, deleted or hidden, and a cell expired at the table's
// clock before the mutation is sent is not moved (docs/design.md#expire).
// applied is true when the cell has the new TTL (moved, or already at its
// target: nothing sent), false when no live cell was found or it changed
// before the mutation ran. ttl may extend or shorten the TTL.
//
// The guardrails are a write's (a TTL below 1ms, over the cap or
// overflowing; a sequence or unmanaged family, ErrNotApplicable), and a
// value too large to pin (filters.ErrCellTooLargeToPin), refused with a
// *CellError before any write. It costs one read and one
// CheckAndMutateRow (and a read of the write-time companion, which moves
// too, on a family with strategy.WithWriteTime).
func (t *Table) Expire(ctx context.Context, row, family, column string, ttl time.Duration, opts ...ExpireOption) (applied bool, err error) {
	return t.life.Expire(ctx, row, family, column, ttl, expireOptions(lifecycle.Settings{}, opts))
}

// ExpireAt gives a cell of row the expiry at, like Redis EXPIREAT, with
// Expire's atomic move and guarantees: the cell moves to the timestamp
// whose cell expires at at. An instant already past deletes the cell from
// storage, its write-time companion too (ExpireDeleted), older versions
// staying; an instant at or before the Unix epoch (the zero time.Time) is
// refused before any RPC (strategy.ErrBeforeEpoch), as by every instant
// form. The cap refuses or clamps an expiry too far away, as a write with
// that TTL; an instant past the family's last timestamp is
// strategy.ErrTimestampOverflow (docs/design.md#lifecycle-conditions).
func (t *Table) ExpireAt(ctx context.Context, row, family, column string, at time.Time, opts ...ExpireOption) (ExpireResult, error) {
	r, err := t.life.ExpireAt(ctx, row, family, column, at, expireOptions(lifecycle.Settings{}, opts))
	return ExpireResult(r), err
}

// Persist removes the TTL of a cell of row, like Redis PERSIST: the
// column's newest live cell, or the one ExpireCellAt names, moves to the
// largest timestamp (strategy.MaxTimestamp), with Expire's guarantees. On
// a family whose cap clamps, "forever" is the cap, and a cell already
// living longer is never shortened to it (ExpireNotMet); a family whose
// cap refuses, and a sequence or unmanaged family, are a *CellError
// wrapping ErrCannotPersist. A cell already without a TTL is ExpireNotMet
// (HPERSIST's -1). An ExpireCondition replaces the default, OnlyIfTTL
// (docs/design.md#persist).
func (t *Table) Persist(ctx context.Context, row, family, column string, opts ...ExpireOption) (ExpireResult, error) {
	r, err := t.life.Persist(ctx, row, family, column, expireOptions(lifecycle.Settings{Cond: lifecycle.IfTTL}, opts))
	return ExpireResult(r), err
}

// ExpireColumn gives every live cell of family:column a new TTL: the
// newest gets ttl, as with Expire, and each older one moves by the same
// amount, keeping the versions' order and spacing (one shifted into the
// past is deleted). Each cell moves in its own atomic conditional
// mutation with Expire's guarantees; moved counts the cells given the new
// TTL, those already at their target included. Refusals as for Expire,
// before the first move; an RPC error stops the call, with the cells moved
// until then counted.
func (t *Table) ExpireColumn(ctx context.Context, row, family, column string, ttl time.Duration, opts ...ExpireColumnOption) (moved int, err error) {
	return t.life.ExpireColumn(ctx, row, family, column, ttl, columnOptions(opts))
}

// ExpireRow gives every live cell of row's age families (one-second and
// default-expiry) a new TTL, column by column as ExpireColumn does; cells
// of sequence and unmanaged families are left alone, and a table without
// an age family gets ErrNotApplicable. moved and errors as ExpireColumn's.
func (t *Table) ExpireRow(ctx context.Context, row string, ttl time.Duration, opts ...ExpireColumnOption) (moved int, err error) {
	return t.life.ExpireRow(ctx, row, ttl, columnOptions(opts))
}

// ExpireColumnAt is ExpireColumn to an instant, like Redis HEXPIREAT on
// every version: the newest live cell gets the expiry at, as ExpireAt
// gives it, and each older one moves by the same amount. An instant
// already past deletes every live cell of the column (ExpireDeleted each).
// moved counts the cells set or deleted; refusals are ExpireAt's.
func (t *Table) ExpireColumnAt(ctx context.Context, row, family, column string, at time.Time, opts ...ExpireColumnOption) (moved int, err error) {
	return t.life.ExpireColumnAt(ctx, row, family, column, at, columnOptions(opts))
}

// ExpireRowAt is ExpireRow to an instant, column by column as
// ExpireColumnAt does. An instant one of the table's age families refuses
// refuses the call before any RPC.
func (t *Table) ExpireRowAt(ctx context.Context, row string, at time.Time, opts ...ExpireColumnOption) (moved int, err error) {
	return t.life.ExpireRowAt(ctx, row, at, columnOptions(opts))
}

// SetKeepTTL writes value to family:column of row keeping the TTL of the
// column's newest live cell, like Redis SET ... KEEPTTL: the value takes
// that cell's timestamp in one conditional row mutation pinning the cell
// as the column's newest, so a concurrent write, Expire or refresh is
// never undone (ExpireChanged, nothing written). With no live cell nothing
// is written (ExpireNoCell): bttl does not pick a TTL the caller did not
// ask for (docs/design.md#lifecycle-conditions). The family's write rules
// apply (single-value deletes, the write-time companion). Refusals: not an
// age family, a reserved column, a value over MaxValueBytes, cells too
// large to pin (filters.ErrCellTooLargeToPin).
func (t *Table) SetKeepTTL(ctx context.Context, row, family, column string, value []byte) (ExpireResult, error) {
	r, err := t.life.SetKeepTTL(ctx, row, family, column, value)
	return ExpireResult(r), err
}

// MaxWriteTime is the newest write time of row's live cells of family, or
// of the named columns only, like Cassandra 5's MAXWRITETIME, from one
// read of the family's live range. family must record write times
// (strategy.WithWriteTime), else a *CellError wrapping ErrNotApplicable;
// no live cell with a companion is ErrNoWriteTime.
func (t *Table) MaxWriteTime(ctx context.Context, row, family string, columns ...string) (time.Time, error) {
	return t.life.MaxWriteTime(ctx, row, family, columns...)
}

// ReadRowAndExpire reads row, like Redis GETEX with a TTL, and gives the
// cells it returns of the age families the TTL ttl, atomically: one read
// through the table (the TTL filter, then filter when not nil), then one
// CheckAndMutateRow moving the newest returned cell of each column to the
// timestamp a write with ttl gets now. Its predicate pins every such cell
// and the room each moves through, so a write, Expire, delete or refresh
// since the read makes the whole move not apply (ExpireChanged, nothing
// changed; docs/design.md#get-and-expire). It returns the row as read and
// ExpireSet, or ExpireNoCell when no age-family cell was returned.
// Sequence and unmanaged families' cells are returned and left alone; the
// read does not count as use for time-to-idle. Refusals, before any
// write: a TTL below 1ms (strategy.ErrInvalidTTL), a TTL a returned family
// refuses, cells too large to pin together (filters.ErrCellTooLargeToPin).
func (t *Table) ReadRowAndExpire(ctx context.Context, row string, filter bigtable.Filter, ttl time.Duration) (bigtable.Row, ExpireResult, error) {
	r, res, err := t.life.ReadRowAndExpire(ctx, row, filter, ttl)
	return r, ExpireResult(res), err
}

// ReadRowAndExpireAt is ReadRowAndExpire to an instant (GETEX ... EXAT):
// the cells it moves get the expiry at, as ExpireAt gives it. An instant
// already past deletes them from storage, companions too, older versions
// staying (ExpireDeleted); an instant a returned family refuses refuses
// the call before any write.
func (t *Table) ReadRowAndExpireAt(ctx context.Context, row string, filter bigtable.Filter, at time.Time) (bigtable.Row, ExpireResult, error) {
	r, res, err := t.life.ReadRowAndExpireAt(ctx, row, filter, at)
	return r, ExpireResult(res), err
}

// ReadRowAndPersist is ReadRowAndExpire removing the TTL of the cells it
// returns (GETEX ... PERSIST), as Persist does; a returned family where
// "forever" has no meaning refuses the call (ErrCannotPersist).
func (t *Table) ReadRowAndPersist(ctx context.Context, row string, filter bigtable.Filter) (bigtable.Row, ExpireResult, error) {
	r, res, err := t.life.ReadRowAndPersist(ctx, row, filter)
	return r, ExpireResult(res), err
}

// WriteTime is the real time item was written (to the millisecond), like
// Cassandra's WRITETIME: item is a cell read through this table from a
// family with strategy.WithWriteTime, whose writes store the write time
// in a hidden companion cell that moves and expires with its cell. It
// costs one single-row read; when the cell moved since it was read (a
// refresh or an Expire), a second read finds it by value among the
// column's live cells, and ErrCellMoved says several hold it with
// different write times (docs/design.md#write-time). Other families are a
// *CellError wrapping ErrNotApplicable; a cell with no companion, or no
// longer live, one wrapping ErrNoWriteTime.
func (t *Table) WriteTime(ctx context.Context, item bigtable.ReadItem) (time.Time, error) {
	return t.life.WriteTime(ctx, item)
}

// ErrCellMoved: WriteTime's cell is no longer stored where it was read
// (a time-to-idle refresh or an Expire moved it, or it was deleted), and
// the column holds several live cells with its value, written at different
// times, so which one it became is not known. Read the cell again and ask
// for the cell that read returns.
var ErrCellMoved = rules.ErrCellMoved

func expireOptions(s lifecycle.Settings, opts []ExpireOption) lifecycle.Settings {
	for _, o := range opts {
		o.applyExpire(&s)
	}
	return s
}

func columnOptions(opts []ExpireColumnOption) lifecycle.Settings {
	var s lifecycle.Settings
	for _, o := range opts {
		o.applyExpireColumn(&s)
	}
	return s
}
