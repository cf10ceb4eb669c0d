package ttlclient

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// tableAPI is a Table seen through the client's own interface.
type tableAPI struct{ t *Table }

var _ bigtable.TableAPI = tableAPI{}

// API returns the table as a bigtable.TableAPI, the interface
// bigtable.Client.OpenTable returns, so that code written against the plain
// client, and its *bigtable.Mutation values, run through bttl unchanged.
//
// Its Apply and ApplyBulk give a *bigtable.Mutation exactly the semantics of
// a Mutation: on a managed family a server timestamp (bigtable.ServerTime,
// which is Auto) means the library assigns it from the family's default TTL
// (refused where there is none), an explicit timestamp follows the family's
// convention, conditional mutations get the TTL filter before their
// predicate, and every guardrail refuses before any RPC with the same
// sentinel errors. ApplyReadModifyWrite is refused on managed families;
// reads are filtered as Table's.
//
// A *bigtable.Mutation has no accessors: the library reads its fields in
// place, after checking, when the client is made, that it can on the
// client version in use (CheckCompatibility; a failure is logged then). If
// it cannot, or a mutation holds an operation it does not know, the write
// fails with ErrMutationUnreadable and nothing is sent.
//
// Per-cell TTLs: pass Table.Timestamp(family, ttl) to Set. Code written for
// bttl should prefer Mutation and WithTTL/WithSequence, which say what the
// timestamp means and are checked against the family when applied.
func (t *Table) API() bigtable.TableAPI { return tableAPI{t} }

// ReadRow is Table.ReadRow.
func (a tableAPI) ReadRow(ctx context.Context, row string, opts ...bigtable.ReadOption) (bigtable.Row, error) {
	return a.t.ReadRow(ctx, row, opts...)
}

// ReadRows is Table.ReadRows.
func (a tableAPI) ReadRows(ctx context.Context, arg bigtable.RowSet, f func(bigtable.Row) bool, opts ...bigtable.ReadOption) error {
	return a.t.ReadRows(ctx, arg, f, opts...)
}

// SampleRowKeys is Table.SampleRowKeys.
func (a tableAPI) SampleRowKeys(ctx context.Context) ([]string, error) {
	return a.t.SampleRowKeys(ctx)
}

// Timestamp is the timestamp to pass to bigtable.Mutation.Set for a cell of
// family that must live ttl from now, at the table's clock: for code that
// keeps building *bigtable.Mutation and applies it through API. Applied
// through API, it is checked as an explicit timestamp of the family's
// convention, which accepts it until the cell would have expired (a
// one-second family's expiry instant must be after now; a default-expiry
// cell must be live at now, so a ttl longer than D, whose timestamp lies in
// the future, is accepted). Compute it just before Set: a ttl of a few
// milliseconds can expire before the write arrives and is then refused
// (strategy.ErrAlreadyExpired).
//
// It fails like Mutation.Set(family, column, Auto, v, WithTTL(ttl)) does:
// ErrUnknownFamily, strategy.ErrWrongCellOption on a sequence or unmanaged family,
// strategy.ErrInvalidTTL, strategy.ErrTimestampOverflow, strategy.ErrBeforeEpoch, in a *CellError.
func (t *Table) Timestamp(family string, ttl time.Duration) (bigtable.Timestamp, error) {
	p, ok := t.policy(family)
	if !ok {
		return 0, &CellError{Table: t.name, Family: family, TTL: ttl, Err: ErrUnknownFamily, named: true}
	}
	if !p.Managed() {
		return 0, &CellError{Table: t.name, Family: family, TTL: ttl, named: true,
			Err: fmt.Errorf("%w: an unmanaged family keeps the caller's timestamp", strategy.ErrWrongCellOption)}
	}
	ts, err := p.WriteTimestamp(t.clock.Now(), ttl)
	if err != nil {
		return 0, &CellError{Table: t.name, Family: family, TTL: ttl, Err: err, named: true}
	}
	return ts, nil
}
