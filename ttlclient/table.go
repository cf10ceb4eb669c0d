package ttlclient

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/internal/wiremark"
	"github.com/bttl/bttl/internal/workpool"
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

	// Time-to-idle (idle.go): the families with an idle TTL (nil when
	// none), the client's refresh pool, and the recorder's IdleRecorder if
	// it has one.
	idleFams []idleFamily
	refresh  *workpool.Pool[idleKey, idleJob]
	idleRec  IdleRecorder

	unlisted *strategy.Policy // WithUnlistedFamilies; nil: strict

	mark *wiremark.Mark // marks this table's requests for the wire guard (Table.wire)

	// rules are the table's write and read rules (internal/rules), the
	// wire guard's too.
	rules *rules.Table
	// wireState: whether the client's connection carries bttl's
	// interceptor (wire.go), the client's.
	wireState *wireState
	rec       TableRecorder // nil without a Recorder
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

// Apply mutates a row atomically, like bigtable.Table.Apply. A conditional
// mutation's predicate gets the TTL filter first, so an expired cell never
// satisfies it; both branches are rewritten and checked.
func (t *Table) Apply(ctx context.Context, row string, m *Mutation, opts ...bigtable.ApplyOption) error {
	start := t.obs.begin()
	now := t.clock.Now()
	bm, err := t.build(row, m, now, false)
	if err != nil {
		return err
	}
	t.obs.wrote(start)
	return t.raw.Apply(t.wire(ctx), row, bm, opts...)
}

// ApplyBulk applies several mutations, like bigtable.Table.ApplyBulk. A row
// the guardrails refuse does not stop the others: its error is at its index
// in the returned slice, as a failed row's is, and it is never sent. The
// slice is nil when every row succeeded.
func (t *Table) ApplyBulk(ctx context.Context, rowKeys []string, muts []*Mutation, opts ...bigtable.ApplyOption) ([]error, error) {
	if len(rowKeys) != len(muts) {
		return nil, fmt.Errorf("bttl: mismatched rowKeys and mutation array lengths: %d, %d", len(rowKeys), len(muts))
	}
	start := t.obs.begin()
	now := t.clock.Now()
	bms := make([]*bigtable.Mutation, len(muts))
	var refused []error
	for i, m := range muts {
		bm, err := t.build(rowKeys[i], m, now, true)
		if err != nil {
			if refused == nil {
				refused = make([]error, len(muts))
			}
			refused[i] = err
			continue
		}
		bms[i] = bm
	}
	t.obs.wrote(start)
	if refused == nil {
		return t.raw.ApplyBulk(t.wire(ctx), rowKeys, bms, opts...)
	}
	return applyPassed(t.wire(ctx), rowKeys, bms, refused, t.raw.ApplyBulk, opts)
}

// applyPassed sends only the rows whose slot in failed is nil, then puts
// their results back in place, so failed[i] ends as row i's outcome.
func applyPassed[M any](ctx context.Context, rowKeys []string, muts []M, failed []error,
	apply func(context.Context, []string, []M, ...bigtable.ApplyOption) ([]error, error), opts []bigtable.ApplyOption) ([]error, error) {
	keys := make([]string, 0, len(rowKeys))
	sent := make([]M, 0, len(rowKeys))
	index := make([]int, 0, len(rowKeys))
	for i := range muts {
		if failed[i] == nil {
			keys = append(keys, rowKeys[i])
			sent = append(sent, muts[i])
			index = append(index, i)
		}
	}
	if len(sent) == 0 {
		return failed, nil
	}
	errs, err := apply(ctx, keys, sent, opts...)
	for j, e := range errs {
		failed[index[j]] = e
	}
	if err != nil && errs == nil {
		// The whole call failed: a nil slot would read as "written".
		for _, i := range index {
			failed[i] = err
		}
	}
	return failed, err
}

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
	if t.idleFams != nil {
		now = t.now()
	}
	r, err := t.raw.ReadRow(t.wire(call.mark(ctx)), row, opts...)
	t.obs.afterReadRow(ctx, row, err)
	if t.idleFams != nil && err == nil && r != nil {
		t.afterIdleRead(ctx, r, now)
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
	err = t.raw.ReadRows(t.wire(call.mark(ctx)), arg, sh.wrap(t.idleRows(ctx, f)), opts...)
	sh.done(ctx, call, err)
	return err
}

