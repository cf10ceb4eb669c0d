package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/workpool"
	"github.com/bttl/bttl/strategy"
)

// Time-to-idle (strategy.WithIdleTTL; docs/design.md#time-to-idle), the
// body behind ttlclient's: a read through a Table looks at the newest cell
// of each column it returns from a family with an idle TTL. One whose
// remaining TTL is below the idle TTL less the debounce is queued for a
// refresh, which moves it to the family's timestamp for now + idle TTL
// (Ops.MoveCell: one conditional row mutation pinning the exact cell, so a
// concurrent newer write is never overwritten and a cell expired or
// collected meanwhile is never revived). The refreshes run on the client's
// goroutines, never the caller's: the queue is bounded, so is the number
// running at once, and a refresh that finds the queue full is dropped and
// counted. The pool's Close drops what is queued, cancels what runs and
// waits for it.

// IdleResult is what became of a cell a read returned from a family with
// an idle TTL: ttlclient.IdleResult's values, in the same order.
type IdleResult uint8

const (
	IdleRefreshed IdleResult = iota
	IdleSkipped
	IdleDropped
	IdleFailed
	IdleConflict
)

// String is the result's name, the value of the metrics' result label
// (ttlclient.IdleResult.String).
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

// idleRefreshTimeout bounds one refresh, so a stuck one frees its worker.
const idleRefreshTimeout = 30 * time.Second

// Idle is one table's time-to-idle: nil when it has no family with an
// idle TTL (NewIdle).
type Idle struct {
	ops  *Ops
	fams []idleFamily
	pool *IdlePool
	// record counts n cells of family with result (ttlclient's
	// IdleRecorder, when the table's recorder is one).
	record func(family string, result IdleResult, n int)
	// failed counts and logs a failed refresh.
	failed func(family string, err error)
}

// NewIdle is the time-to-idle of the table whose lifecycle operations are
// ops and whose families are schema, its refreshes run by the client's
// pool: nil when no family has an idle TTL.
func NewIdle(ops *Ops, schema strategy.Schema, pool *IdlePool, record func(family string, result IdleResult, n int), failed func(family string, err error)) *Idle {
	fams := idleFamilies(schema)
	if fams == nil {
		return nil
	}
	return &Idle{ops: ops, fams: fams, pool: pool, record: record, failed: failed}
}

// idleFamily is a family with an idle TTL.
type idleFamily struct {
	name string
	p    strategy.Policy
}

// idleFamilies lists the schema's families with an idle TTL, nil when none.
func idleFamilies(schema strategy.Schema) []idleFamily {
	var out []idleFamily
	for fam, p := range schema {
		if p.RefreshesOnRead() {
			out = append(out, idleFamily{name: fam, p: p})
		}
	}
	return out
}

// IdleJob is one queued refresh: the cell as the read returned it.
type IdleJob struct {
	idle   *Idle
	family string
	p      strategy.Policy
	key    IdleKey
	value  []byte // the caller's row holds the original: this is a copy
}

// IdleKey identifies a cell, so that a cell read again while its refresh
// is queued is not queued twice.
type IdleKey struct {
	idle                *Idle
	row, family, column string
	ts                  bigtable.Timestamp
}

// IdlePool is a client's pool of time-to-idle refreshes, for all its
// tables.
type IdlePool = workpool.Pool[IdleKey, IdleJob]

// AfterRead queues refreshes for r, a row a read returned at now. It
// runs on the caller's path: it looks at the newest cell of each column of
// the idle families and never waits.
func (d *Idle) AfterRead(ctx context.Context, r bigtable.Row, now bigtable.Timestamp) {
	for i := range d.fams {
		f := &d.fams[i]
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
			job := IdleJob{idle: d, family: f.name, p: f.p,
				key:   IdleKey{idle: d, row: r.Key(), family: f.name, column: column, ts: it.Timestamp},
				value: append([]byte(nil), it.Value...)}
			switch d.pool.Submit(ctx, job) {
			case workpool.Duplicate:
				skipped++
			case workpool.Dropped:
				d.record(f.name, IdleDropped, 1)
			}
		}
		if skipped > 0 {
			d.record(f.name, IdleSkipped, skipped)
		}
	}
}

// Rows wraps a ReadRows callback so that each row is looked at before
// the caller gets it (and can change it): f itself when d is nil.
func (d *Idle) Rows(ctx context.Context, f func(bigtable.Row) bool) func(bigtable.Row) bool {
	if d == nil {
		return f
	}
	now := d.ops.now()
	return func(r bigtable.Row) bool {
		d.AfterRead(ctx, r, now)
		return f(r)
	}
}

// errClientClosed is the cause of the refreshes' context once the
// client's Close runs.
var errClientClosed = errors.New("bttl: client closed")

// NewIdlePool is a client's pool of time-to-idle refreshes, for all its
// tables: a job's context is the read's values, cancelled by Close
// (errClientClosed) or after idleRefreshTimeout.
func NewIdlePool(workers, queue int) *IdlePool {
	closed := errClientClosed
	return workpool.New(workpool.Config[IdleKey, IdleJob]{
		Workers: workers, Queue: queue, Timeout: idleRefreshTimeout, Cause: closed,
		Key:     func(j IdleJob) IdleKey { return j.key },
		Run:     func(ctx context.Context, j IdleJob) { j.idle.record(j.family, j.idle.refresh(ctx, &j, closed), 1) },
		Dropped: func(j IdleJob) { j.idle.record(j.family, IdleDropped, 1) },
	})
}

// refresh runs one refresh; closed is the cause of ctx once the client
// closes.
func (d *Idle) refresh(ctx context.Context, j *IdleJob, closed error) IdleResult {
	now := d.ops.Clock.Now()
	newTS, err := j.p.IdleRefreshTimestamp(now)
	if err != nil {
		d.failed(j.family, err)
		return IdleFailed
	}
	if newTS <= j.key.ts {
		// Not due any more (the clock went back): never shorten a TTL.
		return IdleSkipped
	}
	applied, err := d.ops.MoveCell(ctx, j.key.row, j.family, j.key.column, j.key.ts, j.value, newTS, MoveOnlyIfNewest)
	switch {
	case err != nil && ctx.Err() != nil && context.Cause(ctx) == closed:
		return IdleDropped
	case err != nil:
		d.failed(j.family, err)
		return IdleFailed
	case !applied:
		return IdleConflict
	}
	return IdleRefreshed
}
