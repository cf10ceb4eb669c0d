package ttlclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/lifecycle"
	"github.com/bttl/bttl/internal/workpool"
	"github.com/bttl/bttl/strategy"
)

// Time-to-idle (strategy.WithIdleTTL; docs/design.md#time-to-idle): a read
// through a Table (ReadRow, ReadRows, and API's reads, which are the same
// calls) looks at the newest cell of each column it returns from a family
// with an idle TTL. One whose remaining TTL is below the idle TTL less the
// debounce is queued for a refresh, which moves it to the family's
// timestamp for now + idle TTL (lifecycle.Ops.MoveCell: one conditional row mutation
// pinning the exact cell, so a concurrent newer write is never overwritten
// and a cell expired or collected meanwhile is never revived). The
// refreshes run on the client's goroutines, never the caller's: the queue
// is bounded, so is the number running at once, and a refresh that finds
// the queue full is dropped and counted. Client.Close drops what is queued,
// cancels what runs and waits for it.

// DefaultIdleRefreshConcurrency bounds the time-to-idle refreshes a client
// runs at once.
const DefaultIdleRefreshConcurrency = 4

// DefaultIdleRefreshQueue bounds the time-to-idle refreshes a client holds
// waiting to run.
const DefaultIdleRefreshQueue = 1024

// idleRefreshTimeout bounds one refresh, so a stuck one frees its worker.
const idleRefreshTimeout = 30 * time.Second

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
func (r IdleResult) String() string {
	switch r {
	case IdleRefreshed:
		return "refreshed"
	case IdleSkipped:
		return "skipped"
	case IdleDropped:
		return "dropped"
	case IdleFailed:
		return "failed"
	case IdleConflict:
		return "conflict"
	}
	return fmt.Sprintf("IdleResult(%d)", uint8(r))
}

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
// ("transactions_not_allowed" on an app profile that refuses single-row
// transactions, "read_only_profile" on Data Boost; see
// docs/design.md#app-profiles), "rpc" for any other error. Called off the
// caller's path, beside IdleRefresh's IdleFailed.
type IdleFailureRecorder interface {
	IdleRefreshFailed(family, reason string)
}

// idleFamily is a family with an idle TTL.
type idleFamily struct {
	name string
	p    strategy.Policy
}

// idleFamilies lists the schema's families with an idle TTL, nil when none.
func idleFamilies(schema Schema) []idleFamily {
	var out []idleFamily
	for fam, p := range schema {
		if p.IdleTTL() > 0 {
			out = append(out, idleFamily{name: fam, p: p})
		}
	}
	return out
}

// idleJob is one queued refresh: the cell as the read returned it.
type idleJob struct {
	t      *Table
	family string
	p      strategy.Policy
	key    idleKey
	value  []byte // the caller's row holds the original: this is a copy
}

// idleKey identifies a cell, so that a cell read again while its refresh
// is queued is not queued twice.
type idleKey struct {
	t                   *Table
	row, family, column string
	ts                  bigtable.Timestamp
}

// afterIdleRead queues refreshes for r, a row a read returned at now. It
// runs on the caller's path: it looks at the newest cell of each column of
// the idle families and never waits.
func (t *Table) afterIdleRead(ctx context.Context, r bigtable.Row, now bigtable.Timestamp) {
	for i := range t.idleFams {
		f := &t.idleFams[i]
		items := r[f.name]
		if len(items) == 0 {
			continue
		}
		skipped := 0
		// A family's items come grouped by column: take each column's
		// newest (largest timestamp) cell.
		for j := 0; j < len(items); {
			newest, k := j, j+1
			for ; k < len(items) && items[k].Column == items[j].Column; k++ {
				if items[k].Timestamp > items[newest].Timestamp {
					newest = k
				}
			}
			j = k
			it := &items[newest]
			if !f.p.NeedsIdleRefresh(it.Timestamp, now) {
				skipped++
				continue
			}
			column := it.Column
			if len(column) > len(f.name) && column[len(f.name)] == ':' {
				column = column[len(f.name)+1:]
			}
			job := idleJob{t: t, family: f.name, p: f.p,
				key:   idleKey{t: t, row: r.Key(), family: f.name, column: column, ts: it.Timestamp},
				value: append([]byte(nil), it.Value...)}
			switch t.refresh.Submit(ctx, job) {
			case workpool.Duplicate:
				skipped++
			case workpool.Dropped:
				t.recordIdle(f.name, IdleDropped, 1)
			}
		}
		if skipped > 0 {
			t.recordIdle(f.name, IdleSkipped, skipped)
		}
	}
}

