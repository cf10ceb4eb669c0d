package expiryhistory_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/model"
)

type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// randomSchema: two age strategies, single value, write time, and
// families that never expire.
func randomSchema() strategy.Schema {
	return strategy.Schema{
		"s": strategy.OneSecond(),
		"d": strategy.DefaultExpiry(time.Minute),
		"v": strategy.DefaultExpiry(time.Minute, strategy.SingleValue()),
		"w": strategy.DefaultExpiry(time.Minute, strategy.WithWriteTime()),
		"q": strategy.Sequence(2),
		"u": strategy.Unmanaged(),
	}
}

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && v > 0 {
		return v
	}
	return def
}

// cellID names a cell: row, family, column, timestamp (microseconds).
type cellID struct {
	Row, Family, Column string
	TS                  int64
}

func (c cellID) String() string { return fmt.Sprintf("%s/%s:%s@%d", c.Row, c.Family, c.Column, c.TS) }

func idOfCell(c model.Cell) cellID { return cellID{c.Row, c.Family, c.Column, c.TS} }

func idOf(e expiry.Event) cellID {
	return cellID{string(e.RowKey), e.Family, e.Column, e.Timestamp.UnixMicro()}
}

// event is one event a callback received, and whether it acknowledged it
// (returned nil, its poll not killed).
type event struct {
	expiry.Event
	acked bool
}

// rig is a change-stream server holding the watched table "t", the index
// "idx" and the consumers' store "state", reached in memory.
type rig struct {
	t      *testing.T
	srv    *changestreams.Server
	clock  *manualClock
	client *bigtable.Client
	conns  []*grpc.ClientConn

	mu     sync.Mutex
	events []event
	seen   map[string]bool // distinct changes the consumers handled
	// handled is signalled (without blocking) after each change handled,
	// so waitStream sleeps until there is something to count.
	handled chan struct{}
}

func newRig(t *testing.T, schema strategy.Schema, split ...string) *rig {
	ctx := context.Background()
	r := &rig{t: t, clock: &manualClock{t: t0}, seen: map[string]bool{}, handled: make(chan struct{}, 1)}
	// Only t's changes are logged: the index's and the store's writes,
	// several per step, would otherwise fill the server's log for ever.
	srv, err := changestreams.Start(ctx, changestreams.Config{SplitKeys: split, Clock: r.clock, Tables: []string{"t"}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	r.srv = srv
	t.Cleanup(func() {
		for _, c := range r.conns {
			c.Close()
		}
	})
	admin, err := bigtable.NewAdminClient(ctx, changestreams.DefaultProject, changestreams.DefaultInstance, option.WithGRPCConn(r.dial()))
	require.NoError(t, err)
	fams := map[string]bigtable.GCPolicy{}
	for f, p := range schema {
		fams[f] = p.GCPolicy()
	}
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", Families: fams}))
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "idx", Families: map[string]bigtable.GCPolicy{
		expiry.TimerFamily: bigtable.NoGcPolicy(), expiry.LeaseFamily: bigtable.NoGcPolicy(), expiry.ExpiredFamily: bigtable.NoGcPolicy()}}))
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "state", Families: map[string]bigtable.GCPolicy{"cs": bigtable.NoGcPolicy()}}))
	r.client, err = bigtable.NewClientWithConfig(ctx, changestreams.DefaultProject, changestreams.DefaultInstance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(r.dial()))
	require.NoError(t, err)
	t.Cleanup(func() { r.client.Close() })
	return r
}

// dial connects in memory: a call costs no kernel wake-up, which on a
// loaded machine is most of a call's time.
func (r *rig) dial() *grpc.ClientConn {
	conn, err := r.srv.Dial()
	require.NoError(r.t, err)
	r.conns = append(r.conns, conn)
	return conn
}

func (r *rig) store() changestream.Store {
	return changestream.NewBigtableStore(r.client.Open("state"), "cs", "t#")
}

func (r *rig) record(e expiry.Event, acked bool) {
	r.mu.Lock()
	r.events = append(r.events, event{e, acked})
	r.mu.Unlock()
}

// waitStream waits, bounded, until the consumers handled every change of
// t. The wait is on the consumer's goroutines, not on the clock: nothing
// in the history moves while it waits.
func (r *rig) waitStream() {
	r.t.Helper()
	want := r.srv.Records("t")
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		n := len(r.seen)
		r.mu.Unlock()
		if n >= want {
			return
		}
		select {
		case <-r.handled:
		case <-deadline.C:
			r.t.Fatalf("not within 30s: %d changes handled, %d recorded", n, want)
		}
	}
}

