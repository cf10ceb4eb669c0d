package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Metric names, as Prometheus exposes them: the Recorder's
// prometheus.Collector uses them, and OpenTelemetry's Prometheus exporter
// gives the OpenTelemetry instruments (OTel* below) the same names.
const (
	ReadsTotal        = "bttl_reads_total"
	WritesTotal       = "bttl_writes_total"
	CellsWrittenTotal = "bttl_cells_written_total"
	WriteTTLSeconds   = "bttl_write_ttl_seconds"
	RefusalsTotal     = "bttl_refusals_total"
	// ShadowReadExpiredCellsTotal counts observations, not a stock: each
	// expired-but-not-collected cell a sampled read walked past, once per
	// read. audit.WriteMetrics exports the stock (bttl_audit_*).
	ShadowReadExpiredCellsTotal = "bttl_shadow_read_expired_cells_total"
	GCLagSeconds                = "bttl_expired_not_collected_gc_lag_seconds"
	ReadHiddenCells             = "bttl_read_hidden_cells"
	ReadAddedLatencySeconds     = "bttl_read_added_latency_seconds"
	WriteAddedLatencySeconds    = "bttl_write_added_latency_seconds"
	ShadowReadsTotal            = "bttl_shadow_reads_total"
	ShadowReadsFailedTotal      = "bttl_shadow_reads_failed_total"
	ShadowReadsDroppedTotal     = "bttl_shadow_reads_dropped_total"
	VerifySkippedTotal          = "bttl_verify_skipped_total"
	// IdleRefreshesTotal counts the cells reads returned from families
	// with an idle TTL (strategy.WithIdleTTL), by what became of them
	// (LabelResult: ttlclient.IdleResult's names).
	IdleRefreshesTotal = "bttl_idle_refreshes_total"
	// IdleRefreshFailuresTotal counts the time-to-idle refreshes that
	// failed, by reason (LabelReason: ttlclient.IdleFailureRecorder's:
	// transactions_not_allowed and read_only_profile when the app
	// profile refuses them, rpc for other errors).
	IdleRefreshFailuresTotal = "bttl_idle_refresh_failures_total"
	// ClientIncompatibleTotal counts a table's calls refused because its
	// client's connection lacks bttl's interceptor (ttlclient.ErrNotDialed),
	// by check (LabelCheck: "interceptor").
	ClientIncompatibleTotal = "bttl_client_incompatible_total"
)

// OpenTelemetry instrument names, per OpenTelemetry's semantic conventions
// for metric names: dotted, lower case, no unit and no "_total" in the
// name, the unit in the instrument's unit field ("s", or a {annotation}
// for counts). OpenTelemetry's Prometheus exporter turns each into the
// Prometheus name above (bttl.write.ttl with unit s becomes
// bttl_write_ttl_seconds; the counter bttl.reads becomes bttl_reads_total).
const (
	OTelReads                  = "bttl.reads"
	OTelWrites                 = "bttl.writes"
	OTelCellsWritten           = "bttl.cells_written"
	OTelWriteTTL               = "bttl.write.ttl"
	OTelRefusals               = "bttl.refusals"
	OTelShadowReadExpiredCells = "bttl.shadow_read.expired_cells"
	OTelGCLag                  = "bttl.expired_not_collected.gc_lag"
	OTelReadHiddenCells        = "bttl.read.hidden_cells"
	OTelReadAddedLatency       = "bttl.read.added_latency"
	OTelWriteAddedLatency      = "bttl.write.added_latency"
	OTelShadowReads            = "bttl.shadow_reads"
	OTelShadowReadsFailed      = "bttl.shadow_reads.failed"
	OTelShadowReadsDropped     = "bttl.shadow_reads.dropped"
	OTelVerifySkipped          = "bttl.verify.skipped"
	OTelIdleRefreshes          = "bttl.idle_refreshes"
	OTelIdleRefreshFailures    = "bttl.idle_refresh.failures"
	OTelClientIncompatible     = "bttl.client.incompatible"
)

