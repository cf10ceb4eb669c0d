package ttlclient

import (
	"context"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/internal/shadow"
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
	// CellWritten: one cell set in family, counted as the request is sent
	// (once per call or bulk row, not per retry), not as the server
	// confirms it: a conditional mutation counts the cells of both
	// branches, whichever the predicate picks. ttl is the cell's TTL on an
	// age family, 0 on sequence and unmanaged families (caller's path).
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
// client, for all its tables.
const DefaultShadowConcurrency = 4

// shadowTimeout bounds one shadow read, so a stuck one frees its slot.
const shadowTimeout = 30 * time.Second

// WithRecorder makes tables report reads, writes, TTLs, refusals, the
// library's added latency and, through shadow reads, the expired cells
// still stored. nil (the default) records nothing and costs one nil check
// per call.
func WithRecorder(r Recorder) Option {
	return bothOption(func(cfg *config) { cfg.recorder = r })
}

// WithShadowSampling sets the fraction of reads (0 to 1, default 0.01)
// followed by a shadow read; 0 turns shadow reads off. A shadow read runs
// after the caller's read has returned, on the client's pool: it reads the
// same rows again with the inverse TTL filter (only expired cells, values
// stripped), as far as the caller's scan went, and reports what it finds
// to the Recorder. It costs one extra read RPC per sampled read and never
// changes the caller's result, error or latency, nor touches its
// arguments after the read returns (docs/design.md#shadow-reads). Only
// used with WithRecorder.
func WithShadowSampling(fraction float64) Option {
	return bothOption(func(cfg *config) {
		switch {
		case !(fraction > 0): // also NaN
			fraction = 0
		case fraction > 1:
			fraction = 1
		}
		cfg.sampling = fraction
	})
}

// WithShadowConcurrency bounds the shadow reads a client runs at once, for
// all its tables (default 4, at least 1). A sampled read finding them all
// busy gets none, and the Recorder counts it as dropped. A ClientOption
// only: a pool its tables share has one bound, the client's.
func WithShadowConcurrency(n int) ClientOption {
	return clientOption(func(cfg *config) { cfg.shadowLimit = max(n, 1) })
}

// WithShadowRand sets the random source of the sampler, uniform in [0, 1)
// (default math/rand/v2.Float64), so tests decide which reads are sampled.
// It is called concurrently.
func WithShadowRand(f func() float64) Option {
	return bothOption(func(cfg *config) {
		if f != nil {
			cfg.rand = f
		}
	})
}

// RefusalReason is the stable snake_case name of the sentinel err wraps
// ("server_timestamp" for strategy.ErrServerTimestamp, ...), "other" when
// it wraps none: the refusal counter's reason label, from bttl's refusal
// registry, the same on every path (the wire guard's refusals count under
// it too). The names are part of the metrics' contract.
func RefusalReason(err error) string { return rules.Metric(err) }

// observer is a table's link to its Recorder. A table without a Recorder
// has a nil observer, and every method starts with a nil check, so the
// hooks in the hot paths cost one comparison.
type observer struct {
	rec    TableRecorder
	schema Schema
	shadow *shadow.Reader // nil when nothing is sampled or no family expires by age
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

// recordOpenRefusal counts a refused Open: an invalid schema, GC rules that
// do not match it, no admin client to check them. A failed admin call is not
// a refusal.
func recordOpenRefusal(rec TableRecorder, err error) {
	if reason := RefusalReason(err); rec != nil && reason != "other" {
		rec.Refused("", reason)
	}
}

func newObserver(cfg *config, rec TableRecorder, t *Table, pool *shadow.Pool) *observer {
	if rec == nil {
		return nil
	}
	o := &observer{rec: rec, schema: t.schema}
	if t.hasAge && cfg.sampling > 0 {
		o.shadow = &shadow.Reader{Rec: rec, Schema: t.schema, Raw: t.raw, Filters: t.filters, Clock: t.clock, Pool: pool,
			Sampling: cfg.sampling, Rand: cfg.rand, Wire: t.wire, Run: o.runShadow}
	}
	return o
}

// runShadow runs one of the table's shadow reads (internal/shadow), on
// the client's pool.
func (o *observer) runShadow(ctx context.Context, read func(context.Context)) { read(ctx) }

// afterReadRow may start a shadow read of row, after the caller's read of
// it, with ctx, returned err.
func (o *observer) afterReadRow(ctx context.Context, row string, err error) {
	if o != nil && err == nil && o.shadow != nil {
		o.shadow.AfterReadRow(ctx, row)
	}
}

// sampleRows decides whether a ReadRows is sampled: nil when not.
func (o *observer) sampleRows(rows bigtable.RowSet, opts []bigtable.ReadOption) *shadow.Scan {
	if o == nil || o.shadow == nil {
		return nil
	}
	return o.shadow.SampleRows(rows, opts)
}
