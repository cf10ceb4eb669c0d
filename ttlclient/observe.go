package ttlclient

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// Recorder receives what the library observes; package metrics implements
// it. Open calls Table once per opened table, so an implementation can
// resolve its per-table and per-family instruments up front and keep the
// per-call methods cheap.
type Recorder interface {
	Table(table string, schema Schema) TableRecorder
}

// TableRecorder receives the observations of one table. Its methods are
// called concurrently; those marked "caller's path" run inside the
// caller's call and must be fast and must not block. family is always a
// family of the table's schema, or "" when the refused family is not in it,
// so labels stay bounded.
type TableRecorder interface {
	// Read: one ReadRow or ReadRows call; added is the time the library
	// spent before the RPC (caller's path).
	Read(added time.Duration)
	// Write: one Apply, ApplyBulk or ApplyReadModifyWrite call about to be
	// sent; added is the time the library spent before the RPC (caller's
	// path).
	Write(added time.Duration)
	// CellWritten: one cell set in family. ttl is the cell's TTL on an age
	// family, 0 on sequence and unmanaged families (caller's path).
	CellWritten(family string, kind strategy.Kind, ttl time.Duration)
	// Refused: a guardrail refused a call; reason is RefusalReason of the
	// error (caller's path).
	Refused(family, reason string)
	// ExpiredCell: a shadow read found a cell of family that is expired but
	// still stored, gcLag past its expiry (off the caller's path).
	ExpiredCell(family string, kind strategy.Kind, gcLag time.Duration)
	// ShadowRead: a shadow read ended, having seen expired cells (the cells
	// the TTL filters hid from the sampled read); err is its failure.
	ShadowRead(expired int, err error)
	// ShadowDropped: a sampled read got no shadow read because as many as
	// the concurrency limit were running, or the client was closed.
	ShadowDropped()
	// VerifySkipped: Open skipped the GC-rule check (WithoutVerify).
	VerifySkipped()
}

// DefaultShadowSampling is the fraction of reads followed by a shadow read
// when a Recorder is set.
const DefaultShadowSampling = 0.01

// DefaultShadowConcurrency bounds the shadow reads running at once per
// client.
const DefaultShadowConcurrency = 4

// shadowTimeout bounds one shadow read, so a stuck one frees its slot.
const shadowTimeout = 30 * time.Second

// WithRecorder makes tables report reads, writes, TTLs, refusals, the
// library's added latency and, through shadow reads, the expired cells
// still stored. nil (the default) records nothing and costs one nil check
// per call.
func WithRecorder(r Recorder) Option {
	return func(cfg *config) { cfg.recorder = r }
}

// WithShadowSampling sets the fraction of reads (0 to 1, default 0.01)
// followed by a shadow read; 0 turns shadow reads off. A shadow read runs on
// its own goroutine after the caller's read has returned: it reads the same
// rows again with the inverse TTL filter (only expired cells, values
// stripped), as far as the caller's scan went (to the row where the caller
// stopped or the row limit was reached, else the whole row set), and
// reports what it finds to the Recorder. Its cost is one extra read RPC per
// sampled read, returning no values; it never changes the caller's result,
// error or latency. Only used with WithRecorder.
//
// The shadow read never touches the caller's arguments after ReadRows
// returns: it copies the row keys and ranges of the RowSet before the read
// starts, so the caller may reuse a bigtable.RowList or RowRangeList at
// once, as it may with the raw client.
func WithShadowSampling(fraction float64) Option {
	return func(cfg *config) {
		switch {
		case !(fraction > 0): // also NaN
			fraction = 0
		case fraction > 1:
			fraction = 1
		}
		cfg.sampling = fraction
	}
}

// WithShadowConcurrency bounds the shadow reads a client runs at once
// (default 4, at least 1). A sampled read finding them all busy gets none,
// and the Recorder counts it as dropped.
func WithShadowConcurrency(n int) Option {
	return func(cfg *config) {
		if n < 1 {
			n = 1
		}
		cfg.shadowLimit = n
	}
}

// WithShadowRand sets the random source of the sampler, uniform in [0, 1)
// (default math/rand/v2.Float64), so tests decide which reads are sampled.
// It is called concurrently.
func WithShadowRand(f func() float64) Option {
	return func(cfg *config) {
		if f != nil {
			cfg.rand = f
		}
	}
}

