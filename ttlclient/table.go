package ttlclient

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/wiremark"
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

	// Time-to-idle (idle.go): the families with an idle TTL (nil when
	// none), the client's refresh pool and its bounds, and the recorder's
	// IdleRecorder if it has one.
	idleFams               []idleFamily
	refresh                *refreshPool
	idleWorkers, idleQueue int
	idleRec                IdleRecorder

	unlisted *strategy.Policy // WithUnlistedFamilies; nil: strict

	mark *wiremark.Mark // marks this table's requests for the wire guard (wire.go)
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
	opts, err := t.readOptions(opts)
	if err != nil {
		return nil, err
	}
	t.obs.read(start)
	var now bigtable.Timestamp
	if t.idleFams != nil {
		now = t.now()
	}
	r, err := t.raw.ReadRow(t.wire(ctx), row, opts...)
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
	opts, err := t.readOptions(opts)
	if err != nil {
		return err
	}
	t.obs.read(start)
	sh := t.obs.sampleRows(arg, opts) // nil unless this read gets a shadow read
	err = t.raw.ReadRows(t.wire(ctx), arg, sh.wrap(t.idleRows(ctx, f)), opts...)
	sh.done(ctx, err)
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
	rmw := bigtable.NewReadModifyWrite()
	for _, o := range m.ops {
		p, ok := t.policy(o.family)
		if !ok {
			return nil, t.refuseOp(row, o.family, o.column, ErrUnknownFamily)
		}
		if p.Managed() {
			return nil, t.refuseOp(row, o.family, o.column, fmt.Errorf("%w: ReadModifyWrite on a %s family", ErrServerAssignedTimestamp, p.Kind()))
		}
		if o.isAppend {
			rmw.AppendValue(o.family, o.column, o.appendValue)
		} else {
			rmw.Increment(o.family, o.column, o.delta)
		}
	}
	t.obs.wrote(start)
	return t.raw.ApplyReadModifyWrite(t.wire(ctx), row, rmw)
}

// readOptions replaces the caller's RowFilter (the last one wins, as in the
// client) with Chain(ttl, caller's). It is on every read's path: without a
// caller filter it costs the one slice it returns.
func (t *Table) readOptions(opts []bigtable.ReadOption) ([]bigtable.ReadOption, error) {
	if !t.filters.Managed() {
		return opts, nil
	}
	var user bigtable.Filter
	hasUser := false
	for _, o := range opts {
		if isRowFilter(o) {
			f, ok := rowFilterOf(o)
			if !ok {
				t.obs.refused("", ErrUnsupportedReadOption)
				return nil, &codedError{fmt.Errorf("%w: cannot read the filter of bigtable.RowFilter in this client version", ErrUnsupportedReadOption)}
			}
			user, hasUser = f, true
		}
	}
	now := t.now()
	var ttlOpt bigtable.ReadOption
	var out []bigtable.ReadOption
	if user == nil {
		ttlOpt = t.ttlOption(now)
		out = make([]bigtable.ReadOption, 0, len(opts)+1)
	} else {
		// One allocation holds the chain's two filters and, for the usual
		// few options, the returned slice.
		buf := new(readBuf)
		buf.chain = [2]bigtable.Filter{t.filters.TTL(now), user}
		ttlOpt = bigtable.RowFilter(bigtable.ChainFilters(buf.chain[:]...))
		if len(opts) < len(buf.opts) {
			out = buf.opts[:0]
		} else {
			out = make([]bigtable.ReadOption, 0, len(opts)+1)
		}
	}
	if !hasUser {
		out = append(out, opts...)
	} else {
		for _, o := range opts {
			if !isRowFilter(o) {
				out = append(out, o)
			}
		}
	}
	return append(out, ttlOpt), nil
}

type readBuf struct {
	chain [2]bigtable.Filter
	opts  [4]bigtable.ReadOption
}

// cachedOption is the TTL filter of one millisecond as a read option.
type cachedOption struct {
	milli int64
	opt   bigtable.ReadOption
}

