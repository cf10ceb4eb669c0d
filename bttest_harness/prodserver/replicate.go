package prodserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/internal/keytext"
)

// replicator applies each write accepted on one cluster to the other
// clusters after Config.Lag, and to the Data Boost replicas after
// Config.DataBoostLag more: "Replication has some latency, and consistency
// between clusters is eventual" (Replication overview,
// https://cloud.google.com/bigtable/docs/replication-overview).
//
// A queue per (source cluster, target backend) keeps the source's order;
// each pending write is a row's mutations with every server-decided value
// (server timestamps, the branch a CheckAndMutateRow took, the cells a
// ReadModifyWriteRow produced) already resolved, so the target stores the
// same cells as the source.
type replicator struct {
	s *Server

	mu     sync.Mutex
	seq    uint64
	queues map[queueKey][]*pendingWrite
	errs   []error

	applyMu sync.Mutex // one pass at a time: each write is applied once, in order
	applied atomic.Int64

	notify  chan struct{}
	cancel  context.CancelFunc
	base    context.Context
	stopped chan struct{} // closed when the background loop ends; nil if none
}

type queueKey struct {
	source string
	target *backend
}

type pendingWrite struct {
	seq   uint64
	due   time.Time
	table string
	row   rowWrite
}

func newReplicator(s *Server) *replicator {
	base, cancel := context.WithCancel(context.Background())
	return &replicator{s: s, queues: map[queueKey][]*pendingWrite{}, notify: make(chan struct{}, 1), base: base, cancel: cancel}
}

// enqueue records rows, just applied on cluster source, for every other
// cluster and every Data Boost replica. A Data Boost replica of the source
// cluster sees the write DataBoostLag after it was accepted, one of
// another cluster Lag + DataBoostLag after.
func (r *replicator) enqueue(source, table string, rows []rowWrite) {
	now := r.s.clock.Now()
	r.mu.Lock()
	for _, row := range rows {
		r.seq++
		for _, id := range r.s.order {
			lag := time.Duration(0)
			if id != source {
				lag = r.s.cfg.Lag
				k := queueKey{source, r.s.clusters[id]}
				r.queues[k] = append(r.queues[k], &pendingWrite{seq: r.seq, due: now.Add(lag), table: table, row: row})
			}
			if b := r.s.boost[id]; b != nil {
				k := queueKey{source, b}
				r.queues[k] = append(r.queues[k], &pendingWrite{seq: r.seq, due: now.Add(lag + r.s.cfg.DataBoostLag), table: table, row: row})
			}
		}
	}
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// keys are the queues in a fixed order.
func (r *replicator) keys() []queueKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]queueKey, 0, len(r.queues))
	for k := range r.queues {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b queueKey) int {
		return cmp.Or(cmp.Compare(a.source, b.source), cmp.Compare(a.target.name, b.target.name))
	})
	return keys
}

// pass applies the pending writes that are due (all of them if all),
// queue by queue in order. A write the target refuses is dropped and its
// error kept for run; a cancelled ctx leaves the rest pending.
func (r *replicator) pass(ctx context.Context, all bool) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	now := r.s.clock.Now()
	for _, k := range r.keys() {
		for {
			r.mu.Lock()
			q := r.queues[k]
			if len(q) == 0 || !all && q[0].due.After(now) {
				r.mu.Unlock()
				break
			}
			w := q[0]
			r.mu.Unlock()
			actx, cancel := context.WithTimeout(ctx, replicationPassTimeout)
			_, err := k.target.data.MutateRow(actx, &btpb.MutateRowRequest{TableName: w.table, RowKey: w.row.key, Mutations: w.row.muts})
			cancel()
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			r.mu.Lock()
			r.queues[k] = r.queues[k][1:]
			if err != nil {
				r.errs = append(r.errs, fmt.Errorf("prodserver: replicate row %s of %s from %s to %s (at %s): %w", keytext.Quote(string(w.row.key)), w.table, k.source, k.target.name, k.target.addr, err))
			}
			r.mu.Unlock()
			if err == nil {
				r.applied.Add(1)
			}
		}
	}
	return nil
}

// run is a pass followed by the errors of replication so far.
func (r *replicator) run(ctx context.Context, all bool) error {
	err := r.pass(ctx, all)
	r.mu.Lock()
	errs := append(r.errs, err)
	r.errs = nil
	r.mu.Unlock()
	return errors.Join(errs...)
}

func (r *replicator) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, q := range r.queues {
		n += len(q)
	}
	return n
}

// token is the sequence number of the last accepted write.
func (r *replicator) token() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

// caughtUp says whether every write up to token has reached the clusters
// (or, with dataBoost, the Data Boost replicas).
func (r *replicator) caughtUp(token uint64, dataBoost bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, q := range r.queues {
		if isBoost := r.s.clusters[k.target.name] == nil; isBoost != dataBoost {
			continue
		}
		if len(q) > 0 && q[0].seq <= token {
			return false
		}
	}
	return true
}

// nextDue is how long until the earliest pending write falls due, and
// whether there is one.
func (r *replicator) nextDue() (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first time.Time
	found := false
	for _, q := range r.queues {
		if len(q) > 0 && (!found || q[0].due.Before(first)) {
			first, found = q[0].due, true
		}
	}
	if !found {
		return 0, false
	}
	return max(first.Sub(r.s.clock.Now()), 0), true
}

// startBackground runs the real-time replicator: it applies each write
// when its lag has passed.
func (r *replicator) startBackground() {
	r.stopped = make(chan struct{})
	go func() {
		defer close(r.stopped)
		for {
			var timer *time.Timer
			var fire <-chan time.Time
			if d, ok := r.nextDue(); ok {
				timer = time.NewTimer(d)
				fire = timer.C
			}
			select {
			case <-r.base.Done():
				if timer != nil {
					timer.Stop()
				}
				return
			case <-r.notify:
			case <-fire:
			}
			if timer != nil {
				timer.Stop()
			}
			_ = r.pass(r.base, false)
		}
	}()
}

// stop ends the background loop (and any pass under way) and waits for it.
func (r *replicator) stop() {
	r.cancel()
	if r.stopped != nil {
		<-r.stopped
	}
}
