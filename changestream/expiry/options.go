package expiry

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bttl/bttl/internal/keytext"
)

// Clock tells the time entries fall due and leases lapse by.
// strategy.Clock and bttestharness.ManualClock satisfy it.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Defaults of the options.
const (
	DefaultBucket       = time.Second
	DefaultPollInterval = time.Second
	DefaultLease        = 30 * time.Second
	DefaultRPCTimeout   = 30 * time.Second
	// DefaultRecheck is how often a worker counts the announced cells not
	// yet collected and reads back those of its buckets.
	DefaultRecheck = time.Minute
	// Family names of the index table: timers, leases, and announced
	// cells awaiting their GC record.
	TimerFamily   = "t"
	LeaseFamily   = "l"
	ExpiredFamily = "x"
	// StockMetricName is the gauge of announced cells not yet collected
	// by GC, per table and family (WithRegisterer).
	StockMetricName = "bttl_expired_not_collected_cells"
)

type config struct {
	prefix       string
	bucket       time.Duration
	poll         time.Duration
	lease        time.Duration
	rpcTimeout   time.Duration
	clock        Clock
	index, count int
	owner        string
	keys         keytext.Text
	recheck      time.Duration
	reg          prometheus.Registerer
}

func (c *config) validate(table string) error {
	switch {
	case c.bucket < time.Millisecond || c.poll <= 0 || c.lease <= 0 || c.rpcTimeout <= 0:
		return fmt.Errorf("%w: the bucket width (at least 1ms), poll interval, lease and RPC timeout must be positive", ErrInvalidOption)
	case c.poll >= c.lease:
		return fmt.Errorf("%w: poll interval %v must be shorter than the lease %v", ErrInvalidOption, c.poll, c.lease)
	case c.recheck <= 0:
		return fmt.Errorf("%w: the recheck interval must be positive", ErrInvalidOption)
	case c.count < 1 || c.index < 0 || c.index >= c.count:
		return fmt.Errorf("%w: worker %d of %d", ErrInvalidOption, c.index, c.count)
	}
	if c.prefix == "" {
		c.prefix = table + "#"
	}
	if c.owner == "" {
		c.owner = fmt.Sprintf("expiry-%d", c.index)
	}
	return nil
}

// Option configures a Notifier. The interface is closed: only this
// package's functions make Options.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithIndexPrefix starts every index row key with prefix (default the
// watched table's ID and '#'), so one index table serves several tables.
func WithIndexPrefix(prefix string) Option { return optionFunc(func(c *config) { c.prefix = prefix }) }

// WithBucket sets the width of an index row's expiry bucket (default one
// second; at least a millisecond).
func WithBucket(d time.Duration) Option { return optionFunc(func(c *config) { c.bucket = d }) }

// WithPollInterval sets how often Run looks for due buckets: an event
// follows its instant by about this much (default a second).
func WithPollInterval(d time.Duration) Option { return optionFunc(func(c *config) { c.poll = d }) }

// WithLease sets how long a worker's claim on a bucket lasts: a killed
// worker's buckets are taken over once it lapses.
func WithLease(d time.Duration) Option { return optionFunc(func(c *config) { c.lease = d }) }

// WithRPCTimeout bounds each call to the index and the watched table.
func WithRPCTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.rpcTimeout = d }) }

// WithClock sets the clock entries fall due and leases lapse by.
func WithClock(clk Clock) Option { return optionFunc(func(c *config) { c.clock = clk }) }

// WithWorker makes the notifier worker index of count sharing one index:
// a bucket's preferred worker takes it once due, the others once it has
// been due for a lease (its worker is down).
func WithWorker(index, count int) Option {
	return optionFunc(func(c *config) { c.index, c.count = index, count })
}

// WithOwner names the worker in leases; the default is "expiry-<index>",
// so a restarted worker resumes its own buckets at once.
func WithOwner(id string) Option { return optionFunc(func(c *config) { c.owner = id }) }

// WithKeyRedaction redacts row keys: events carry no RowKey, and their Key
// (and every error message) shows a keyed hash instead
// (docs/design.md#keys-in-messages); a nil hashKey is one drawn per
// process.
func WithKeyRedaction(hashKey []byte) Option {
	return optionFunc(func(c *config) { c.keys = keytext.Redact(hashKey) })
}

// WithRecheck sets how often a worker counts the index's announced cells
// not yet collected (family ExpiredFamily) for the StockMetricName gauge,
// and reads back those in its own buckets to drop the ones no longer
// stored (deleted by a user, not by GC). Default DefaultRecheck.
func WithRecheck(d time.Duration) Option { return optionFunc(func(c *config) { c.recheck = d }) }

// WithRegisterer registers the StockMetricName gauge on reg (one already
// registered there by another Notifier is shared). Every worker exports
// the whole index's count: aggregate workers with max, not sum.
func WithRegisterer(reg prometheus.Registerer) Option {
	return optionFunc(func(c *config) { c.reg = reg })
}
