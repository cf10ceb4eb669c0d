package ttlclient

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/lifecycle"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/internal/wiremark"
	"github.com/bttl/bttl/internal/wirestream"
	"github.com/bttl/bttl/strategy"
)

// Table mirrors *bigtable.Table: writes get their managed-family timestamps
// rewritten by strategy and checked by the guardrails before any RPC, and
// reads get the TTL filter in front of the caller's.
type Table struct {
	name    string
	raw     bigtable.TableAPI // the *bigtable.Table, or an authorized or materialized view
	schema  Schema
	filters *filters.Builder
	clock   strategy.Clock
	obs     *observer // nil without a Recorder
	ttlOpt  atomic.Pointer[cachedOption]
	hasAge  bool // some family expires by age: the read filter changes with time
	// singleValue: some family replaces a column's cells, so a Set may send
	// a delete before it (room for it is reserved in the sent mutation).
	singleValue bool
	logger      *slog.Logger
	keyText     keytext.Text // how messages show row keys and qualifiers (WithKeyRedaction)

	// Time-to-idle (idle.go, internal/lifecycle): nil when no family has
	// an idle TTL; and the recorder's IdleRecorder if it has one.
	idle    *lifecycle.Idle
	idleRec IdleRecorder

	unlisted *strategy.Policy // WithUnlistedFamilies; nil: strict

	mark *wiremark.Mark // marks this table's requests for the wire guard (Table.wire)

	life *lifecycle.Ops // the lifecycle operations (lifecycle.go)

	// rules are the table's write and read rules (internal/rules), the
	// wire guard's too.
	rules *rules.Table
	// wireState: whether the client's connection carries bttl's
	// interceptor (wire.go), the client's.
	wireState *wirestream.Dialed
	rec       TableRecorder // nil without a Recorder

	// App profiles (profile.go): raw's profile when known, and the table
	// on the transactional client with its profile (raw and profile
	// without one).
	profile       string
	txn           bigtable.TableAPI
	txnProfile    string
	profileWarned atomic.Bool // a refresh's profile refusal was logged as a warning
}

// Name is the table's name.
func (t *Table) Name() string { return t.name }

// Raw is the underlying table. Writes and reads through it bypass the
// library: no rewrite, no guardrail, no TTL filter. It is nil for a Table
// opened with OpenAuthorizedView: Client.Raw().OpenAuthorizedView opens the
// raw view.
func (t *Table) Raw() *bigtable.Table {
	raw, _ := t.raw.(*bigtable.Table)
	return raw
}

// Policy is the policy of family, and whether the schema names it.
func (t *Table) Policy(family string) (strategy.Policy, bool) {
	p, ok := t.schema[family]
	return p, ok
}

// now is the clock in microseconds. UnixMicro, unlike bigtable.Time, stays
// exact past the year 2262.
func (t *Table) now() bigtable.Timestamp { return bigtable.Timestamp(t.clock.Now().UnixMicro()) }

// ReadRow reads one row, like bigtable.Table.ReadRow, returning only its
// live cells. A bigtable.RowFilter among opts is applied after the TTL
// filter.
//
// On a family with an idle TTL (strategy.WithIdleTTL), the newest cell of
// each column returned whose remaining TTL is below the idle TTL less the
// debounce is refreshed to the idle TTL off the caller's path (see
// docs/design.md#time-to-idle): the row returned is the row read, whatever
// becomes of the refresh. So is ReadRows'.
func (t *Table) ReadRow(ctx context.Context, row string, opts ...bigtable.ReadOption) (bigtable.Row, error) {
	start := t.obs.begin()
	call, opts, err := t.readCall(ctx, opts)
	if err != nil {
		return nil, err
	}
	t.obs.read(start)
	var now bigtable.Timestamp
	if t.idle != nil {
		now = t.now()
	}
	r, err := t.raw.ReadRow(t.wire(call.mark(ctx)), row, opts...)
	t.obs.afterReadRow(ctx, row, err)
	if t.idle != nil && err == nil && r != nil {
		t.idle.AfterRead(ctx, r, now)
	}
	return r, err
}

// ReadRows reads rows, like bigtable.Table.ReadRows, returning only live
// cells. A bigtable.RowFilter among opts is applied after the TTL filter.
// bigtable.WithFullReadStats counts the expired cells the TTL filter hid
// as seen. The caller may reuse arg as soon as ReadRows returns: a shadow
// read (WithShadowSampling) reads its own copy.
func (t *Table) ReadRows(ctx context.Context, arg bigtable.RowSet, f func(bigtable.Row) bool, opts ...bigtable.ReadOption) error {
	start := t.obs.begin()
	call, opts, err := t.readCall(ctx, opts)
	if err != nil {
		return err
	}
	t.obs.read(start)
	sh := t.obs.sampleRows(arg, opts) // nil unless this read gets a shadow read
	err = t.raw.ReadRows(t.wire(call.mark(ctx)), arg, sh.Wrap(t.idle.Rows(ctx, f)), opts...)
	sh.Done(ctx, call.RowsLimit(), err)
	return err
}

// SampleRowKeys returns a sample of row keys, like
// bigtable.Table.SampleRowKeys.
func (t *Table) SampleRowKeys(ctx context.Context) ([]string, error) {
	return t.raw.SampleRowKeys(ctx)
}

func (t *Table) refuse(row, family, column string, err error) *CellError {
	t.obs.refused(family, err)
	return &CellError{Table: t.name, Row: row, Family: family, Column: column, Err: err, text: t.keyText}
}

func (t *Table) checkRowKey(row string) error {
	if row == "" {
		return t.refuse(row, "", "", ErrEmptyRowKey)
	}
	if len(row) > MaxRowKeyBytes {
		return t.refuse(row, "", "", fmt.Errorf("%w: %d bytes", ErrRowKeyTooLong, len(row)))
	}
	return nil
}

// wire marks ctx for a request this table computed, so that bttl's wire
// guard on the same connection passes it through unchanged rather than
// filter or rewrite it a second time (docs/design.md#wire-guard).
// Requests made with Client.Raw or Table.Raw are not marked.
func (t *Table) wire(ctx context.Context) context.Context { return wiremark.With(ctx, t.mark) }
