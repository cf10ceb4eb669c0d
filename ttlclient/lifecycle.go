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
		Policy:  t.policy,
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
// acted (a column's cells newest first when the TTL grows, oldest first
// when it shrinks), as Redis HEXPIRE answers per field: ExpireSet,
// ExpireDeleted (the instant was past: deleted from storage, as for
// ExpireAt), ExpireNotMet (the condition), ExpireChanged (changed since
// the read; also the cell an RPC error stopped at), and, for a column
// without a live cell (ExpireColumn, ExpireColumnAt), one ExpireNoCell
// entry with timestamp 0. ExpireRow has no entry for a row without
// cells. *rs is replaced (nil when the call is refused before any RPC).
func ExpireResultsTo(rs *[]ExpireCellResult) ExpireColumnOption { return resultsToOption{rs} }

type cellAtOption bigtable.Timestamp

func (o cellAtOption) applyExpire(s *lifecycle.Settings) { s.TS, s.HasTS = bigtable.Timestamp(o), true }

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

func (c ExpireCondition) applyExpire(s *lifecycle.Settings)       { s.Cond = lifecycle.Condition(c) }
func (c ExpireCondition) applyExpireColumn(s *lifecycle.Settings) { s.Cond = lifecycle.Condition(c) }

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
	return t.life.Expire(ctx, row, family, column, ttl, expireOptions(lifecycle.Settings{}, opts))
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
// stay visible. An instant at or before the Unix epoch (the zero
// time.Time: an instant not set) is refused before any RPC
// (strategy.ErrBeforeEpoch), as by ExpireColumnAt, ExpireRowAt and
// ReadRowAndExpireAt. An ExpireCondition is checked as for Expire. The cap
// (strategy.WithMaxTTL) refuses or clamps an expiry too far away, as a
// write with that TTL; an instant past the family's last timestamp is
// strategy.ErrTimestampOverflow, a future one less than D after the epoch
// (a default TTL longer than the time since the epoch)
// strategy.ErrBeforeEpoch, as Expire refuses that TTL. Other guardrails
// as for Expire.
func (t *Table) ExpireAt(ctx context.Context, row, family, column string, at time.Time, opts ...ExpireOption) (ExpireResult, error) {
	r, err := t.life.ExpireAt(ctx, row, family, column, at, expireOptions(lifecycle.Settings{}, opts))
	return ExpireResult(r), err
}

// Persist removes the TTL of a cell of row, like Redis PERSIST/HPERSIST:
// the column's newest live cell, or the one ExpireCellAt names, moves to
// the largest timestamp (strategy.MaxTimestamp), which expires after the
// year 294,000 (docs/design.md#lifecycle-conditions). On a family whose
// cap clamps (strategy.ClampLonger) "forever" is the cap: the cell gets
// the cap's TTL from now, as any longer TTL does there, and keeps a TTL;
// a cell there already living longer than the cap (written before it,
// or by a plain client) is never shortened to it: ExpireNotMet, checked in
// the conditional mutation's predicate.
// A family whose cap refuses longer TTLs, and a sequence or unmanaged
// family, are refused with a *CellError wrapping ErrCannotPersist. A cell
// already without a TTL is ExpireNotMet (HPERSIST's -1); otherwise the
// results and guarantees are Expire's, the move never lifting the newest
// cell over a value written since the read. An ExpireCondition replaces
// the default, OnlyIfTTL.
func (t *Table) Persist(ctx context.Context, row, family, column string, opts ...ExpireOption) (ExpireResult, error) {
	r, err := t.life.Persist(ctx, row, family, column, expireOptions(lifecycle.Settings{Cond: lifecycle.IfTTL}, opts))
	return ExpireResult(r), err
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
	return t.life.ExpireColumn(ctx, row, family, column, ttl, columnOptions(opts))
}

// ExpireRow gives every live cell of row's age families (one-second and
// default-expiry) a new TTL, column by column as ExpireColumn does; cells
// of sequence and unmanaged families are left alone. A table without an
// age family gets ErrNotApplicable. moved counts the cells given the new
// TTL, as ExpireColumn does. Refusals come before the first move; an RPC
// error stops the call, with the cells moved until then counted.
func (t *Table) ExpireRow(ctx context.Context, row string, ttl time.Duration, opts ...ExpireColumnOption) (moved int, err error) {
	return t.life.ExpireRow(ctx, row, ttl, columnOptions(opts))
}

// ExpireColumnAt is ExpireColumn to an instant, like Redis HEXPIREAT on
// every version: the column's newest live cell gets the expiry at, as
// ExpireAt gives it, and each older one moves by the same amount, keeping
// the versions' order and spacing (one shifted into the past is deleted).
// An instant already past deletes every live cell of the column
// (ExpireDeleted each: deleted from storage, write-time companions too).
// moved counts the cells set or deleted. The refusals are ExpireAt's (the
// cap refuses or clamps, an instant past the family's last timestamp
// overflows), before any RPC; the guarantees and costs ExpireColumn's.
func (t *Table) ExpireColumnAt(ctx context.Context, row, family, column string, at time.Time, opts ...ExpireColumnOption) (moved int, err error) {
	return t.life.ExpireColumnAt(ctx, row, family, column, at, columnOptions(opts))
}