// Label names. Their values are bounded: table names, the schema's family
// names, strategy names (strategy.Kind.String) and refusal reasons
// (ttlclient.RefusalReason); never row keys or columns.
const (
	LabelTable    = "table"
	LabelFamily   = "family"
	LabelStrategy = "strategy"
	LabelReason   = "reason"
	// LabelResult is a time-to-idle result: refreshed, skipped (not due
	// yet: the debounce), dropped, failed, conflict.
	LabelResult = "result"
	// LabelCheck is a failed client-version check: mutation, row-filter,
	// limit-rows (ttlclient.CompatibilityFailure.Check).
	LabelCheck = "check"
)

const (
	instrumentationName = "github.com/bttl/bttl/metrics"
	otelUnitSeconds     = "s"
)

// IdleFailureReasons are the reasons of bttl_idle_refresh_failures_total
// whose series exist, at 0, for every family with an idle TTL: the app
// profile's refusals and any other error. Other registry reasons (a cell
// too large to pin, say) appear when they happen.
var IdleFailureReasons = []string{"transactions_not_allowed", "read_only_profile", "rpc"}

// Histogram buckets. GC can lag expiry by up to a week.
var (
	// GCLagBuckets are the bounds, in seconds, of the GC lag histogram:
	// 1s to two weeks.
	GCLagBuckets = []float64{1, 10, 60, 300, 1800, 3600, 6 * 3600, 86400, 3 * 86400, 7 * 86400, 14 * 86400}
	// TTLBuckets are the bounds, in seconds, of the written-TTL histogram:
	// 1s to a year, in steps of at most 3x from 1s to 30 days, so a
	// quantile of short TTLs (seconds) is read as seconds, not minutes.
	TTLBuckets = []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 2 * 3600, 6 * 3600, 12 * 3600,
		86400, 2 * 86400, 4 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 90 * 86400, 365 * 86400}
	// LatencyBuckets are the bounds, in seconds, of the added-latency
	// histograms: 1µs to 10ms.
	LatencyBuckets = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2}
	// HiddenCellsBuckets are the bounds of the cells hidden per sampled
	// read.
	HiddenCellsBuckets = []float64{0, 1, 2, 5, 10, 20, 50, 100, 1000, 10000}
)

// Option configures New.
type Option func(*options)

type options struct {
	provider metric.MeterProvider
}

// WithMeterProvider sets the OpenTelemetry MeterProvider the instruments
// come from (default: otel.GetMeterProvider(), the global one, which
// records nothing until an SDK is installed).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) {
		if mp != nil {
			o.provider = mp
		}
	}
}

// Recorder is the one recorder of package metrics: give it to
// ttlclient.WithRecorder, and it reports through OpenTelemetry and, being a
// prometheus.Collector, through any Prometheus registry it is registered
// on. Safe for concurrent use; one Recorder can serve many clients and
// tables.
//
// Its OpenTelemetry instruments record with context.Background(): the
// ttlclient.Recorder methods carry no request context (most are called
// after the call, or off its path), and the Recorder keeps none.
type Recorder struct {
	reads, writes, cells, refusals, expired, shadows, failed, dropped, skipped, idle, idleFail, incompatible *prometheus.CounterVec
	ttl, gcLag, hidden, readLat, writeLat                                                                    *prometheus.HistogramVec

	oReads, oWrites, oCells, oRefusals, oExpired, oShadows, oFailed, oDropped, oSkipped, oIdle, oIdleFail, oIncompatible metric.Int64Counter
	oTTL, oGCLag, oReadLat, oWriteLat                                                                                    metric.Float64Histogram
	oHidden                                                                                                              metric.Int64Histogram

	refusalMu sync.Mutex
	refusalOK map[[3]string][]metric.AddOption
}

var (
	_ ttlclient.Recorder   = (*Recorder)(nil)
	_ prometheus.Collector = (*Recorder)(nil)
)

