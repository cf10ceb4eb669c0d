package matrix

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/testsuite/internal/model"
	"github.com/bttl/bttl/ttlclient"
)

// The replicated slice (docs/guarantees.md#replicated-instances): the
// Target writes through a single-cluster transactional app profile of a
// replicated instance (bttest_harness/prodserver) and reads through a
// profile whose cluster may lag the writes. Every write reaches the other
// clusters Lag after it was accepted, on the run's Clock, which must be the
// server's (prodserver.Config.Clock): the suite then knows, for every read,
// which writes each cluster holds.
//
// What a read must return, at clock T, after ReplicateDue at T:
//
//   - ReadsWriter: the writer's state, the model (read-your-writes on the
//     cluster that took them);
//   - ReadsReplica: the replica's state, the model as it was after the
//     last write accepted at or before T - Lag (none: an empty table),
//     read at T;
//   - ReadsEither (multi-cluster routing): one of the two, exactly.
//
// Each read is compared cell for cell, so it never holds an expired cell
// (the view at T of either state), nor a cell that was never written, nor
// one deleted before the state it shows. At every full check the suite
// first calls Flush: every read, and the raw contents of the writer and
// of the replica (Replication.RawReplica), must then be the model's.

// ReadRouting is which clusters the Target's reads reach.
type ReadRouting int

const (
	// ReadsWriter: the cluster that takes the writes.
	ReadsWriter ReadRouting = iota
	// ReadsReplica: a cluster (or a Data Boost replica) that receives the
	// writes Replication.Lag after they were accepted.
	ReadsReplica
	// ReadsEither: multi-cluster routing, each read on either.
	ReadsEither
)

func (r ReadRouting) String() string {
	switch r {
	case ReadsReplica:
		return "replica"
	case ReadsEither:
		return "either"
	}
	return "writer"
}

// Replication is the replicated instance under Config.Target.
type Replication struct {
	// Reads is which clusters the Target's reads reach.
	Reads ReadRouting
	// Lag is how long after a write was accepted the replica holds it
	// (the server's replication lag, or its Data Boost lag).
	Lag time.Duration
	// ReplicateDue applies the writes whose lag has passed on the clock
	// (prodserver.Server.ReplicateDue); Flush applies every pending write
	// (prodserver.Server.Flush).
	ReplicateDue, Flush func(context.Context) error
	// RawReplica, when set, is the replica's table through the raw client:
	// after each Flush it must store what Config.Raw may (fullCheck's
	// rules).
	RawReplica *bigtable.Table
}

// ReplicationStats counts what the replicated slice saw.
type ReplicationStats struct {
	// Flushes: Flush calls (one per full check).
	Flushes int
	// StaleReads: reads that returned the replica's state where it
	// differed from the writer's (a read behind the writes).
	StaleReads int
	// FreshReads: reads that returned the writer's state where the
	// replica's differed (ReadsEither only).
	FreshReads int
	// ReplicaChecks: raw reads of the replica after a Flush.
	ReplicaChecks int
}

func (s ReplicationStats) String() string {
	return fmt.Sprintf("%d flushes, %d stale reads (the replica's state, differing from the writer's), %d reads of the writer's state where the replica differed, %d raw checks of the replica",
		s.Flushes, s.StaleReads, s.FreshReads, s.ReplicaChecks)
}

// snapshot is the model after the writes accepted at clock at.
type snapshot struct {
	at time.Time
	m  *model.Model
}

// lagged is the suite's record of what the replica holds.
type lagged struct {
	// replica is the replica's state as of the last ReplicateDue or Flush.
	replica *model.Model
	// pending are the states after writes the replica has not received
	// yet, oldest first.
	pending []snapshot
}

// snapshot records the model as of clock reading at: runner.clock calls
// it before it moves the clock, so every write (and time-to-idle refresh)
// since its last call, all accepted at reading at, is in it. A reading
// without writes records an identical state, which is harmless.
func (r *runner) snapshot(at time.Time) {
	if r.cfg.Replication == nil {
		return
	}
	if r.lag == nil {
		r.lag = &lagged{replica: model.NewWith(r.cfg.Schema, r.cfg.Semantics)}
	}
	r.lag.pending = append(r.lag.pending, snapshot{at: at, m: r.m.Clone()})
}