// ExpireRowAt is ExpireRow to an instant: every live cell of row's age
// families, column by column as ExpireColumnAt does. An instant one of
// the table's age families refuses (the first by name: its cap, an
// overflow) refuses the call before any RPC; otherwise as ExpireRow.
func (t *Table) ExpireRowAt(ctx context.Context, row string, at time.Time, opts ...ExpireColumnOption) (moved int, err error) {
	return t.life.ExpireRowAt(ctx, row, at, columnOptions(opts))
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
	r, err := t.life.SetKeepTTL(ctx, row, family, column, value)
	return ExpireResult(r), err
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
	return t.life.MaxWriteTime(ctx, row, family, columns...)
}

// ReadRowAndExpire reads row, like Redis GETEX/HGETEX with a TTL, and
// gives the cells it returns of the age families the TTL ttl, atomically:
// one read through the table (the TTL filter, then filter when not nil),
// then one CheckAndMutateRow moving, for each column, the newest cell
// returned to the timestamp a write with ttl gets now (older versions
// returned keep their TTL, as with time-to-idle). Its predicate pins every
// such cell (column, millisecond, value), requires the column to hold
// nothing above a cell that moves up, up to its target, and each lower
// target millisecond to be empty: a write, Expire, delete or refresh since
// the read that the move would overwrite, cross or find changed makes the
// whole move not apply (ExpireChanged, nothing changed: read again), so
// no concurrent write is overwritten or hidden and no dead cell revived.
// A filter returning an older version of a column moves that version the
// same way: down, or up to below the newer one; a move lifting it over
// the newer version, which it would hide, never applies (ExpireChanged).
// A filter that strips values (bigtable.StripValueFilter) costs one more
// read, of the stored values the move keeps. It returns the row as
// read (the timestamps before the move) and ExpireSet, or ExpireNoCell
// when no age-family cell was returned (nothing sent). Sequence and
// unmanaged families' cells are returned and left alone. The reads do not
// count as use for time-to-idle (this is the use, synchronous).
// A TTL below 1ms is refused before any RPC (strategy.ErrInvalidTTL).
// Refusals before any write, for the whole row: a TTL a returned family
// refuses (cap, overflow), cells too large to pin together
// (filters.ErrCellTooLargeToPin).
func (t *Table) ReadRowAndExpire(ctx context.Context, row string, filter bigtable.Filter, ttl time.Duration) (bigtable.Row, ExpireResult, error) {
	r, res, err := t.life.ReadRowAndExpire(ctx, row, filter, ttl)
	return r, ExpireResult(res), err
}

// ReadRowAndExpireAt is ReadRowAndExpire to an instant (GETEX ... EXAT or
// PXAT): the newest cell returned of each column of the age families gets
// the expiry at, as ExpireAt gives it, in the same one conditional
// mutation. An instant already past deletes those cells (the result is
// ExpireDeleted; GETEX with a past instant deletes the key): from
// storage, companions too, older versions staying. An instant a returned
// family refuses (its cap refuses it, or it is past the family's last
// timestamp) refuses the call before any write, as ExpireAt does.
func (t *Table) ReadRowAndExpireAt(ctx context.Context, row string, filter bigtable.Filter, at time.Time) (bigtable.Row, ExpireResult, error) {
	r, res, err := t.life.ReadRowAndExpireAt(ctx, row, filter, at)
	return r, ExpireResult(res), err
}

// ReadRowAndPersist is ReadRowAndExpire removing the TTL of the cells it
// returns (GETEX ... PERSIST), as Persist does: each moves to the largest
// timestamp, or the cap on a clamping family; a returned family where
// "forever" has no meaning refuses the call (ErrCannotPersist). A cell
// already without a TTL stays where it is, on a clamping family too, and
// so does one living longer than a clamping family's cap.
func (t *Table) ReadRowAndPersist(ctx context.Context, row string, filter bigtable.Filter) (bigtable.Row, ExpireResult, error) {
	r, res, err := t.life.ReadRowAndPersist(ctx, row, filter)
	return r, ExpireResult(res), err
}

// WriteTime is the real time item was written (to the millisecond), like
// Cassandra's WRITETIME: item is a cell read through this table from a
// family with strategy.WithWriteTime, whose every write also stores the
// write time in a hidden companion cell with the same timestamp. The
// write time survives Expire and time-to-idle refreshes (the companion
// moves with its cell, keeping its value) and is gone when the cell is:
// both expire together.
//
// It costs one single-row read: the companion in item's millisecond, and
// whether a cell is still stored there. When none is (a refresh or an
// Expire, this client's or another's, moved the cell after the read
// returned it), a second read looks the cell up by value among the
// column's live cells, as a read through the table sees them: the write
// time of the cell holding item's value, or ErrCellMoved when several
// hold it with different write times. If the cell was deleted and the
// same value written again, that is the rewrite's time.
//
// An empty value (a read with bigtable.StripValueFilter returns every
// value empty) identifies the cell by its coordinates only: the cell
// stored in item's millisecond, or, moved, the column's live cells when
// they all hold one write time (else ErrCellMoved), never the write time
// of another cell that happens to hold an empty value.
//
// Other families are a *CellError wrapping ErrNotApplicable; a cell with
// no companion (written before the option, or by a plain client outside
// the wire guard), or no longer live, one wrapping ErrNoWriteTime.
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
