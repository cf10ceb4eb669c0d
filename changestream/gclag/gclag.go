// Package gclag reports Bigtable's garbage collection of bttl-managed cells
// as it happens: from a table's change stream (package changestream), each
// GARBAGE_COLLECTION deletion of a cell in a family whose bttl strategy
// gives cells an expiry instant becomes an Event with its GC lag, the
// commit time of the deletion minus the cell's expiry instant (for managed
// families the expiry is in the cell's timestamp, strategy.Policy.ExpiryTime).
// Events go to a Go callback and as JSON lines to an io.Writer; the lags
// feed the Prometheus histogram bttl_gc_lag_seconds per table and family.
//
// The lag is exact when a GC record names one cell (a DeleteFromColumn
// whose time range starts at the cell's timestamp, as the test server
// bttest_harness/changestreams records it). The change stream's docs do not
// say how production shapes GC records: a range covering several cells
// gives the lag of its oldest (an upper bound for the others), and a range
// starting at 0, or a whole-family or whole-row deletion, names no cell and
// is counted as unattributed rather than guessed.
//
// Delivery follows the consumer's: at least once, so after a restart an
// event may be reported (and observed) again.
package gclag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/strategy"
	"github.com/prometheus/client_golang/prometheus"
)

// MetricName is the histogram's name.
const MetricName = "bttl_gc_lag_seconds"

// DefaultBuckets span one second to a week, the most a change stream
// retains; Bigtable documents that GC can take up to a week.
var DefaultBuckets = []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 4 * 86400, 7 * 86400}

// Event is one managed cell collected by GC.
type Event struct {
	Table  string `json:"table"`
	Family string `json:"family"`
	Column string `json:"column"`
	// RowKey is the row's key; JSON gives it in base64.
	RowKey []byte `json:"row_key"`
	// Timestamp is the cell's timestamp.
	Timestamp time.Time `json:"timestamp"`
	// Expiry is the cell's expiry instant under the family's strategy.
	Expiry time.Time `json:"expiry"`
	// Commit is when GC deleted it (the change's commit timestamp).
	Commit time.Time `json:"commit_time"`
	// Lag is Commit minus Expiry. Negative when GC deleted the cell before
	// it expired (a max-versions rule): such events are reported but not
	// observed in the histogram.
	Lag time.Duration `json:"-"`
}

// MarshalJSON writes times in RFC 3339 UTC and the lag in seconds.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	return json.Marshal(struct {
		plain
		Timestamp  string  `json:"timestamp"`
		Expiry     string  `json:"expiry"`
		Commit     string  `json:"commit_time"`
		LagSeconds float64 `json:"lag_seconds"`
	}{plain(e), rfc3339(e.Timestamp), rfc3339(e.Expiry), rfc3339(e.Commit), e.Lag.Seconds()})
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ErrInvalidOption reports an unusable option or schema.
var ErrInvalidOption = errors.New("gclag: invalid option")

type config struct {
	w        io.Writer
	callback func(Event)
	reg      prometheus.Registerer
	buckets  []float64
}

// Option configures a Recorder. The interface is closed.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithJSONLines writes each event as one JSON line to w.
func WithJSONLines(w io.Writer) Option { return optionFunc(func(c *config) { c.w = w }) }

// WithCallback calls f with each event.
func WithCallback(f func(Event)) Option { return optionFunc(func(c *config) { c.callback = f }) }

// WithRegisterer registers the histogram on reg (a histogram already
// registered there by another Recorder is shared).
func WithRegisterer(reg prometheus.Registerer) Option {
	return optionFunc(func(c *config) { c.reg = reg })
}

// WithBuckets sets the histogram's buckets (default DefaultBuckets).
func WithBuckets(b []float64) Option { return optionFunc(func(c *config) { c.buckets = b }) }

// Recorder turns a table's GC changes into events. Its Handle is a
// changestream.Handler.
type Recorder struct {
	table  string
	schema strategy.Schema
	cfg    config
	hist   *prometheus.HistogramVec

	mu           sync.Mutex
	unattributed int64
}

// New returns a recorder for table (its ID) whose families' strategies
// schema gives.
func New(table string, schema strategy.Schema, opts ...Option) (*Recorder, error) {
	cfg := config{buckets: DefaultBuckets}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if table == "" {
		return nil, fmt.Errorf("%w: no table", ErrInvalidOption)
	}
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	r := &Recorder{table: table, schema: schema, cfg: cfg}
	if cfg.reg != nil {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricName,
			Help:    "Commit time of Bigtable's GC deletion of a bttl-managed cell minus the cell's expiry instant, seen on the change stream.",
			Buckets: cfg.buckets,
		}, []string{"table", "family"})
		if err := cfg.reg.Register(h); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			existing, ok := are.ExistingCollector.(*prometheus.HistogramVec)
			if !ok {
				return nil, err
			}
			h = existing
		}
		r.hist = h
	}
	return r, nil
}

// Unattributed counts GC deletions of managed families that named no
// single cell (see the package doc).
func (r *Recorder) Unattributed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unattributed
}

// Handle reports c's deletions of managed cells if c is a GC change; other
// changes are ignored. A failed JSON write is returned, so the consumer
// delivers c again.
func (r *Recorder) Handle(ctx context.Context, c changestream.Change) error {
	if c.Type != changestream.GarbageCollection {
		return nil
	}
	for _, m := range c.Mutations {
		var fam, col string
		var start int64
		switch {
		case m.GetDeleteFromColumn() != nil:
			d := m.GetDeleteFromColumn()
			fam, col = d.GetFamilyName(), string(d.GetColumnQualifier())
			start = d.GetTimeRange().GetStartTimestampMicros()
		case m.GetDeleteFromFamily() != nil:
			fam = m.GetDeleteFromFamily().GetFamilyName()
		case m.GetDeleteFromRow() != nil:
			// A whole row: no family, no cell.
			r.count()
			continue
		default:
			continue
		}
		p, ok := r.schema[fam]
		if !ok || p.ExpiryTime(0).IsZero() {
			continue // not managed by age
		}
		if start <= 0 {
			r.count()
			continue
		}
		ts := bigtable.Timestamp(start)
		ev := Event{
			Table: r.table, Family: fam, Column: col, RowKey: c.RowKey,
			Timestamp: ts.Time(), Expiry: p.ExpiryTime(ts), Commit: c.CommitTime,
		}
		ev.Lag = ev.Commit.Sub(ev.Expiry)
		if r.hist != nil && ev.Lag >= 0 {
			r.hist.WithLabelValues(r.table, fam).Observe(ev.Lag.Seconds())
		}
		if r.cfg.callback != nil {
			r.cfg.callback(ev)
		}
		if r.cfg.w != nil {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			r.mu.Lock()
			_, err = r.cfg.w.Write(append(b, '\n'))
			r.mu.Unlock()
			if err != nil {
				return fmt.Errorf("gclag: write event: %w", err)
			}
		}
	}
	return nil
}

func (r *Recorder) count() {
	r.mu.Lock()
	r.unattributed++
	r.mu.Unlock()
}