// ttlOption is bigtable.RowFilter(TTL filter at now), made once per
// millisecond like the filter it holds.
func (t *Table) ttlOption(now bigtable.Timestamp) bigtable.ReadOption {
	milli := int64(strategy.Millis(now)) / 1000
	if c := t.ttlOpt.Load(); c != nil && (c.milli == milli || !t.hasAge) {
		return c.opt
	}
	o := bigtable.RowFilter(t.filters.TTL(now))
	t.ttlOpt.Store(&cachedOption{milli: milli, opt: o})
	return o
}

func (t *Table) refuse(row, family, column string, err error) *CellError {
	t.obs.refused(family, err)
	return &CellError{Table: t.name, Row: row, Family: family, Column: column, Err: err}
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

// build turns m into the mutation to send at now, or the first refusal.
// now is the clock reading itself, not its microseconds: a TTL is added to
// it in nanoseconds (strategy.Policy.WriteTimestamp). The first build of
// m to succeed may send m's own cells, their timestamps written in place
// (Mutation.claim); they are then never written again.
func (t *Table) build(row string, m *Mutation, now time.Time, bulk bool) (*bigtable.Mutation, error) {
	if err := t.checkRowKey(row); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, t.refuse(row, "", "", ErrNilMutation)
	}
	if !m.isConditional {
		if len(m.ops) == 0 {
			return nil, t.refuse(row, "", "", ErrEmptyMutation)
		}
		inPlace := m.claim()
		bm, err := t.convert(row, m, now, inPlace)
		if err != nil && inPlace {
			m.unclaim() // nothing was sent
		}
		return bm, err
	}
	if bulk {
		return nil, t.refuse(row, "", "", ErrConditionalInBulk)
	}
	// A conditional mutation's branches are built anew: they are rare, and
	// the same Mutation may be both.
	branch := func(b *Mutation) (*bigtable.Mutation, error) {
		if b == nil {
			return nil, nil
		}
		if b.isConditional {
			return nil, t.refuse(row, "", "", ErrNestedCondition)
		}
		return t.convert(row, b, now, false)
	}
	mtrue, err := branch(m.mtrue)
	if err != nil {
		return nil, err
	}
	mfalse, err := branch(m.mfalse)
	if err != nil {
		return nil, err
	}
	return bigtable.NewCondMutation(t.filters.Compose(bigtable.Timestamp(now.UnixMicro()), m.cond), mtrue, mfalse), nil
}

// convert is the bigtable.Mutation to send for m's operations, with
// managed timestamps rewritten, or the first refusal. inPlace: the caller
// claimed m (Mutation.claim), so its own cells are sent themselves.
func (t *Table) convert(row string, m *Mutation, now time.Time, inPlace bool) (*bigtable.Mutation, error) {
	n := len(m.ops)
	if t.singleValue {
		n *= 2 // room for a delete before each Set
	}
	s := newSentMutation(m, n)
	nowMicros := bigtable.Timestamp(now.UnixMicro())
	// A row's cells are usually in one or two families: look a family up
	// only when it changes.
	var (
		fam   string
		p     strategy.Policy
		found bool
		chk   strategy.ExplicitCheck // p's explicit timestamps at now
	)
	var o op
	for i := range m.ops {
		if e := m.decode(i, &o); e != nil {
			return nil, t.refuse(row, e.family, e.column, e.err)
		}
		if o.kind == opDeleteRow {
			s.keep(m, i, &o)
			continue
		}
		if !found || o.family != fam {
			p, found = t.policy(o.family)
			if !found {
				return nil, t.opError(row, &o, ErrUnknownFamily)
			}
			fam = o.family
			chk = strategy.NewExplicitCheck(p, nowMicros)
		}
		var ts bigtable.Timestamp // a Set's, for its write-time companion
		switch o.kind {
		case opSet:
			if o.cellOpt == cellOptMany {
				opts := m.manyOpts[o.n]
				e := t.opError(row, &o, fmt.Errorf("%w: %d cell options on one Set; give one, WithTTL on an age family or WithSequence on a sequence family", strategy.ErrWrongCellOption, len(opts)))
				e.Options = opts
				return nil, e
			}
			if len(o.value) > MaxValueBytes {
				return nil, t.opError(row, &o, fmt.Errorf("%w: %d bytes", ErrValueTooLarge, len(o.value)))
			}
			var err error
			if ts, err = cellTimestamp(&p, &chk, &o, now); err != nil {
				return nil, t.opError(row, &o, err)
			}
			t.putCell(&s, m, i, &o, &p, ts, nowMicros, inPlace)
		case opDeleteColumn, opDeleteFamily:
			s.keep(m, i, &o)
		case opDeleteRange:
			if end := o.end(); o.ts < 0 || end < 0 || (end != 0 && strategy.Millis(end) <= strategy.Millis(o.ts)) {
				return nil, t.opError(row, &o, fmt.Errorf("%w: [%d, %d)", ErrInvalidTimestampRange, o.ts, end))
			}
			s.keep(m, i, &o)
		case opAddInt, opMergeBytes:
			if p.Managed() {
				return nil, t.opError(row, &o, fmt.Errorf("%w: AddToCell/MergeToCell on a %s family", ErrServerAssignedTimestamp, p.Kind()))
			}
			if o.ts < 0 {
				return nil, t.opError(row, &o, fmt.Errorf("%w: timestamp %d", strategy.ErrBeforeEpoch, o.ts))
			}
			s.keep(m, i, &o)
		}
		if p.HasWriteTime() {
			if err := t.writeTimeCompanion(row, &o, ts, nowMicros, &s); err != nil {
				return nil, err
			}
		}
	}
	bm := s.finish()
	if bm == nil {
		return nil, t.refuse(row, "", "", fmt.Errorf("bttl: internal error: the write path left an operation of the mutation unsent; nothing was sent"))
	}
	return bm, nil
}