// replicate applies the writes due at the clock's reading (the read's
// time, which does not move until the read is checked) and moves the
// suite's record of the replica along.
func (r *runner) replicate(what string) error {
	rep := r.cfg.Replication
	if rep == nil {
		return nil
	}
	if r.lag == nil {
		r.lag = &lagged{replica: model.NewWith(r.cfg.Schema, r.cfg.Semantics)}
	}
	now := r.cfg.Clock.Now()
	if err := rep.ReplicateDue(r.ctx); err != nil {
		return r.fail(what, fmt.Sprintf("replication failed: %v", err))
	}
	// prodserver applies a write once due = accepted + Lag is not after
	// now: the same comparison.
	i := 0
	for ; i < len(r.lag.pending) && !r.lag.pending[i].at.Add(rep.Lag).After(now); i++ {
		r.lag.replica = r.lag.pending[i].m
	}
	r.lag.pending = r.lag.pending[i:]
	return nil
}

// flush applies every pending write: the replica's state is the model's.
func (r *runner) flush(what string) error {
	rep := r.cfg.Replication
	if rep == nil {
		return nil
	}
	if err := rep.Flush(r.ctx); err != nil {
		return r.fail(what, fmt.Sprintf("flush failed: %v", err))
	}
	r.lag = &lagged{replica: r.m.Clone()}
	r.stats.Replication.Flushes++
	return nil
}

// compareRead checks a read that returned got against the states the
// routing allows; wantOf is the read's answer in a state.
func (r *runner) compareRead(what string, got []model.Cell, wantOf func(*model.Model) []model.Cell) ([]model.Cell, error) {
	want := wantOf(r.m)
	rep := r.cfg.Replication
	if rep == nil || rep.Reads == ReadsWriter || r.lag == nil {
		return want, r.compare(what, want, got)
	}
	stale := wantOf(r.lag.replica)
	differ := !equalCells(want, stale)
	switch {
	case rep.Reads == ReadsReplica:
		if differ {
			r.stats.Replication.StaleReads++
		}
		return stale, r.compare(what+" (on the replica)", stale, got)
	case equalCells(stale, got):
		if differ {
			r.stats.Replication.StaleReads++
		}
		r.stats.Reads++
		r.stats.CellsCompared += len(stale)
		return stale, nil
	}
	if differ && equalCells(want, got) {
		r.stats.Replication.FreshReads++
	}
	if err := r.compare(what, want, got); err != nil {
		return want, fmt.Errorf("%w\nthe replica's state, which the read may also return:\n%s", err, indent(model.Format(stale)))
	}
	return want, nil
}

// SplitTarget is a Target that writes, and runs the lifecycle operations,
// through write (on a transactional profile) and reads through read (on
// another profile: a ttlclient.Table's TableTarget, or a plain client's
// WireTarget, whose writes it never uses): a program with two clients, as
// the replicated slice runs it.
func SplitTarget(write *ttlclient.Table, read Target) Target {
	return splitTarget{tableTarget{write}, read}
}

type splitTarget struct {
	w tableTarget
	r Target
}

func (s splitTarget) Apply(ctx context.Context, row string, ops []model.Op) error {
	return s.w.Apply(ctx, row, ops)
}

func (s splitTarget) ApplyBulk(ctx context.Context, rows []string, ops [][]model.Op) ([]error, error) {
	return s.w.ApplyBulk(ctx, rows, ops)
}

func (s splitTarget) CondApply(ctx context.Context, row string, cond bigtable.Filter, tops, fops []model.Op) error {
	return s.w.CondApply(ctx, row, cond, tops, fops)
}

func (s splitTarget) ReadRow(ctx context.Context, row string, f bigtable.Filter) (bigtable.Row, error) {
	return s.r.ReadRow(ctx, row, f)
}

func (s splitTarget) ReadRows(ctx context.Context, rs bigtable.RowSet, f bigtable.Filter, fn func(bigtable.Row) bool) error {
	return s.r.ReadRows(ctx, rs, f, fn)
}

func (s splitTarget) Expire(ctx context.Context, row, family, column string, ttl time.Duration, opts ...ttlclient.ExpireOption) (bool, error) {
	return s.w.Expire(ctx, row, family, column, ttl, opts...)
}

func (s splitTarget) ExpireColumn(ctx context.Context, row, family, column string, ttl time.Duration) (int, error) {
	return s.w.ExpireColumn(ctx, row, family, column, ttl)
}

func (s splitTarget) WriteTime(ctx context.Context, item bigtable.ReadItem) (time.Time, error) {
	return s.w.WriteTime(ctx, item)
}