// refusalReasons names every sentinel, in snake_case, for the refusal
// counter's reason label. The names are part of the metrics' contract.
var refusalReasons = []struct {
	err  error
	name string
}{
	{strategy.ErrInvalidPolicy, "invalid_policy"},
	{strategy.ErrUnsupportedGCRule, "unsupported_gc_rule"},
	{strategy.ErrInvalidTTL, "invalid_ttl"},
	{strategy.ErrTimestampOverflow, "timestamp_overflow"},
	{strategy.ErrBeforeEpoch, "before_epoch"},
	{strategy.ErrInvalidSequence, "invalid_sequence"},
	{strategy.ErrServerTimestamp, "server_timestamp"},
	{strategy.ErrAlreadyExpired, "already_expired"},
	{strategy.ErrWrongCellOption, "wrong_cell_option"},
	{ErrUnknownFamily, "unknown_family"},
	{ErrServerAssignedTimestamp, "server_assigned_timestamp"},
	{ErrNilMutation, "nil_mutation"},
	{ErrEmptyMutation, "empty_mutation"},
	{ErrNestedCondition, "nested_condition"},
	{ErrConditionalInBulk, "conditional_in_bulk"},
	{ErrEmptyRowKey, "empty_row_key"},
	{ErrRowKeyTooLong, "row_key_too_long"},
	{ErrValueTooLarge, "value_too_large"},
	{ErrInvalidTimestampRange, "invalid_timestamp_range"},
	{gcrule.ErrMismatch, "gc_rule_mismatch"},
	{ErrNoAdminClient, "no_admin_client"},
	{ErrTableNotFound, "table_not_found"},
	{ErrUnsupportedReadOption, "unsupported_read_option"},
	{filters.ErrFilterTooLarge, "filter_too_large"},
	{ErrMutationUnreadable, "mutation_unreadable"},
	{strategy.ErrTTLTooLong, "ttl_too_long"},
	{ErrNotApplicable, "not_applicable"},
	{ErrReservedColumn, "reserved_column"},
	{filters.ErrCellTooLargeToPin, "cell_too_large_to_pin"},
	{ErrNoWriteTime, "no_write_time"},
	{ErrCellMoved, "cell_moved"},
	{ErrReadOnlyView, "read_only_view"},
	{ErrUnfilteredSQL, "unfiltered_sql"},
	{ErrSQLUnknownTable, "sql_unknown_table"},
}