// New returns a Recorder. Its OpenTelemetry instruments are created now,
// from the MeterProvider option; an instrument the provider refuses is
// replaced by a no-op and reported through otel.Handle.
func New(opts ...Option) *Recorder {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.provider == nil {
		o.provider = otel.GetMeterProvider()
	}
	r := &Recorder{refusalOK: map[[3]string][]metric.AddOption{}}
	tfs := []string{LabelTable, LabelFamily, LabelStrategy}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	const (
		hReads    = "Read calls (ReadRow, ReadRows) sent through bttl."
		hWrites   = "Write calls (Apply, ApplyBulk, ApplyReadModifyWrite) sent through bttl."
		hCells    = "Cells set by writes through bttl."
		hTTL      = "TTL of the cells written to age families (one-second, default-expiry), in seconds."
		hRefusals = "Calls refused by a guardrail before any RPC, by reason."
		hExpired  = "Expired cells still stored (not yet collected by GC) that sampled reads walked past, found by shadow reads: observations, a cell read twice counts twice."
		hGCLag    = "How long past their expiry the expired-but-not-collected cells were, in seconds."
		hHidden   = "Cells the TTL filters hid from one sampled read (its shadow read's expired cells)."
		hReadLat  = "Time bttl adds to a read before its RPC, in seconds."
		hWriteLat = "Time bttl adds to a write before its RPC, in seconds."
		hShadows  = "Shadow reads completed."
		hFailed   = "Shadow reads that failed (the caller's read is unaffected)."
		hDropped  = "Sampled reads whose shadow read was dropped: concurrency limit reached or client closed."
		hSkipped  = "Tables opened without checking their GC rules (ttlclient.WithoutVerify)."
		hIncompat = "Calls of a table refused because its client's connection lacks bttl's interceptor (ttlclient.ErrNotDialed), by check (interceptor)."
		hIdleFail = "Time-to-idle refreshes that failed, by reason: transactions_not_allowed or read_only_profile (the app profile refuses them: every refresh fails), rpc (another error)."
		hIdle     = "Cells reads returned from families with an idle TTL, by result: refreshed, skipped (not due: the debounce), dropped (queue full or client closed), failed, conflict (changed before the refresh)."
	)
	r.reads = counter(ReadsTotal, hReads, LabelTable)
	r.writes = counter(WritesTotal, hWrites, LabelTable)
	r.cells = counter(CellsWrittenTotal, hCells, tfs...)
	r.refusals = counter(RefusalsTotal, hRefusals, LabelTable, LabelFamily, LabelReason)
	r.expired = counter(ShadowReadExpiredCellsTotal, hExpired, tfs...)
	r.shadows = counter(ShadowReadsTotal, hShadows, LabelTable)
	r.failed = counter(ShadowReadsFailedTotal, hFailed, LabelTable)
	r.dropped = counter(ShadowReadsDroppedTotal, hDropped, LabelTable)
	r.skipped = counter(VerifySkippedTotal, hSkipped, LabelTable)
	r.idle = counter(IdleRefreshesTotal, hIdle, LabelTable, LabelFamily, LabelResult)
	r.idleFail = counter(IdleRefreshFailuresTotal, hIdleFail, LabelTable, LabelFamily, LabelReason)
	r.incompatible = counter(ClientIncompatibleTotal, hIncompat, LabelTable, LabelCheck)
	r.ttl = histogram(WriteTTLSeconds, hTTL, TTLBuckets, tfs...)
	r.gcLag = histogram(GCLagSeconds, hGCLag, GCLagBuckets, tfs...)
	r.hidden = histogram(ReadHiddenCells, hHidden, HiddenCellsBuckets, LabelTable)
	r.readLat = histogram(ReadAddedLatencySeconds, hReadLat, LatencyBuckets, LabelTable)
	r.writeLat = histogram(WriteAddedLatencySeconds, hWriteLat, LatencyBuckets, LabelTable)

	m := o.provider.Meter(instrumentationName)
	ocounter := func(name, help, unit string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(help), metric.WithUnit(unit))
		if err != nil {
			otel.Handle(err)
		}
		if c == nil {
			c = noop.Int64Counter{}
		}
		return c
	}
	ohistogram := func(name, help string, buckets []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithDescription(help), metric.WithUnit(otelUnitSeconds), metric.WithExplicitBucketBoundaries(buckets...))
		if err != nil {
			otel.Handle(err)
		}
		if h == nil {
			h = noop.Float64Histogram{}
		}
		return h
	}
	r.oReads = ocounter(OTelReads, hReads, "{call}")
	r.oWrites = ocounter(OTelWrites, hWrites, "{call}")
	r.oCells = ocounter(OTelCellsWritten, hCells, "{cell}")
	r.oRefusals = ocounter(OTelRefusals, hRefusals, "{call}")
	r.oExpired = ocounter(OTelShadowReadExpiredCells, hExpired, "{cell}")
	r.oShadows = ocounter(OTelShadowReads, hShadows, "{read}")
	r.oFailed = ocounter(OTelShadowReadsFailed, hFailed, "{read}")
	r.oDropped = ocounter(OTelShadowReadsDropped, hDropped, "{read}")
	r.oSkipped = ocounter(OTelVerifySkipped, hSkipped, "{open}")
	r.oIdle = ocounter(OTelIdleRefreshes, hIdle, "{cell}")
	r.oIdleFail = ocounter(OTelIdleRefreshFailures, hIdleFail, "{refresh}")
	r.oIncompatible = ocounter(OTelClientIncompatible, hIncompat, "{open}")
	r.oTTL = ohistogram(OTelWriteTTL, hTTL, TTLBuckets)
	r.oGCLag = ohistogram(OTelGCLag, hGCLag, GCLagBuckets)
	r.oReadLat = ohistogram(OTelReadAddedLatency, hReadLat, LatencyBuckets)
	r.oWriteLat = ohistogram(OTelWriteAddedLatency, hWriteLat, LatencyBuckets)
	var err error
	r.oHidden, err = m.Int64Histogram(OTelReadHiddenCells, metric.WithDescription(hHidden), metric.WithUnit("{cell}"), metric.WithExplicitBucketBoundaries(HiddenCellsBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	if r.oHidden == nil {
		r.oHidden = noop.Int64Histogram{}
	}
	return r
}

func (r *Recorder) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.reads, r.writes, r.cells, r.refusals, r.expired, r.shadows, r.failed, r.dropped, r.skipped, r.idle, r.idleFail, r.incompatible, r.ttl, r.gcLag, r.hidden, r.readLat, r.writeLat}
}