// SampleRowKeys returns a sample of row keys, like
// bigtable.Table.SampleRowKeys.
func (t *Table) SampleRowKeys(ctx context.Context) ([]string, error) {
	return t.raw.SampleRowKeys(ctx)
}

// ApplyReadModifyWrite applies m, like bigtable.Table.ApplyReadModifyWrite.
// The server picks the timestamps it writes, so every family m touches must
// be unmanaged.
func (t *Table) ApplyReadModifyWrite(ctx context.Context, row string, m *ReadModifyWrite) (bigtable.Row, error) {
	start := t.obs.begin()
	if err := t.checkRowKey(row); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, t.refuse(row, "", "", ErrNilMutation)
	}
	if len(m.ops) == 0 {
		return nil, t.refuse(row, "", "", ErrEmptyMutation)
	}
	rs := make([]*btpb.ReadModifyWriteRule, len(m.ops))
	for i, o := range m.ops {
		rs[i] = &btpb.ReadModifyWriteRule{FamilyName: o.family, ColumnQualifier: []byte(o.column)}
	}
	if r := t.rules.ReadModifyWrite(rs); r != nil {
		return nil, t.refusal(row, r)
	}
	rmw := bigtable.NewReadModifyWrite()
	for _, o := range m.ops {
		if o.isAppend {
			rmw.AppendValue(o.family, o.column, o.appendValue)
		} else {
			rmw.Increment(o.family, o.column, o.delta)
		}
	}
	t.obs.wrote(start)
	return t.raw.ApplyReadModifyWrite(t.wire(ctx), row, rmw)
}

func (t *Table) refuse(row, family, column string, err error) *CellError {
	t.obs.refused(family, err)
	return &CellError{Table: t.name, Row: row, Family: family, Column: column, Err: err, text: t.keyText}
}

// refuseOp is refuse for an operation on family, which the message names
// even when it is "".
func (t *Table) refuseOp(row, family, column string, err error) *CellError {
	e := t.refuse(row, family, column, err)
	e.named = true
	return e
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

// begin starts timing a call: the zero time when nothing records.
func (o *observer) begin() time.Time {
	if o == nil {
		return time.Time{}
	}
	return time.Now()
}

// read records a read whose RPC is about to start.
func (o *observer) read(start time.Time) {
	if o != nil {
		o.readSlow(start)
	}
}

func (o *observer) readSlow(start time.Time) { o.rec.Read(time.Since(start)) }

// wrote records a write whose RPC is about to start.
func (o *observer) wrote(start time.Time) {
	if o != nil {
		o.wroteSlow(start)
	}
}

func (o *observer) wroteSlow(start time.Time) { o.rec.Write(time.Since(start)) }

// refused records the refusal err of a call on family.
func (o *observer) refused(family string, err error) {
	if o != nil {
		o.refusedSlow(family, err)
	}
}

func (o *observer) refusedSlow(family string, err error) {
	if _, ok := o.schema[family]; !ok {
		family = ""
	}
	o.rec.Refused(family, RefusalReason(err))
}

// wire marks ctx for a request this table computed (checked writes with
// their companions, reads with the TTL filter, and the internal reads and
// moves of lifecycle operations that must see the stored cells), so that
// bttl's wire guard on the same connection passes it through unchanged
// rather than filter it a second time (hiding the companions and versions
// an internal read must see) or rewrite it (docs/design.md#wire-guard).
// The mark carries the table's schema: a guard with another schema for
// the table refuses the request. Requests made with Client.Raw or
// Table.Raw are not marked.
func (t *Table) wire(ctx context.Context) context.Context { return wiremark.With(ctx, t.mark) }
