// Package workpool runs the work a call leaves behind it on a bounded set
// of background goroutines: bttl's shadow reads and time-to-idle
// refreshes (ttlclient). At most Workers jobs run at once and at most
// Queue wait; a job submitted beyond that is dropped, never waited for, so
// submitting never blocks the caller's path for longer than one mutex
// held for a few instructions. Workers exit once the queue is empty: an
// idle pool runs no goroutine. Close drops what waits, cancels what runs
// and waits for it, so no goroutine of the pool outlives it.
package workpool

import (
	"context"
	"sync"
	"time"
)

// Config is a pool's bounds and what it does with its jobs.
type Config[K comparable, J any] struct {
	// Workers bounds the jobs running at once (at least 1).
	Workers int
	// Queue bounds the jobs waiting for a worker (0: a job runs at once
	// or is dropped).
	Queue int
	// Timeout bounds one job, so a stuck one frees its worker (0: no
	// bound).
	Timeout time.Duration
	// Cause is the cause of the running jobs' contexts once Close runs.
	Cause error
	// Key is a job's key: a job whose key is queued or running is a
	// Duplicate. nil: no job is a duplicate.
	Key func(J) K
	// Run runs a job.
	Run func(ctx context.Context, job J)
	// Dropped is told of each queued job Close drops (nil: nothing).
	Dropped func(job J)
}

// Result is what Submit did with a job.
type Result uint8

const (
	Queued    Result = iota // it runs or will run
	Duplicate               // a job with its key is queued or running
	Dropped                 // every worker is busy and the queue full, or the pool is closed
)

type entry[J any] struct {
	job    J
	caller context.Context
}

// Pool runs jobs of type J, deduplicated by key K. Its zero value is not
// usable: make one with New.
type Pool[K comparable, J any] struct {
	cfg Config[K, J]

	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelCauseFunc
	queue   []entry[J]
	pending map[K]struct{} // queued or running, when Key is set
	active  int
	closed  bool
	waiters []chan struct{} // Flush calls waiting for an empty, idle pool
	wg      sync.WaitGroup
}

// New is a pool with cfg.
func New[K comparable, J any](cfg Config[K, J]) *Pool[K, J] {
	cfg.Workers = max(cfg.Workers, 1)
	return &Pool[K, J]{cfg: cfg}
}

// Submit queues job, starting a worker when fewer than Workers run. The
// job runs with caller's values (trace spans, request IDs) but not its
// cancellation: the call that left it behind has returned.
func (p *Pool[K, J]) Submit(caller context.Context, job J) Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	var key K
	if p.cfg.Key != nil {
		key = p.cfg.Key(job)
		if _, ok := p.pending[key]; ok && !p.closed {
			return Duplicate
		}
	}
	if p.closed || (p.active >= p.cfg.Workers && len(p.queue) >= p.cfg.Queue) {
		return Dropped
	}
	if p.ctx == nil {
		p.ctx, p.cancel = context.WithCancelCause(context.Background())
		p.pending = map[K]struct{}{}
	}
	if p.cfg.Key != nil {
		p.pending[key] = struct{}{}
	}
	p.queue = append(p.queue, entry[J]{job: job, caller: caller})
	if p.active < p.cfg.Workers {
		p.active++
		p.wg.Add(1)
		go p.work()
	}
	return Queued
}

// work runs jobs until the queue is empty or the pool closed.
func (p *Pool[K, J]) work() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		if len(p.queue) == 0 || p.closed {
			p.active--
			p.notifyLocked()
			p.mu.Unlock()
			return
		}
		e := p.queue[0]
		p.queue[0] = entry[J]{} // let the job go
		p.queue = p.queue[1:]
		stop := p.ctx
		p.mu.Unlock()

		ctx, cancel := background(e.caller, stop, p.cfg.Timeout)
		p.cfg.Run(ctx, e.job)
		cancel()

		if p.cfg.Key != nil {
			p.mu.Lock()
			delete(p.pending, p.cfg.Key(e.job))
			p.mu.Unlock()
		}
	}
}

// background is the context of a job: caller's values without its
// cancellation (context.WithoutCancel), cancelled with stop's cause when
// stop (the pool's, cancelled by Close) is done, and after timeout.
func background(caller, stop context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if caller == nil {
		caller = context.Background()
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(caller))
	unregister := context.AfterFunc(stop, func() { cancel(context.Cause(stop)) })
	cancelTimeout := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancelTimeout = context.WithTimeout(ctx, timeout)
	}
	return ctx, func() {
		unregister()
		cancelTimeout()
		cancel(context.Canceled)
	}
}

// notifyLocked wakes the Flush calls once nothing is queued or running.
func (p *Pool[K, J]) notifyLocked() {
	if p.active == 0 && len(p.queue) == 0 {
		for _, w := range p.waiters {
			close(w)
		}
		p.waiters = nil
	}
}

// Flush waits until nothing is queued or running, or ctx is done. Jobs
// submitted meanwhile are waited for too.
func (p *Pool[K, J]) Flush(ctx context.Context) error {
	p.mu.Lock()
	if p.active == 0 && len(p.queue) == 0 {
		p.mu.Unlock()
		return nil
	}
	w := make(chan struct{})
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()
	select {
	case <-w:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close drops the queued jobs (telling Dropped of each), cancels the
// running ones with Cause and waits for their goroutines. Later Submits
// are Dropped.
func (p *Pool[K, J]) Close() {
	p.mu.Lock()
	p.closed = true
	dropped := p.queue
	p.queue = nil
	if p.cancel != nil {
		p.cancel(p.cfg.Cause)
	}
	p.mu.Unlock()
	if p.cfg.Dropped != nil {
		for _, e := range dropped {
			p.cfg.Dropped(e.job)
		}
	}
	p.wg.Wait()
	p.mu.Lock()
	p.notifyLocked()
	p.mu.Unlock()
}