// Describe implements prometheus.Collector.
func (r *Recorder) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range r.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (r *Recorder) Collect(ch chan<- prometheus.Metric) {
	for _, c := range r.collectors() {
		c.Collect(ch)
	}
}

// Table implements ttlclient.Recorder: it resolves every series of the
// table and its families once, so recording is a few atomic adds.
func (r *Recorder) Table(table string, schema ttlclient.Schema) ttlclient.TableRecorder {
	t := &tableRecorder{
		r:        r,
		table:    table,
		families: make(map[string]*familyRecorder, len(schema)),
		reads:    r.reads.WithLabelValues(table),
		writes:   r.writes.WithLabelValues(table),
		shadows:  r.shadows.WithLabelValues(table),
		failed:   r.failed.WithLabelValues(table),
		dropped:  r.dropped.WithLabelValues(table),
		hidden:   r.hidden.WithLabelValues(table),
		readLat:  r.readLat.WithLabelValues(table),
		writeLat: r.writeLat.WithLabelValues(table),
		add:      addOpts(attribute.String(LabelTable, table)),
	}
	t.record = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelTable, table)))}
	for fam, p := range schema {
		t.families[fam] = r.family(table, fam, p.Kind())
		if p.RefreshesOnRead() {
			t.families[fam].idle = r.idleSeries(table, fam)
			// The failure series exist from the start, at 0, so that
			// increase() sees the first failure (a series born at 1
			// has no increase) and BttlIdleRefreshesFailing fires on it.
			for _, reason := range IdleFailureReasons {
				r.idleFail.WithLabelValues(table, fam, reason)
			}
		}
	}
	return t
}