// RefusalReason is the stable snake_case name of the sentinel err wraps
// ("server_timestamp" for strategy.ErrServerTimestamp, ...), "other" when it wraps
// none.
func RefusalReason(err error) string {
	for _, r := range refusalReasons {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}

// observer is a table's link to its Recorder. A table without a Recorder
// has a nil observer, and every method starts with a nil check, so the
// hooks in the hot paths cost one comparison.
type observer struct {
	rec      TableRecorder
	schema   Schema
	raw      bigtable.TableAPI
	filters  *filters.Builder
	clock    strategy.Clock
	pool     *shadowPool
	limit    int
	sampling float64 // 0 when no family expires by age: nothing to find
	rand     func() float64
	wire     func(context.Context) context.Context // the table's (wire.go)
}

// recordOpenRefusal counts a refused Open: an invalid schema, GC rules that
// do not match it, no admin client to check them. A failed admin call is not
// a refusal.
func recordOpenRefusal(rec TableRecorder, err error) {
	if reason := RefusalReason(err); rec != nil && reason != "other" {
		rec.Refused("", reason)
	}
}

func newObserver(cfg *config, rec TableRecorder, t *Table, pool *shadowPool) *observer {
	if rec == nil {
		return nil
	}
	o := &observer{
		rec:      rec,
		schema:   t.schema,
		raw:      t.raw,
		filters:  t.filters,
		clock:    t.clock,
		pool:     pool,
		limit:    cfg.shadowLimit,
		sampling: cfg.sampling,
		rand:     cfg.rand,
		wire:     t.wire,
	}
	hasAge := false
	for _, p := range t.schema {
		hasAge = hasAge || p.Kind() == strategy.KindOneSecond || p.Kind() == strategy.KindDefaultExpiry
	}
	if !hasAge {
		o.sampling = 0
	}
	return o
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

// cell records a cell set in family with timestamp ts at now.
func (o *observer) cell(p *strategy.Policy, op *op, ts, now bigtable.Timestamp) {
	if o == nil {
		return
	}
	o.cellSlow(p, op, ts, now)
}

func (o *observer) cellSlow(p *strategy.Policy, op *op, ts, now bigtable.Timestamp) {
	var ttl time.Duration
	switch {
	case p.Kind() != strategy.KindOneSecond && p.Kind() != strategy.KindDefaultExpiry:
	case op.cellOpt == cellOptTTL:
		ttl = op.ttl()
	default:
		// Exact up to time.Duration's range (292 years), the most a
		// histogram observation holds; Sub clamps beyond it, never wraps.
		ttl = p.ExpiryTime(ts).Sub(time.UnixMicro(int64(now)))
	}
	o.rec.CellWritten(op.family, p.Kind(), ttl)
}

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

func (o *observer) sampled() bool {
	s := o.sampling
	return s > 0 && (s >= 1 || o.rand() < s)
}

// afterReadRow may start a shadow read of row, after the caller's read of
// it, with ctx, returned err.
func (o *observer) afterReadRow(ctx context.Context, row string, err error) {
	if o != nil && err == nil && o.sampling > 0 {
		o.afterReadRowSlow(ctx, row)
	}
}

func (o *observer) afterReadRowSlow(ctx context.Context, row string) {
	if o.sampled() {
		o.shadow(ctx, &shadowScan{rows: bigtable.RowList{row}})
	}
}

// shadowScan is a sampled ReadRows: a copy of the caller's row set, and
// where the scan stopped, so the shadow read walks the same rows.
type shadowScan struct {
	o       *observer
	rows    bigtable.RowSet // the shadow read's own copy: the caller may reuse its row set
	f       func(bigtable.Row) bool
	reverse bool
	limit   int64 // the read's LimitRows, 0 for none, -1 when unreadable
	stopped bool
	n       int64
	last    string
}

// limitRows reads the limit out of a bigtable.LimitRows option, whose type
// hides it: -1 if this client version's layout is not the one known.
var (
	limitRowsType  = reflect.TypeOf(bigtable.LimitRows(1))
	limitRowsKnown = limitRowsType.Kind() == reflect.Struct && limitRowsType.NumField() == 1 &&
		limitRowsType.Field(0).Type.Kind() == reflect.Int64 && limitOf(bigtable.LimitRows(7)) == 7
)

func limitOf(opt bigtable.ReadOption) int64 { return reflect.ValueOf(opt).Field(0).Int() }

// copyRowSet is a copy of rows that shares nothing the caller can change:
// a RowList's or RowRangeList's backing array is the caller's, and may be
// reused as soon as ReadRows returns. RowSet's methods are unexported, so
// these are all its implementations; false for any other (nil).
func copyRowSet(rows bigtable.RowSet) (bigtable.RowSet, bool) {
	switch r := rows.(type) {
	case bigtable.RowList:
		return append(bigtable.RowList(nil), r...), true
	case bigtable.RowRangeList:
		return append(bigtable.RowRangeList(nil), r...), true
	case bigtable.RowRange:
		return r, true // a value of strings: nothing shared is mutable
	}
	return nil, false
}

// sampleRows decides whether a ReadRows is sampled: nil when not.
func (o *observer) sampleRows(rows bigtable.RowSet, opts []bigtable.ReadOption) *shadowScan {
	if o == nil || o.sampling == 0 {
		return nil
	}
	return o.sampleRowsSlow(rows, opts)
}

func (o *observer) sampleRowsSlow(rows bigtable.RowSet, opts []bigtable.ReadOption) *shadowScan {
	if !o.sampled() {
		return nil
	}
	own, ok := copyRowSet(rows)
	if !ok {
		return nil
	}
	s := &shadowScan{o: o, rows: own}
	for _, opt := range opts {
		switch {
		case opt == bigtable.ReverseScan():
			s.reverse = true
		case opt != nil && reflect.TypeOf(opt) == limitRowsType:
			// The last LimitRows wins, as in the client.
			if s.limit = -1; limitRowsKnown {
				s.limit = max(limitOf(opt), 0)
			}
		}
	}
	return s
}

// wrap returns the row callback to give the client: f itself when the read
// is not sampled.
func (s *shadowScan) wrap(f func(bigtable.Row) bool) func(bigtable.Row) bool {
	if s == nil {
		return f
	}
	s.f = f
	return s.each
}

func (s *shadowScan) each(r bigtable.Row) bool {
	s.n++
	s.last = r.Key()
	if !s.f(r) {
		s.stopped = true
		return false
	}
	return true
}

// done starts the shadow read of a sampled ReadRows, made with ctx, that
// returned err.
func (s *shadowScan) done(ctx context.Context, err error) {
	if s != nil && err == nil {
		s.doneSlow(ctx)
	}
}

func (s *shadowScan) doneSlow(ctx context.Context) {
	// The server stopped where the caller did, or at the row limit when
	// the read reached it: the scan ended at the last row returned. A read
	// that returned fewer rows than its limit walked the whole row set,
	// and so does the shadow read.
	reachedLimit := s.limit > 0 && s.n >= s.limit || s.limit < 0 && s.n > 0
	if !s.stopped && !reachedLimit {
		s.last = ""
	}
	s.f = nil
	s.o.shadow(ctx, s)
}

// shadow runs the shadow read of s on its own goroutine, or counts it
// dropped. It keeps the values of caller, the caller's read's context
// (trace spans, request IDs), not its cancellation: the caller's read has
// returned.
func (o *observer) shadow(caller context.Context, s *shadowScan) {
	now := bigtable.Timestamp(o.clock.Now().UnixMicro())
	stop, release, ok := o.pool.acquire(o.limit)
	if !ok {
		o.rec.ShadowDropped()
		return
	}
	go func() {
		defer release()
		ctx, cancel := background(caller, stop, shadowTimeout)
		defer cancel()
		o.runShadow(ctx, s, now)
	}()
}

// background is the context of work a call leaves behind it (a shadow
// read, a time-to-idle refresh): caller's values without its cancellation
// (context.WithoutCancel), cancelled with stop's cause when stop (the
// client's pool, cancelled by Close) is done, and after timeout.
func background(caller, stop context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if caller == nil {
		caller = context.Background()
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(caller))
	unregister := context.AfterFunc(stop, func() { cancel(context.Cause(stop)) })
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	return ctx, func() {
		unregister()
		cancelTimeout()
		cancel(context.Canceled)
	}
}

func (o *observer) runShadow(ctx context.Context, s *shadowScan, now bigtable.Timestamp) {
	f := o.filters.Expired(now)
	if f == nil {
		o.rec.ShadowRead(0, nil)
		return
	}
	opts := []bigtable.ReadOption{bigtable.RowFilter(f)}
	if s.reverse {
		opts = append(opts, bigtable.ReverseScan())
	}
	expired := 0
	err := o.raw.ReadRows(o.wire(ctx), s.rows, func(r bigtable.Row) bool {
		if s.last != "" && ((!s.reverse && r.Key() > s.last) || (s.reverse && r.Key() < s.last)) {
			return false
		}
		for fam, items := range r {
			p := o.schema[fam]
			for _, it := range items {
				lag := time.UnixMicro(int64(now)).Sub(p.ExpiryTime(it.Timestamp))
				o.rec.ExpiredCell(fam, p.Kind(), lag)
				expired++
			}
		}
		return true
	}, opts...)
	o.rec.ShadowRead(expired, err)
}

// shadowPool runs a client's shadow reads: at most limit at once, all
// cancelled and waited for by close. Its zero value is ready to use.
type shadowPool struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	active int
	closed bool
	wg     sync.WaitGroup
}

// acquire reserves a slot, or reports false when limit are running or the
// pool is closed.
func (p *shadowPool) acquire(limit int) (context.Context, func(), bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.active >= limit {
		return nil, nil, false
	}
	if p.ctx == nil {
		p.ctx, p.cancel = context.WithCancel(context.Background())
	}
	p.active++
	p.wg.Add(1)
	return p.ctx, p.release, true
}

func (p *shadowPool) release() {
	p.mu.Lock()
	p.active--
	p.mu.Unlock()
	p.wg.Done()
}

// close cancels the running shadow reads and waits for their goroutines.
func (p *shadowPool) close() {
	p.mu.Lock()
	p.closed = true
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
