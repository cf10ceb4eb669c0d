package ttlclient

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// The read path after table.go's entry points (ReadRow, ReadRows): the
// options a read sends (the TTL filter before the caller's), then the
// shadow read it may leave behind; idle.go has the time-to-idle look at
// the rows returned (docs/design.md#code-paths).

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

// bigtable.RowFilter returns an opaque ReadOption, and the last RowFilter
// given is the one a read uses. To put the TTL filter first while callers
// keep passing bigtable.RowFilter, the table has to see the caller's filter:
// it reads it out of the option's one field. The layout is checked once at
// start-up against the client version in use; if it ever changes, reads
// that carry a RowFilter fail with ErrUnsupportedReadOption instead of
// dropping either filter. CheckCompatibility reports it (check
// "row-filter"), and NewClient and Wrap log it.
var (
	rowFilterType  = reflect.TypeOf(bigtable.RowFilter(bigtable.PassAllFilter()))
	filterType     = reflect.TypeOf((*bigtable.Filter)(nil)).Elem()
	rowFilterKnown = rowFilterType.Kind() == reflect.Struct &&
		rowFilterType.NumField() == 1 &&
		rowFilterType.Field(0).Type == filterType &&
		rowFilterType.Size() == filterType.Size() &&
		rowFilterSelfCheck()
)

// isRowFilter reports whether opt is a bigtable.RowFilter option.
func isRowFilter(opt bigtable.ReadOption) bool {
	return opt != nil && reflect.TypeOf(opt) == rowFilterType
}

// rowFilterOf returns the filter inside a bigtable.RowFilter option. It is
// on every read's path, so it reads the boxed struct in place rather than
// copying it through reflect (which allocated once per read).
func rowFilterOf(opt bigtable.ReadOption) (bigtable.Filter, bool) {
	if !rowFilterKnown {
		return nil, false
	}
	return unboxRowFilter(opt), true
}

// unboxRowFilter reads the Filter field of the rowFilter struct opt holds.
// A struct of two words is stored behind the interface's data pointer, and
// its only field is at offset 0.
func unboxRowFilter(opt bigtable.ReadOption) bigtable.Filter {
	type iface struct {
		tab  unsafe.Pointer
		data unsafe.Pointer
	}
	return *(*bigtable.Filter)((*iface)(unsafe.Pointer(&opt)).data)
}

// rowFilterSelfCheck proves the in-place read on this client version: it
// must give back the filter an option was made with.
func rowFilterSelfCheck() bool {
	want := bigtable.LatestNFilter(7)
	got := unboxRowFilter(bigtable.RowFilter(want))
	return got != nil && reflect.TypeOf(got) == reflect.TypeOf(want) && got.String() == want.String()
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

func (o *observer) sampled() bool {
	s := o.sampling
	return s > 0 && (s >= 1 || o.rand() < s)
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
	stop, release, ok := o.pool.acquire()
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

// shadowPool runs a client's shadow reads, for all its tables: at most
// limit at once, all cancelled and waited for by close. The client sets
// limit once, before any table uses it.
type shadowPool struct {
	limit int

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	active int
	closed bool
	wg     sync.WaitGroup
}

// acquire reserves a slot, or reports false when limit are running or the
// pool is closed.
func (p *shadowPool) acquire() (context.Context, func(), bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.active >= p.limit {
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