// idleSeries resolves a time-to-idle family's series, one per result, so
// they are exported (at 0) from the start.
func (r *Recorder) idleSeries(table, fam string) []idleSeries {
	out := make([]idleSeries, idleResults)
	for i := range out {
		res := ttlclient.IdleResult(i).String()
		out[i] = idleSeries{
			prom: r.idle.WithLabelValues(table, fam, res),
			add: addOpts(attribute.String(LabelTable, table), attribute.String(LabelFamily, fam),
				attribute.String(LabelResult, res)),
		}
	}
	return out
}

// idleResults is the number of ttlclient.IdleResult values.
const idleResults = int(ttlclient.IdleConflict) + 1

type idleSeries struct {
	prom prometheus.Counter
	add  []metric.AddOption
}

func (r *Recorder) family(table, fam string, kind strategy.Kind) *familyRecorder {
	s := kind.String()
	set := attribute.NewSet(attribute.String(LabelTable, table), attribute.String(LabelFamily, fam), attribute.String(LabelStrategy, s))
	f := &familyRecorder{
		cells:  r.cells.WithLabelValues(table, fam, s),
		add:    []metric.AddOption{metric.WithAttributeSet(set)},
		record: []metric.RecordOption{metric.WithAttributeSet(set)},
	}
	if kind == strategy.KindOneSecond || kind == strategy.KindDefaultExpiry {
		f.expired = r.expired.WithLabelValues(table, fam, s)
		f.ttl = r.ttl.WithLabelValues(table, fam, s)
		f.gcLag = r.gcLag.WithLabelValues(table, fam, s)
	}
	return f
}

