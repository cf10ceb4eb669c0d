package throttle

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// DecreaseFactor multiplies the rate at a RESOURCE_EXHAUSTED answer:
	// the Java Bigtable client's batch write flow control lowers its rate
	// to at most 0.7 times the current one on an error answer
	// (RateLimitingServerStreamingCallable.MIN_FACTOR, "the same as the
	// server side cap").
	DecreaseFactor = 0.7
	// IncreaseShare is the share of the ceiling added per Period without a
	// RESOURCE_EXHAUSTED: ten quiet periods climb from the floor back to
	// the ceiling.
	IncreaseShare = 0.1
	// DefaultPeriod is the shortest time between two changes of the rate.
	DefaultPeriod = time.Second
	// MinRate is the lowest rate a decrease reaches, in cells a second: a
	// job is slowed, never stopped (the Java client's MIN_QPS is 0.1
	// requests a second; a request carries many cells).
	MinRate = 1.0
	// DefaultPause is how long a RESOURCE_EXHAUSTED answer without
	// RetryInfo holds the workers: the Go client's first backoff
	// (bigtable.go, defaultBackoff.Initial, v1.58.0).
	DefaultPause = 100 * time.Millisecond
	// DefaultMaxHold is the longest a RESOURCE_EXHAUSTED holds the workers
	// when Config.MaxHold is zero: bttl's default -stall.
	DefaultMaxHold = time.Minute
)

// Clock tells the time and waits. Tests give a fake one; nil is the real
// clock.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx ends (its error then).
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Config configures a Controller.
type Config struct {
	// Ceiling is the most cells a second (-cells-per-second), whatever the
	// server allows; 0: no ceiling.
	Ceiling float64
	// Period is the shortest time between two changes of the rate; 0:
	// DefaultPeriod.
	Period time.Duration
	// Clock is the time the controller judges by and waits on; nil: the
	// real clock.
	Clock Clock
	// MaxHold is the longest a RESOURCE_EXHAUSTED holds the workers; 0:
	// DefaultMaxHold. The workers wait inside a scan's row callback,
	// where no stall watch looks, so a RetryInfo of hours must not stop
	// them for hours: they go on at the lowered rate after MaxHold, while
	// the refused call's own retry still waits its whole delay (bounded by
	// that call's context). bttl gives its -stall.
	MaxHold time.Duration
}

// Controller is one job's adaptive pace, shared by its workers and fed by
// the interceptors of its clients. Safe for concurrent use.
type Controller struct {
	clock   Clock
	ceiling float64
	period  time.Duration
	maxHold time.Duration

	mu sync.Mutex
	// lim paces at the current rate; nil while unlimited (no ceiling and
	// no RESOURCE_EXHAUSTED yet).
	lim  *rate.Limiter
	cur  float64 // lim's limit; 0 while unlimited
	step float64 // the additive increase per period
	// hold: no cell is paced before it (the latest RetryInfo delay's end).
	hold time.Time
	// lastChange, lastDecrease and lastThrottle: when the rate last
	// changed, was last lowered (zero: never), when the last
	// RESOURCE_EXHAUSTED came.
	lastChange, lastDecrease, lastThrottle time.Time
	// The pace measured while unlimited: cells paced since winStart, and
	// the pace of the last full period.
	winStart time.Time
	winCells float64
	measured float64

	throttled, decreases, retried int64
}

// New returns a Controller paced at cfg.Ceiling (unlimited without one).
func New(cfg Config) *Controller {
	c := &Controller{clock: cfg.Clock, ceiling: max(cfg.Ceiling, 0), period: cfg.Period, maxHold: cfg.MaxHold}
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.period <= 0 {
		c.period = DefaultPeriod
	}
	if c.maxHold <= 0 {
		c.maxHold = DefaultMaxHold
	}
	now := c.clock.Now()
	c.lastChange, c.winStart = now, now
	if c.ceiling > 0 {
		c.setRate(now, c.ceiling)
		c.step = max(c.ceiling*IncreaseShare, MinRate)
	}
	return c
}

// setRate sets the limiter's rate (c.mu held). The burst is one second's
// cells, as a fixed -cells-per-second limiter had.
func (c *Controller) setRate(now time.Time, r float64) {
	c.cur = r
	burst := max(1, int(r))
	if c.lim == nil {
		c.lim = rate.NewLimiter(rate.Limit(r), burst)
		return
	}
	c.lim.SetLimitAt(now, rate.Limit(r))
	c.lim.SetBurstAt(now, burst)
}

// Rate is the current rate in cells a second; 0 while unlimited.
func (c *Controller) Rate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raise(c.clock.Now())
	return c.cur
}

// Ceiling is Config.Ceiling (0: none).
func (c *Controller) Ceiling() float64 { return c.ceiling }

// Stats counts what the controller saw and did.
type Stats struct {
	// Throttled counts RESOURCE_EXHAUSTED answers; Retried the unary calls
	// sent again after one; Decreases the times the rate was lowered.
	Throttled, Retried, Decreases int64
}