// putCell adds to s the cell of m.ops[i] (o decoded), a Set on a family of
// policy p, with its final timestamp ts, at nowMicros: the one place where
// each cell sent is known with its family, policy and timestamp.
func (t *Table) putCell(s *sentMutation, m *Mutation, i int, o *op, p *strategy.Policy, ts, nowMicros bigtable.Timestamp, inPlace bool) {
	if p.IsSingleValue() {
		s.extra().DeleteCellsInColumn(o.family, o.column)
	}
	s.set(m, i, o, ts, inPlace)
	t.obs.cell(p, o, ts, nowMicros)
}

// cellTimestamp is the timestamp to write for a Set under policy p at now;
// chk checks p's explicit timestamps at now.
func cellTimestamp(p *strategy.Policy, chk *strategy.ExplicitCheck, o *op, now time.Time) (bigtable.Timestamp, error) {
	if !p.Managed() {
		if o.cellOpt != cellOptNone {
			return 0, fmt.Errorf("%w: an unmanaged family keeps the caller's timestamp", strategy.ErrWrongCellOption)
		}
		if o.ts == bigtable.ServerTime {
			return o.ts, nil
		}
		if o.ts < 0 {
			return 0, fmt.Errorf("%w: timestamp %d", strategy.ErrBeforeEpoch, o.ts)
		}
		return strategy.Millis(o.ts), nil
	}
	if o.cellOpt != cellOptNone && o.ts != Auto {
		return 0, fmt.Errorf("%w: give a TTL or sequence option with ttlclient.Auto, not with timestamp %d", strategy.ErrWrongCellOption, o.ts)
	}
	switch o.cellOpt {
	case cellOptTTL:
		return p.WriteTimestamp(now, o.ttl())
	case cellOptSeq:
		return p.SequenceTimestamp(o.seq())
	}
	if o.ts == Auto {
		return p.DefaultTimestamp(now)
	}
	return chk.Check(o.ts)
}

func (t *Table) opError(row string, o *op, err error) *CellError {
	t.obs.refused(o.family, err)
	e := &CellError{Table: t.name, Row: row, Family: o.family, Column: o.column, Err: err, named: true}
	switch {
	case o.cellOpt == cellOptTTL:
		e.TTL = o.ttl()
	case o.cellOpt == cellOptSeq:
		e.Sequence = o.seq()
	}
	if o.kind == opSet || o.kind == opDeleteRange || o.kind == opAddInt || o.kind == opMergeBytes {
		e.Timestamp = o.ts
	}
	return e
}