func addOpts(kv ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

type tableRecorder struct {
	r        *Recorder
	table    string
	families map[string]*familyRecorder // read-only after Table

	reads, writes, shadows, failed, dropped prometheus.Counter
	hidden, readLat, writeLat               prometheus.Observer
	add                                     []metric.AddOption
	record                                  []metric.RecordOption
}

type familyRecorder struct {
	idle           []idleSeries // by ttlclient.IdleResult; nil without an idle TTL
	cells, expired prometheus.Counter
	ttl, gcLag     prometheus.Observer // nil, like expired, unless the family expires by age
	add            []metric.AddOption
	record         []metric.RecordOption
}

func (t *tableRecorder) Read(added time.Duration) {
	s := added.Seconds()
	t.reads.Inc()
	t.readLat.Observe(s)
	t.r.oReads.Add(context.Background(), 1, t.add...)
	t.r.oReadLat.Record(context.Background(), s, t.record...)
}

func (t *tableRecorder) Write(added time.Duration) {
	s := added.Seconds()
	t.writes.Inc()
	t.writeLat.Observe(s)
	t.r.oWrites.Add(context.Background(), 1, t.add...)
	t.r.oWriteLat.Record(context.Background(), s, t.record...)
}

func (t *tableRecorder) CellWritten(family string, _ strategy.Kind, ttl time.Duration) {
	f := t.families[family]
	if f == nil {
		return // ttlclient refuses cells of families outside the schema
	}
	f.cells.Inc()
	t.r.oCells.Add(context.Background(), 1, f.add...)
	if f.ttl != nil && ttl > 0 {
		s := ttl.Seconds()
		f.ttl.Observe(s)
		t.r.oTTL.Record(context.Background(), s, f.record...)
	}
}

func (t *tableRecorder) Refused(family, reason string) {
	if _, ok := t.families[family]; !ok {
		family = "" // keeps the label bounded whatever the caller wrote
	}
	t.r.refusals.WithLabelValues(t.table, family, reason).Inc()
	t.r.oRefusals.Add(context.Background(), 1, t.r.refusalOpts(t.table, family, reason)...)
}

// GuardRefused counts a refusal of the wire guard (wireguard.WithRecorder:
// the Recorder implements wireguard.Recorder without importing it) into
// bttl_refusals_total, as Refused counts ttlclient's. The guard passes only
// bounded labels: a guarded table or "", a family of its schema or "", and
// its rule in snake_case.
func (r *Recorder) GuardRefused(table, family, reason string) {
	r.refusals.WithLabelValues(table, family, reason).Inc()
	r.oRefusals.Add(context.Background(), 1, r.refusalOpts(table, family, reason)...)
}

// refusalOpts caches the attribute sets of refusals: the reasons are few.
func (r *Recorder) refusalOpts(table, family, reason string) []metric.AddOption {
	key := [3]string{table, family, reason}
	r.refusalMu.Lock()
	defer r.refusalMu.Unlock()
	opts, ok := r.refusalOK[key]
	if !ok {
		opts = addOpts(attribute.String(LabelTable, table), attribute.String(LabelFamily, family), attribute.String(LabelReason, reason))
		r.refusalOK[key] = opts
	}
	return opts
}

func (t *tableRecorder) ExpiredCell(family string, _ strategy.Kind, gcLag time.Duration) {
	f := t.families[family]
	if f == nil || f.gcLag == nil {
		return
	}
	s := gcLag.Seconds()
	f.expired.Inc()
	f.gcLag.Observe(s)
	t.r.oExpired.Add(context.Background(), 1, f.add...)
	t.r.oGCLag.Record(context.Background(), s, f.record...)
}

func (t *tableRecorder) ShadowRead(expired int, err error) {
	if err != nil {
		t.failed.Inc()
		t.r.oFailed.Add(context.Background(), 1, t.add...)
		return
	}
	t.shadows.Inc()
	t.r.oShadows.Add(context.Background(), 1, t.add...)
	t.hidden.Observe(float64(expired))
	t.r.oHidden.Record(context.Background(), int64(expired), t.record...)
}

func (t *tableRecorder) ShadowDropped() {
	t.dropped.Inc()
	t.r.oDropped.Add(context.Background(), 1, t.add...)
}

var _ ttlclient.IdleRecorder = (*tableRecorder)(nil)

// IdleRefresh implements ttlclient.IdleRecorder.
func (t *tableRecorder) IdleRefresh(family string, result ttlclient.IdleResult, n int) {
	f := t.families[family]
	if f == nil || int(result) >= len(f.idle) || n <= 0 {
		return
	}
	s := f.idle[result]
	s.prom.Add(float64(n))
	t.r.oIdle.Add(context.Background(), int64(n), s.add...)
}

var _ ttlclient.IdleFailureRecorder = (*tableRecorder)(nil)

// IdleRefreshFailed implements ttlclient.IdleFailureRecorder.
func (t *tableRecorder) IdleRefreshFailed(family, reason string) {
	if _, ok := t.families[family]; !ok {
		family = ""
	}
	t.r.idleFail.WithLabelValues(t.table, family, reason).Inc()
	t.r.oIdleFail.Add(context.Background(), 1, addOpts(attribute.String(LabelTable, t.table), attribute.String(LabelFamily, family), attribute.String(LabelReason, reason))...)
}

var _ ttlclient.CompatibilityRecorder = (*tableRecorder)(nil)

// IncompatibleClient implements ttlclient.CompatibilityRecorder.
func (t *tableRecorder) IncompatibleClient(check string) {
	t.r.incompatible.WithLabelValues(t.table, check).Inc()
	t.r.oIncompatible.Add(context.Background(), 1, addOpts(attribute.String(LabelTable, t.table), attribute.String(LabelCheck, check))...)
}

func (t *tableRecorder) VerifySkipped() {
	t.r.skipped.WithLabelValues(t.table).Inc()
	t.r.oSkipped.Add(context.Background(), 1, t.add...)
}
