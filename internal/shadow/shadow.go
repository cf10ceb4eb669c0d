// Package shadow reads again, off the caller's path, a sample of a
// ttlclient table's reads with the inverse TTL filter (only expired cells,
// values stripped), and reports the expired cells still stored to the
// table's recorder (ttlclient.WithShadowSampling; docs/design.md#metrics).
// A shadow read never changes the caller's result, error or latency: it
// runs on the client's bounded pool, or is dropped and counted.
package shadow

import (
	"context"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/workpool"
	"github.com/bttl/bttl/strategy"
)

// Recorder receives what shadow reads find: the shadow methods of
// ttlclient.TableRecorder, called off the caller's path.
type Recorder interface {
	ExpiredCell(family string, kind strategy.Kind, gcLag time.Duration)
	ShadowRead(expired int, err error)
	ShadowDropped()
}

// Reader samples one table's reads and runs their shadow reads.
type Reader struct {
	Rec      Recorder
	Schema   strategy.Schema
	Raw      bigtable.TableAPI
	Filters  *filters.Builder
	Clock    strategy.Clock
	Pool     *Pool
	Sampling float64 // the fraction of reads sampled, in (0, 1]
	Rand     func() float64
	Wire     func(context.Context) context.Context // marks the shadow read as the table's own
	// Run runs a shadow read, read(ctx), on the pool's goroutine: the
	// table's frame on the stack of every shadow read (ttlclient's
	// observer.runShadow, which the tests counting running shadow reads
	// look for).
	Run func(ctx context.Context, read func(context.Context))
}

// AfterReadRow may start a shadow read of row, after the caller's read of
// it with ctx.
func (o *Reader) AfterReadRow(ctx context.Context, row string) {
	if o.sampled() {
		o.shadow(ctx, &Scan{rows: bigtable.RowList{row}})
	}
}

func (o *Reader) sampled() bool {
	s := o.Sampling
	return s > 0 && (s >= 1 || o.Rand() < s)
}

// Scan is a sampled ReadRows: a copy of the caller's row set, and
// where the scan stopped, so the shadow read walks the same rows.
type Scan struct {
	o       *Reader
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

// SampleRows decides whether a ReadRows of rows with opts is sampled: nil
// when not.
func (o *Reader) SampleRows(rows bigtable.RowSet, opts []bigtable.ReadOption) *Scan {
	if !o.sampled() {
		return nil
	}
	own, ok := copyRowSet(rows)
	if !ok {
		return nil
	}
	s := &Scan{o: o, rows: own}
	for _, opt := range opts {
		if opt == bigtable.ReverseScan() {
			s.reverse = true
		}
	}
	return s
}

// Wrap returns the row callback to give the client: f itself when the read
// is not sampled (s nil).
func (s *Scan) Wrap(f func(bigtable.Row) bool) func(bigtable.Row) bool {
	if s == nil {
		return f
	}
	s.f = f
	return s.each
}

func (s *Scan) each(r bigtable.Row) bool {
	s.n++
	s.last = r.Key()
	if !s.f(r) {
		s.stopped = true
		return false
	}
	return true
}

// Done starts the shadow read of a sampled ReadRows, made with ctx, that
// returned err; limit is its request's rows limit (the first attempt's,
// as the interceptor saw it), 0 for none.
func (s *Scan) Done(ctx context.Context, limit int64, err error) {
	if s != nil && err == nil {
		s.limit = max(limit, 0)
		s.done(ctx)
	}
}

func (s *Scan) done(ctx context.Context) {
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

// job is one shadow read: the sampled read's rows, read again at now.
type job struct {
	o   *Reader
	s   *Scan
	now bigtable.Timestamp
}

// Pool is a client's pool of shadow reads, for all its tables.
type Pool = workpool.Pool[struct{}, job]

// NewPool is a pool running at most limit shadow reads at once, none
// waiting, each with the caller's read's values (trace spans, request
// IDs), not its cancellation (the caller's read has returned), and
// bounded by timeout.
func NewPool(limit int, timeout time.Duration) *Pool {
	return workpool.New(workpool.Config[struct{}, job]{
		Workers: limit, Timeout: timeout, Cause: context.Canceled,
		Run: func(ctx context.Context, j job) { j.o.Run(ctx, func(ctx context.Context) { j.o.run(ctx, j.s, j.now) }) },
	})
}

// shadow runs the shadow read of s on the client's pool, or counts it
// dropped.
func (o *Reader) shadow(caller context.Context, s *Scan) {
	now := bigtable.Timestamp(o.Clock.Now().UnixMicro())
	if o.Pool.Submit(caller, job{o: o, s: s, now: now}) == workpool.Dropped {
		o.Rec.ShadowDropped()
	}
}

func (o *Reader) run(ctx context.Context, s *Scan, now bigtable.Timestamp) {
	f := o.Filters.Expired(now)
	if f == nil {
		o.Rec.ShadowRead(0, nil)
		return
	}
	opts := []bigtable.ReadOption{bigtable.RowFilter(f)}
	if s.reverse {
		opts = append(opts, bigtable.ReverseScan())
	}
	expired := 0
	err := o.Raw.ReadRows(o.Wire(ctx), s.rows, func(r bigtable.Row) bool {
		if s.last != "" && ((!s.reverse && r.Key() > s.last) || (s.reverse && r.Key() < s.last)) {
			return false
		}
		for fam, items := range r {
			p := o.Schema[fam]
			for _, it := range items {
				lag := time.UnixMicro(int64(now)).Sub(p.ExpiryTime(it.Timestamp))
				o.Rec.ExpiredCell(fam, p.Kind(), lag)
				expired++
			}
		}
		return true
	}, opts...)
	o.Rec.ShadowRead(expired, err)
}
