package ttlclient

import (
	"context"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// The read path after table.go's entry points (ReadRow, ReadRows): the
// options a read sends (the TTL filter before the caller's), then the
// shadow read it may leave behind; idle.go has the time-to-idle look at
// the rows returned (docs/design.md#code-paths).

// readCall is the mark of a read and the options to send: on a
// connection carrying bttl's interceptor the interceptor puts the TTL
// filter before the request's filter (the caller's RowFilter, whichever
// option gave it), so opts go as they are; without it, a read with no
// option gets the TTL filter as its RowFilter, and a read with options,
// one of which may be a RowFilter bttl cannot see, is refused
// (ErrNotDialed) rather than sent without the TTL filter or without the
// caller's filter.
func (t *Table) readCall(ctx context.Context, opts []bigtable.ReadOption) (*wireCall, []bigtable.ReadOption, error) {
	call := &wireCall{t: t, reads: true}
	if !t.filters.Managed() {
		return call, opts, nil
	}
	if len(opts) == 0 {
		if w := t.wireState; w.peek() {
			return call, opts, nil
		}
		if t.checkWire(ctx, "") != nil {
			return call, []bigtable.ReadOption{t.ttlOption(t.now())}, nil
		}
		return call, opts, nil
	}
	if err := t.checkWire(ctx, "a read with options"); err != nil {
		return nil, nil, err
	}
	return call, opts, nil
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
	limit   int64 // the read's LimitRows, 0 for none (from the request the interceptor saw)
	stopped bool
	n       int64
	last    string
}

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
		if opt == bigtable.ReverseScan() {
			s.reverse = true
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
func (s *shadowScan) done(ctx context.Context, call *wireCall, err error) {
	if s != nil && err == nil {
		s.limit = max(call.rowsLimit.Load(), 0)
		s.doneSlow(ctx)
	}
}

func (s *shadowScan) doneSlow(ctx context.Context) {
	// The server stopped where the caller did, or at the row limit when
	// the read reached it: the scan ended at the last row returned. A read
	// that returned fewer rows than its limit walked the whole row set,
	// and so does the shadow read.
	reachedLimit := s.limit > 0 && s.n >= s.limit
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