// Stats is what the controller saw and did so far.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Throttled: c.throttled, Retried: c.retried, Decreases: c.decreases}
}

// WaitN paces n cells: it returns once the current rate allows them and
// no RetryInfo delay holds the workers, or with ctx's error. A wait that
// would pass ctx's deadline fails at once with an error wrapping
// context.DeadlineExceeded.
func (c *Controller) WaitN(ctx context.Context, n int) error {
	for n > 0 {
		c.mu.Lock()
		now := c.clock.Now()
		if wait := c.hold.Sub(now); wait > 0 {
			c.mu.Unlock()
			if err := c.sleep(ctx, now, wait); err != nil {
				return err
			}
			continue
		}
		c.raise(now)
		c.count(now, float64(n))
		if c.lim == nil {
			c.mu.Unlock()
			return nil
		}
		take := min(n, c.lim.Burst())
		r := c.lim.ReserveN(now, take)
		c.mu.Unlock()
		if !r.OK() {
			return fmt.Errorf("bttl: cannot pace %d cells at burst %d", take, c.lim.Burst()) // unreachable: take <= burst
		}
		if wait := r.DelayFrom(now); wait > 0 {
			if err := c.sleep(ctx, now, wait); err != nil {
				r.CancelAt(now)
				return err
			}
		}
		n -= take
	}
	return nil
}

// sleep waits d from now, failing at once when that passes ctx's deadline.
func (c *Controller) sleep(ctx context.Context, now time.Time, d time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && now.Add(d).After(dl) {
		return fmt.Errorf("%w (pacing would wait %s, past the deadline)", context.DeadlineExceeded, d)
	}
	return c.clock.Sleep(ctx, d)
}

// count adds n cells to the measured pace (c.mu held).
func (c *Controller) count(now time.Time, n float64) {
	if el := now.Sub(c.winStart); el >= c.period {
		c.measured = c.winCells / el.Seconds()
		c.winStart, c.winCells = now, 0
	}
	c.winCells += n
}

// raise applies the additive increase due by now (c.mu held): one step per
// full period since the last change, none while a RESOURCE_EXHAUSTED came
// within the last period.
func (c *Controller) raise(now time.Time) {
	if c.lim == nil || now.Sub(c.lastThrottle) < c.period || now.Sub(c.lastChange) < c.period {
		return
	}
	top := c.ceiling
	if top == 0 {
		top = math.Inf(1)
	}
	if c.cur >= top {
		return
	}
	periods := math.Floor(now.Sub(c.lastChange).Seconds() / c.period.Seconds())
	c.setRate(now, min(top, c.cur+periods*c.step))
	c.lastChange = now
}

// Throttle records a RESOURCE_EXHAUSTED answer asking for a retry after
// delay (0: no RetryInfo, DefaultPause): the workers hold until then (at
// most Config.MaxHold), and the rate is lowered unless it was within the
// last period.
func (c *Controller) Throttle(delay time.Duration) {
	if delay <= 0 {
		delay = DefaultPause
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.throttled++
	if h := now.Add(min(delay, c.maxHold)); h.After(c.hold) {
		c.hold = h
	}
	c.lastThrottle = now
	if !c.lastDecrease.IsZero() && now.Sub(c.lastDecrease) < c.period {
		return // one overload, many answers: lowered once a period
	}
	from := c.cur
	if c.lim == nil {
		// Unlimited so far: start from the pace measured.
		from = c.measured
		if el := now.Sub(c.winStart); el > 0 && c.winCells/el.Seconds() > from {
			from = c.winCells / el.Seconds()
		}
		if from <= 0 {
			// Nothing paced yet (a first call refused): no pace to
			// lower, the hold alone slows the workers.
			return
		}
		c.step = max(from*IncreaseShare, MinRate)
	}
	floor := MinRate
	if c.ceiling > 0 {
		floor = min(floor, c.ceiling) // a ceiling below the floor stays the most
	}
	c.setRate(now, max(floor, from*DecreaseFactor))
	c.decreases++
	c.lastChange, c.lastDecrease = now, now
}

// observe records an attempt's outcome and returns the RetryInfo delay of
// a RESOURCE_EXHAUSTED answer that carried one (retry true).
func (c *Controller) observe(err error) (delay time.Duration, retry bool) {
	if err == nil {
		c.mu.Lock()
		c.raise(c.clock.Now())
		c.mu.Unlock()
		return 0, false
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().IsValid() {
			delay, retry = ri.GetRetryDelay().AsDuration(), true
		}
	}
	c.Throttle(delay)
	return delay, retry
}

// awaitHold waits until no RetryInfo delay holds the workers.
func (c *Controller) awaitHold(ctx context.Context) error {
	for {
		c.mu.Lock()
		now := c.clock.Now()
		wait := c.hold.Sub(now)
		c.mu.Unlock()
		if wait <= 0 {
			return nil
		}
		if err := c.sleep(ctx, now, wait); err != nil {
			return err
		}
	}
}