// idleRows wraps a ReadRows callback so that each row is looked at before
// the caller gets it (and can change it): f itself without idle families.
func (t *Table) idleRows(ctx context.Context, f func(bigtable.Row) bool) func(bigtable.Row) bool {
	if t.idleFams == nil {
		return f
	}
	now := t.now()
	return func(r bigtable.Row) bool {
		t.afterIdleRead(ctx, r, now)
		return f(r)
	}
}

func (t *Table) recordIdle(family string, result IdleResult, n int) {
	if t.idleRec != nil {
		t.idleRec.IdleRefresh(family, result, n)
	}
}

// newRefreshPool is a client's pool of time-to-idle refreshes, for all
// its tables: a job's context is the read's values, cancelled by Close
// (errClientClosed) or after idleRefreshTimeout.
func newRefreshPool(workers, queue int) *workpool.Pool[idleKey, idleJob] {
	return workpool.New(workpool.Config[idleKey, idleJob]{
		Workers: workers, Queue: queue, Timeout: idleRefreshTimeout, Cause: errClientClosed,
		Key:     func(j idleJob) idleKey { return j.key },
		Run:     func(ctx context.Context, j idleJob) { j.t.recordIdle(j.family, j.t.refreshIdle(ctx, &j), 1) },
		Dropped: func(j idleJob) { j.t.recordIdle(j.family, IdleDropped, 1) },
	})
}

// refreshIdle runs one refresh.
func (t *Table) refreshIdle(ctx context.Context, j *idleJob) IdleResult {
	now := t.clock.Now()
	newTS, err := j.p.IdleRefreshTimestamp(now)
	if err != nil {
		t.logIdleFailure(j, err)
		return IdleFailed
	}
	if newTS <= j.key.ts {
		// Not due any more (the clock went back): never shorten a TTL.
		return IdleSkipped
	}
	applied, err := t.life.MoveCell(ctx, j.key.row, j.family, j.key.column, j.key.ts, j.value, newTS, lifecycle.MoveOnlyIfNewest)
	switch {
	case err != nil && ctx.Err() != nil && context.Cause(ctx) == errClientClosed:
		return IdleDropped
	case err != nil:
		t.logIdleFailure(j, err)
		return IdleFailed
	case !applied:
		return IdleConflict
	}
	return IdleRefreshed
}

// logIdleFailure counts and logs a failed refresh: never silent. The
// first refusal of the app profile is a warning (every refresh of the
// table will fail the same way until the profile is fixed), the rest
// debug lines beside the counter.
func (t *Table) logIdleFailure(j *idleJob, err error) {
	reason := RefusalReason(err)
	if reason == "other" {
		reason = "rpc"
	}
	if r, ok := t.rec.(IdleFailureRecorder); ok {
		r.IdleRefreshFailed(j.family, reason)
	}
	var pe *ProfileError
	if errors.As(err, &pe) && t.profileWarned.CompareAndSwap(false, true) {
		t.logger.Warn("bttl: time-to-idle refreshes cannot run on this app profile: cells expire while in use", "table", t.name, "family", j.family, "err", err)
		return
	}
	t.logger.Debug("bttl: time-to-idle refresh failed", "table", t.name, "family", j.family, "reason", reason, "err", err)
}

// errClientClosed is the cause of the refreshes' context once Close runs.
var errClientClosed = fmt.Errorf("bttl: client closed")
