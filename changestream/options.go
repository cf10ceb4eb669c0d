package changestream

import (
	"fmt"
	"time"
)

// Clock tells the time leases and the default start time are judged by.
// strategy.Clock and bttestharness.ManualClock satisfy it.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Defaults of the options.
const (
	DefaultHeartbeat       = 5 * time.Second // the server's own default (heartbeat_duration)
	DefaultLease           = 30 * time.Second
	DefaultPollInterval    = time.Second
	DefaultRPCTimeout      = 30 * time.Second
	DefaultMinBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff      = 10 * time.Second
	DefaultMaxAttempts     = 10
	DefaultCheckpointEvery = 100
	DefaultInitWait        = 2 * time.Minute
)

type config struct {
	appProfile      string
	index, count    int
	owner           string
	start, end      time.Time
	heartbeat       time.Duration
	idle            time.Duration
	lease           time.Duration
	poll            time.Duration
	rpcTimeout      time.Duration
	minBackoff      time.Duration
	maxBackoff      time.Duration
	maxAttempts     int
	checkpointEvery int
	initWait        time.Duration
	clock           Clock
	seed            uint64
}

func defaults() config {
	return config{
		count: 1, heartbeat: DefaultHeartbeat, lease: DefaultLease, poll: DefaultPollInterval,
		rpcTimeout: DefaultRPCTimeout, minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff,
		maxAttempts: DefaultMaxAttempts, checkpointEvery: DefaultCheckpointEvery,
		initWait: DefaultInitWait, clock: realClock{},
	}
}

func (c *config) validate() error {
	switch {
	case c.count < 1 || c.index < 0 || c.index >= c.count:
		return fmt.Errorf("%w: worker %d of %d", ErrInvalidOption, c.index, c.count)
	case c.heartbeat <= 0 || c.lease <= 0 || c.poll <= 0 || c.rpcTimeout <= 0 || c.initWait <= 0:
		return fmt.Errorf("%w: durations must be positive", ErrInvalidOption)
	case c.minBackoff <= 0 || c.maxBackoff < c.minBackoff:
		return fmt.Errorf("%w: backoff %v..%v", ErrInvalidOption, c.minBackoff, c.maxBackoff)
	case c.maxAttempts < 1 || c.checkpointEvery < 1:
		return fmt.Errorf("%w: attempts and checkpoint interval must be at least 1", ErrInvalidOption)
	case !c.end.IsZero() && !c.start.IsZero() && c.end.Before(c.start):
		return fmt.Errorf("%w: end time %v before start time %v", ErrInvalidOption, c.end, c.start)
	case c.poll >= c.lease:
		return fmt.Errorf("%w: poll interval %v must be shorter than the lease %v", ErrInvalidOption, c.poll, c.lease)
	}
	if c.idle == 0 {
		c.idle = 3 * c.heartbeat
	}
	if c.idle <= c.heartbeat {
		return fmt.Errorf("%w: idle timeout %v must exceed the heartbeat %v", ErrInvalidOption, c.idle, c.heartbeat)
	}
	if c.owner == "" {
		c.owner = fmt.Sprintf("worker-%d", c.index)
	}
	return nil
}

// Option configures a Consumer. The interface is closed: only this
// package's functions make Options.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithAppProfile routes the calls through an app profile, which "must"
// have single-cluster routing (ReadChangeStreamRequest.app_profile_id).
func WithAppProfile(id string) Option { return optionFunc(func(c *config) { c.appProfile = id }) }

// WithWorker makes the consumer task index of count workers sharing the
// partitions (a Kubernetes indexed Job's JOB_COMPLETION_INDEX, say). Each
// partition has one preferred worker (a hash of its range modulo count);
// any worker takes over a partition whose lease expired. Task 0 records
// the initial partitions; the others wait for them.
func WithWorker(index, count int) Option {
	return optionFunc(func(c *config) { c.index, c.count = index, count })
}

// WithOwner names the worker in leases; the default is "worker-<index>",
// so a restarted task resumes its own partitions at once.
func WithOwner(id string) Option { return optionFunc(func(c *config) { c.owner = id }) }

// WithStartTime starts the initial partitions at t rather than at the
// first worker's start. It must lie within the stream's retention.
func WithStartTime(t time.Time) Option { return optionFunc(func(c *config) { c.start = t }) }

// WithEndTime ends each stream once it passes t (end_time): Run returns
// when every partition has ended.
func WithEndTime(t time.Time) Option { return optionFunc(func(c *config) { c.end = t }) }

// WithHeartbeat asks the server for a heartbeat every d.
func WithHeartbeat(d time.Duration) Option { return optionFunc(func(c *config) { c.heartbeat = d }) }

// WithIdleTimeout bounds the wait for any message on a stream (default
// three heartbeats): past it the stream is reopened from its last token.
func WithIdleTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.idle = d }) }

// WithLease sets how long a partition's lease lasts unrenewed; workers
// renew it, while they read, at the first poll after a third of it passed.
func WithLease(d time.Duration) Option { return optionFunc(func(c *config) { c.lease = d }) }

// WithPollInterval sets how often a worker reads the store to claim
// partitions and renew its leases.
func WithPollInterval(d time.Duration) Option { return optionFunc(func(c *config) { c.poll = d }) }

// WithRPCTimeout bounds each unary wait: listing initial partitions,
// opening a stream, each store call.
func WithRPCTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.rpcTimeout = d }) }

// WithBackoff sets the bounds of the exponential, jittered backoff between
// attempts to read a partition.
func WithBackoff(min, max time.Duration) Option {
	return optionFunc(func(c *config) { c.minBackoff, c.maxBackoff = min, max })
}

// WithMaxAttempts sets how many consecutive failed attempts to read a
// partition make Run fail.
func WithMaxAttempts(n int) Option { return optionFunc(func(c *config) { c.maxAttempts = n }) }

// WithCheckpointEvery persists a partition's token after every n data
// changes (and on every heartbeat). After a restart, at most the changes
// since the last checkpoint are delivered again.
func WithCheckpointEvery(n int) Option { return optionFunc(func(c *config) { c.checkpointEvery = n }) }

// WithInitWait bounds how long a worker other than task 0 waits for the
// initial partitions.
func WithInitWait(d time.Duration) Option { return optionFunc(func(c *config) { c.initWait = d }) }

// WithClock sets the clock leases and the default start time use.
func WithClock(clk Clock) Option { return optionFunc(func(c *config) { c.clock = clk }) }

// WithSeed seeds the backoff's jitter.
func WithSeed(seed uint64) Option { return optionFunc(func(c *config) { c.seed = seed }) }
