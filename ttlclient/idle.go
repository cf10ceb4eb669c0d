package ttlclient

import (
	"errors"

	"github.com/bttl/bttl/internal/lifecycle"
)

// Time-to-idle (strategy.WithIdleTTL; docs/design.md#time-to-idle): its
// options, results and recorders; the look at each read row and the
// refreshes are internal/lifecycle's (idle.go there).

// DefaultIdleRefreshConcurrency bounds the time-to-idle refreshes a client
// runs at once.
const DefaultIdleRefreshConcurrency = 4

// DefaultIdleRefreshQueue bounds the time-to-idle refreshes a client holds
// waiting to run.
const DefaultIdleRefreshQueue = 1024

// WithIdleRefreshConcurrency bounds the time-to-idle refreshes a client
// runs at once, for all its tables (default DefaultIdleRefreshConcurrency,
// at least 1). A ClientOption only: a pool its tables share has one bound,
// the client's.
func WithIdleRefreshConcurrency(n int) ClientOption {
	return clientOption(func(cfg *config) { cfg.idleWorkers = max(n, 1) })
}

// WithIdleRefreshQueue bounds the time-to-idle refreshes a client holds
// waiting to run, for all its tables (default DefaultIdleRefreshQueue, at
// least 1). A read whose refresh finds the queue full does not wait: the
// refresh is dropped, and counted (IdleDropped). The cell then lives its
// current TTL unless a later read refreshes it. A ClientOption only, as
// WithIdleRefreshConcurrency.
func WithIdleRefreshQueue(n int) ClientOption {
	return clientOption(func(cfg *config) { cfg.idleQueue = max(n, 1) })
}

// IdleResult is what became of a cell a read returned from a family with
// an idle TTL.
type IdleResult uint8

const (
	// IdleRefreshed: the cell was moved to expire an idle TTL after the
	// refresh.
	IdleRefreshed IdleResult = iota
	// IdleSkipped: no refresh needed: the cell has more than the idle TTL
	// less the debounce left, or a refresh of it is already queued.
	IdleSkipped
	// IdleDropped: the refresh queue was full, or the client closed before
	// the refresh ran or finished.
	IdleDropped
	// IdleFailed: the refresh failed (an RPC error, a value too large to
	// pin, a TTL the family refuses). The caller's read is unaffected.
	IdleFailed
	// IdleConflict: the refresh did not apply: the cell had changed (a
	// newer write, a delete), expired or been collected by then.
	IdleConflict
)

// String is the result's name, the value of the metrics' result label.
func (r IdleResult) String() string { return lifecycle.IdleResult(r).String() }

// IdleRecorder is implemented by a TableRecorder that counts time-to-idle
// refreshes (package metrics' does). IdleRefresh reports n cells of family
// with result: IdleSkipped, and IdleDropped for a full queue, on the
// caller's path (so it must be fast and must not block), the others off
// it.
type IdleRecorder interface {
	IdleRefresh(family string, result IdleResult, n int)
}

// IdleFailureRecorder is implemented by a TableRecorder that counts the
// time-to-idle refreshes that failed by reason (package metrics' does, as
// bttl_idle_refresh_failures_total): reason is RefusalReason of the error
// (an app profile's refusal: docs/design.md#app-profiles), "rpc" for any
// other error. Called off the caller's path, beside IdleFailed.
type IdleFailureRecorder interface {
	IdleRefreshFailed(family, reason string)
}

// newIdle is t's time-to-idle (internal/lifecycle.Idle), nil when no
// family has an idle TTL.
func (t *Table) newIdle(pool *lifecycle.IdlePool) *lifecycle.Idle {
	return lifecycle.NewIdle(t.life, t.schema, pool,
		func(family string, result lifecycle.IdleResult, n int) {
			if t.idleRec != nil {
				t.idleRec.IdleRefresh(family, IdleResult(result), n)
			}
		},
		t.logIdleFailure)
}

// logIdleFailure counts and logs a failed refresh: never silent. The
// first refusal of the app profile is a warning (every refresh of the
// table will fail the same way until the profile is fixed), the rest
// debug lines beside the counter.
func (t *Table) logIdleFailure(family string, err error) {
	reason := RefusalReason(err)
	if reason == "other" {
		reason = "rpc"
	}
	if r, ok := t.rec.(IdleFailureRecorder); ok {
		r.IdleRefreshFailed(family, reason)
	}
	var pe *ProfileError
	if errors.As(err, &pe) && t.profileWarned.CompareAndSwap(false, true) {
		t.logger.Warn("bttl: time-to-idle refreshes cannot run on this app profile: cells expire while in use", "table", t.name, "family", family, "err", err)
		return
	}
	t.logger.Debug("bttl: time-to-idle refresh failed", "table", t.name, "family", family, "reason", reason, "err", err)
}