// worker is a consumer of t's stream feeding a notifier's Handle.
type worker struct {
	cancel context.CancelFunc
	done   chan error
}

func (w *worker) kill(t *testing.T) {
	w.cancel()
	if err := <-w.done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("consumer ended with %v", err)
	}
}

var errAck = errors.New("ack lost")

// A random history compared, after every clock step, with the model's
// expiries: see the package doc for what is checked and the at-least-once
// rules.
func TestRandomHistory(t *testing.T) {
	steps := envInt("BTTL_EXPIRY_STEPS", 600)
	seed := uint64(envInt("BTTL_EXPIRY_SEED", int64(rand.Uint32())+1))
	t.Logf("seed %d, %d steps (BTTL_EXPIRY_SEED=%d BTTL_EXPIRY_STEPS=%d to repeat)", seed, steps, seed, steps)
	rng := rand.New(rand.NewPCG(seed, 38))
	ctx := context.Background()
	schema := randomSchema()
	m := model.New(schema)
	r := newRig(t, schema, "r05")
	tbl := r.client.Open("t")
	began := time.Now()

	consumer := func() *worker {
		store := r.store()
		nt, err := expiry.New(r.client, "t", schema, "idx", store, func(_ context.Context, e expiry.Event) error {
			r.record(e, true)
			return nil
		}, expiry.WithClock(r.clock))
		require.NoError(t, err)
		// The consumer's poll and heartbeat are real time, so they are
		// slow here, not to load the machine with work that grows with the
		// wall time instead of the steps: the poll only claims partitions
		// and renews leases (a split, a merge and a restart are claimed at
		// once, without it), every change is pushed as it is recorded with
		// its own watermark, and a heartbeat follows each catch-up.
		c, err := changestream.NewConsumer(r.dial(), changestreams.DefaultProject, changestreams.DefaultInstance, "t", store,
			changestream.WithClock(r.clock), changestream.WithStartTime(t0), changestream.WithPollInterval(time.Second),
			changestream.WithHeartbeat(500*time.Millisecond), changestream.WithIdleTimeout(10*time.Second), changestream.WithMaxAttempts(100),
			changestream.WithLease(time.Hour), changestream.WithCheckpointEvery(1+rng.IntN(20)))
		require.NoError(t, err)
		cctx, cancel := context.WithCancel(ctx)
		w := &worker{cancel: cancel, done: make(chan error, 1)}
		go func() {
			w.done <- c.Run(cctx, func(ctx context.Context, ch changestream.Change) error {
				if err := nt.Handle(ctx, ch); err != nil {
					return err
				}
				r.mu.Lock()
				r.seen[fmt.Sprint(ch.CommitTime.UnixNano(), string(ch.RowKey), ch.Type)] = true
				r.mu.Unlock()
				select {
				case r.handled <- struct{}{}:
				default:
				}
				return nil
			})
		}()
		return w
	}
	cons := consumer()
	defer func() { cons.kill(t) }()

	// Two notifiers sharing the index, polled by the test: their polls
	// are the only timer announcements, so the model is exact at each.
	var killPoll func()
	notifiers := make([]*expiry.Notifier, 2)
	for i := range notifiers {
		var err error
		notifiers[i], err = expiry.New(r.client, "t", schema, "idx", r.store(), func(ctx context.Context, e expiry.Event) error {
			switch x := rng.IntN(100); {
			case x < 3:
				r.record(e, false)
				return errAck // acknowledgement lost
			case x < 5:
				r.record(e, false)
				killPoll() // killed in mid-poll
				return nil
			}
			r.record(e, true)
			return nil
		}, expiry.WithClock(r.clock), expiry.WithWorker(i, 2), expiry.WithLease(10*time.Second))
		require.NoError(t, err)
	}

	announced := map[cellID]bool{}
	acked := map[cellID]bool{}     // acknowledged since the last consumer restart
	collected := map[cellID]bool{} // removed by the model's GC past their instants
	uncheckedGC := []cellID{}      // of those, the ones not yet checked announced
	checkedTo := 0                 // events checked so far
	rows := []string{}
	for i := 0; i < 10; i++ {
		rows = append(rows, fmt.Sprintf("r%02d", i*3))
	}
	fams := []string{"s", "d", "v", "w", "q", "u"}
	splits := map[string]bool{"r05": true}
	tick := func() { r.clock.Advance(time.Microsecond) } // distinct commit times
	// pick is a stored cell of an age family, from the model.
	pick := func() (model.Cell, bool) {
		var cells []model.Cell
		for _, k := range m.RowKeys() {
			for _, c := range m.Stored(k) {
				if _, ok := m.Expiry(c.Family, c.TS); ok {
					cells = append(cells, c)
				}
			}
		}
		if len(cells) == 0 {
			return model.Cell{}, false
		}
		return cells[rng.IntN(len(cells))], true
	}
	ttl := func() time.Duration { return time.Duration(1+rng.IntN(40)) * time.Second }
	// apply writes mut to the server and ops to the model, the same change.
	apply := func(row string, now time.Time, mut *bigtable.Mutation, ops ...model.Op) {
		require.NoError(t, tbl.Apply(ctx, row, mut))
		require.NoError(t, m.Apply(row, now, ops))
		tick()
	}
	// holds checks the model stored the cell the library's timestamp names.
	holds := func(row, fam, col string, ts bigtable.Timestamp) {
		for _, c := range m.Stored(row) {
			if c.Family == fam && c.Column == col && c.TS == int64(ts) {
				return
			}
		}
		t.Fatalf("the model has no cell %s/%s:%s@%d after a write the library stamped so", row, fam, col, ts)
	}
	polls, checked := 0, 0
	for step := int64(0); step < steps; step++ {
		if step > 0 && step%10000 == 0 {
			t.Logf("step %d: %d polls, %d events checked, %v", step, polls, checked, time.Since(began).Round(time.Second))
		}
		now := r.clock.Now()
		switch x := rng.IntN(1000); {
		case x < 600: // a write, often over a column already written
			row, fam := rows[rng.IntN(len(rows))], fams[rng.IntN(len(fams))]
			col := fmt.Sprintf("c%d", rng.IntN(3))
			p := schema[fam]
			mut := bigtable.NewMutation()
			if p.IsSingleValue() {
				mut.DeleteCellsInColumn(fam, col)
			}
			var ts bigtable.Timestamp
			var op model.Op
			switch p.Kind() {
			case strategy.KindSequence:
				var err error
				ts, err = p.SequenceTimestamp(step + 1)
				require.NoError(t, err)
				op = model.Op{Kind: model.SetSeq, Seq: step + 1}
			case strategy.KindUnmanaged:
				// A few timestamps per column: unmanaged cells are never
				// collected, and a column growing with the history would
				// make every read of the row slower.
				ts = bigtable.Timestamp(1000 * (1 + rng.IntN(3)))
				op = model.Op{Kind: model.SetExplicit, TS: int64(ts)}
			default:
				d := ttl()
				var err error
				ts, err = p.WriteTimestamp(now, d)
				require.NoError(t, err)
				op = model.Op{Kind: model.SetTTL, TTL: d}
			}
			mut.Set(fam, col, ts, []byte(strconv.FormatInt(step, 10)))
			if p.HasWriteTime() {
				mut.Set(fam, strategy.WriteTimeColumn(col), ts, strategy.WriteTimeValue(bigtable.Time(now)))
			}
			op.Family, op.Column, op.Value = fam, col, strconv.FormatInt(step, 10)
			apply(row, now, mut, op)
			holds(row, fam, col, ts)
		case x < 760: // Expire or an idle refresh: move a cell, either way
			c, ok := pick()
			if !ok {
				continue
			}
			p := schema[c.Family]
			d := ttl()
			ts, err := p.WriteTimestamp(now, d)
			require.NoError(t, err)
			if int64(ts) == c.TS {
				continue
			}
			from, to := strategy.Millis(bigtable.Timestamp(c.TS)), strategy.MilliEnd(bigtable.Timestamp(c.TS))
			mut := bigtable.NewMutation()
			mut.DeleteTimestampRange(c.Family, c.Column, from, to)
			mut.Set(c.Family, c.Column, ts, []byte("moved"))
			if p.HasWriteTime() {
				// The companion moves with its cell.
				mut.DeleteTimestampRange(c.Family, strategy.WriteTimeColumn(c.Column), from, to)
				mut.Set(c.Family, strategy.WriteTimeColumn(c.Column), ts, strategy.WriteTimeValue(bigtable.Time(now)))
			}
			apply(c.Row, now, mut,
				model.Op{Kind: model.DeleteRange, Family: c.Family, Column: c.Column, TS: int64(from), End: int64(to)},
				model.Op{Kind: model.SetTTL, Family: c.Family, Column: c.Column, TTL: d, Value: "moved"})
			holds(c.Row, c.Family, c.Column, ts)
		case x < 810: // delete a column (and its companions)
			c, ok := pick()
			if !ok {
				continue
			}
			mut := bigtable.NewMutation()
			mut.DeleteCellsInColumn(c.Family, c.Column)
			if schema[c.Family].HasWriteTime() {
				mut.DeleteCellsInColumn(c.Family, strategy.WriteTimeColumn(c.Column))
			}
			apply(c.Row, now, mut, model.Op{Kind: model.DeleteColumn, Family: c.Family, Column: c.Column})
		case x < 830: // delete a row
			row := rows[rng.IntN(len(rows))]
			mut := bigtable.NewMutation()
			mut.DeleteRow()
			apply(row, now, mut, model.Op{Kind: model.DeleteRow})
		case x < 845: // GC: the server's and the model's remove the same cells
			n, err := r.srv.RunGC(ctx, "t")
			require.NoError(t, err)
			gone := m.GC(now.UnixMicro())
			require.Equal(t, len(gone), n, "step %d (seed %d): the server's GC removed %d cells, the model's %d:\n%s", step, seed, n, len(gone), model.Format(gone))
			for _, c := range gone {
				if exp, ok := m.Expiry(c.Family, c.TS); ok && exp <= now.UnixMicro() && !isCompanion(c) {
					collected[idOfCell(c)] = true
					uncheckedGC = append(uncheckedGC, idOfCell(c))
				}
			}
			tick()
		case x < 849: // a consumer killed and restarted: it replays its
			// changes since its last checkpoint
			cons.kill(t)
			cons = consumer()
			acked = map[cellID]bool{}
		case x < 852: // a split or a merge
			if len(splits) < 4 && rng.IntN(2) == 0 {
				k := fmt.Sprintf("r%02d", rng.IntN(30))
				if !splits[k] && r.srv.Split("t", k) == nil {
					splits[k] = true
				}
			} else {
				for k := range splits {
					if r.srv.Merge("t", k) == nil {
						delete(splits, k)
					}
					break
				}
			}
		default: // time passes, in whole milliseconds; the notifiers poll
			r.clock.Advance(time.Duration(1+rng.IntN(6000))*time.Millisecond - time.Duration(r.clock.Now().Nanosecond()%int(time.Millisecond)))
			now = r.clock.Now()
			r.waitStream()
			for i := range notifiers {
				for try := 0; ; try++ {
					pctx, cancel := context.WithCancel(ctx)
					killPoll = cancel
					_, err := notifiers[i].Poll(pctx)
					cancel()
					if err == nil {
						break
					}
					require.True(t, errors.Is(err, errAck) || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled, "poll: %v", err)
					require.Less(t, try, 1000)
				}
			}
			polls++
			nowMicros := now.UnixMicro()
			expired := map[cellID]bool{}
			for _, c := range m.Expired(nowMicros) {
				expired[idOfCell(c)] = true
			}
			r.mu.Lock()
			evs := append([]event(nil), r.events[checkedTo:]...)
			checkedTo = len(r.events)
			r.mu.Unlock()
			// Every event since the last check: from the GC changes the
			// consumer handled (emitted when handled), then this poll's.
			for _, e := range evs {
				c := idOf(e.Event)
				exp, ok := m.Expiry(c.Family, c.TS)
				require.True(t, ok, "step %d (seed %d): %v announced, but its family does not expire by age", step, seed, c)
				require.Equal(t, exp, e.Expiry.UnixMicro(), "step %d (seed %d): %v announced with instant %v, the model's is %v", step, seed, c, e.Expiry, time.UnixMicro(exp))
				if e.Collected {
					require.True(t, collected[c], "step %d (seed %d): %v announced from GC, but the model's GC did not remove it past its instant", step, seed, c)
				} else {
					require.True(t, expired[c], "step %d (seed %d): %v announced at %v, but the model does not store it past its instant (live or gone)", step, seed, c, now)
					require.True(t, e.At.Equal(now), "step %d: announced at the poll", step)
				}
				require.False(t, acked[c], "step %d (seed %d): %v announced again after an acknowledged event, no consumer restarted since", step, seed, c)
				if e.acked {
					acked[c] = true
				}
				announced[c] = true
				checked++
			}
			for c := range expired {
				require.True(t, announced[c], "step %d (seed %d): %v stored past its instant, not announced at %v", step, seed, c, now)
			}
			for _, c := range uncheckedGC {
				require.True(t, announced[c], "step %d (seed %d): %v collected past its instant, never announced", step, seed, c)
			}
			uncheckedGC = uncheckedGC[:0]
		}
	}
	t.Logf("seed %d: %d steps, %d polls, %d events checked against the model, %d distinct cells announced, in %v",
		seed, steps, polls, checked, len(announced), time.Since(began).Round(time.Millisecond))
}

func isCompanion(c model.Cell) bool {
	return len(c.Column) >= len(model.CompanionPrefix) && c.Column[:len(model.CompanionPrefix)] == model.CompanionPrefix
}
