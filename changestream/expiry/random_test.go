package expiry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/strategy"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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

// A random history of writes, overwrites, single-value writes, Expire
// moves both ways, deletes of columns and rows, GC runs, clock steps,
// partition splits and merges, consumers killed and restarted, and
// notifiers killed in mid-poll or losing acknowledgements, compared after
// every clock step with an independent oracle of what is stored: every
// cell stored past its instant is announced by the next poll, every
// announcement is of a cell stored at the poll and past its instant (never
// live), and an announcement from a GC change is of a cell that GC removed
// past its instant. BTTL_EXPIRY_STEPS sets the steps (default 600),
// BTTL_EXPIRY_SEED the seed (default: random, printed).
func TestRandomHistory(t *testing.T) {
	steps := envInt("BTTL_EXPIRY_STEPS", 600)
	seed := uint64(envInt("BTTL_EXPIRY_SEED", int64(rand.Uint32())+1))
	t.Logf("seed %d, %d steps (BTTL_EXPIRY_SEED=%d BTTL_EXPIRY_STEPS=%d to repeat)", seed, steps, seed, steps)
	rng := rand.New(rand.NewPCG(seed, 38))
	ctx := context.Background()
	schema := randomSchema()
	r := newRig(t, schema, "r05")
	tbl := r.client.Open("t")
	began := time.Now()

	consumer := func() *worker {
		store := r.store()
		nt, err := expiry.New(r.client, "t", schema, "idx", store, r.record, expiry.WithClock(r.clock))
		require.NoError(t, err)
		c, err := changestream.NewConsumer(r.dial(), changestreams.DefaultProject, changestreams.DefaultInstance, "t", store,
			changestream.WithClock(r.clock), changestream.WithStartTime(t0), changestream.WithPollInterval(2*time.Millisecond),
			changestream.WithHeartbeat(20*time.Millisecond), changestream.WithIdleTimeout(5*time.Second), changestream.WithMaxAttempts(100),
			changestream.WithLease(time.Hour), changestream.WithCheckpointEvery(1+rng.IntN(20)))
		require.NoError(t, err)
		cctx, cancel := context.WithCancel(ctx)
		w := &worker{cancel: cancel, done: make(chan error, 2)}
		w.done <- nil
		go func() {
			w.done <- c.Run(cctx, func(ctx context.Context, ch changestream.Change) error {
				if err := nt.Handle(ctx, ch); err != nil {
					return err
				}
				r.mu.Lock()
				r.seen[fmt.Sprint(ch.CommitTime.UnixNano(), string(ch.RowKey), ch.Type)] = true
				r.mu.Unlock()
				return nil
			})
		}()
		return w
	}
	cons := consumer()
	defer func() { cons.kill(t) }()

	// Two notifiers sharing the index, polled by the test: their polls
	// are the only timer announcements, so the oracle is exact at each.
	var killPoll func()
	notifiers := make([]*expiry.Notifier, 2)
	for i := range notifiers {
		var err error
		notifiers[i], err = expiry.New(r.client, "t", schema, "idx", r.store(), func(ctx context.Context, e expiry.Event) error {
			if err := r.record(ctx, e); err != nil {
				return err
			}
			switch x := rng.IntN(100); {
			case x < 3:
				return errAck // acknowledgement lost
			case x < 5:
				killPoll() // killed in mid-poll
			}
			return nil
		}, expiry.WithClock(r.clock), expiry.WithWorker(i, 2), expiry.WithLease(10*time.Second))
		require.NoError(t, err)
	}

	stored := map[cellID]bool{}
	announced := map[cellID]bool{}
	collected := map[cellID]bool{} // removed by GC past their instant
	rows := []string{}
	for i := 0; i < 10; i++ {
		rows = append(rows, fmt.Sprintf("r%02d", i*3))
	}
	fams := []string{"s", "d", "v", "w", "q", "u"}
	splits := map[string]bool{"r05": true}
	tick := func() { r.clock.Advance(time.Microsecond) } // distinct commit times
	pick := func() (cellID, bool) {
		for c := range stored { // map order: random enough, seeded or not
			if rng.IntN(4) == 0 {
				return c, true
			}
		}
		for c := range stored {
			return c, true
		}
		return cellID{}, false
	}
	ttl := func() time.Duration { return time.Duration(1+rng.IntN(40)) * time.Second }
	apply := func(row string, m *bigtable.Mutation) {
		require.NoError(t, tbl.Apply(ctx, row, m))
		tick()
	}
	write := func(row, fam, col string, ts bigtable.Timestamp, v string) {
		m := bigtable.NewMutation()
		p := schema[fam]
		if p.IsSingleValue() {
			m.DeleteCellsInColumn(fam, col)
			for c := range stored {
				if c.Row == row && c.Family == fam && c.Column == col {
					delete(stored, c)
				}
			}
		}
		m.Set(fam, col, ts, []byte(v))
		if p.HasWriteTime() {
			m.Set(fam, strategy.WriteTimeColumn(col), ts, strategy.WriteTimeValue(bigtable.Time(r.clock.Now())))
		}
		apply(row, m)
		if p.Kind() == strategy.KindOneSecond || p.Kind() == strategy.KindDefaultExpiry {
			stored[cellID{row, fam, col, ts}] = true
		}
	}
	polls := 0
	for step := int64(0); step < steps; step++ {
		now := r.clock.Now()
		switch x := rng.IntN(1000); {
		case x < 600: // a write, often over a column already written
			row, fam := rows[rng.IntN(len(rows))], fams[rng.IntN(len(fams))]
			col := fmt.Sprintf("c%d", rng.IntN(3))
			p := schema[fam]
			var ts bigtable.Timestamp
			switch p.Kind() {
			case strategy.KindSequence:
				ts, _ = p.SequenceTimestamp(step)
			case strategy.KindUnmanaged:
				ts = bigtable.Time(now).TruncateToMilliseconds()
			default:
				var err error
				ts, err = p.WriteTimestamp(now, ttl())
				require.NoError(t, err)
			}
			write(row, fam, col, ts, strconv.FormatInt(step, 10))
		case x < 760: // Expire or an idle refresh: move a cell, either way
			c, ok := pick()
			if !ok {
				continue
			}
			p := schema[c.Family]
			ts, err := p.WriteTimestamp(now, ttl())
			require.NoError(t, err)
			if ts == c.TS {
				continue
			}
			m := bigtable.NewMutation()
			m.DeleteTimestampRange(c.Family, c.Column, strategy.Millis(c.TS), strategy.MilliEnd(c.TS))
			m.Set(c.Family, c.Column, ts, []byte("moved"))
			apply(c.Row, m)
			delete(stored, c)
			stored[cellID{c.Row, c.Family, c.Column, ts}] = true
		case x < 810: // delete a column
			c, ok := pick()
			if !ok {
				continue
			}
			m := bigtable.NewMutation()
			m.DeleteCellsInColumn(c.Family, c.Column)
			apply(c.Row, m)
			for d := range stored {
				if d.Row == c.Row && d.Family == c.Family && d.Column == c.Column {
					delete(stored, d)
				}
			}
		case x < 830: // delete a row
			row := rows[rng.IntN(len(rows))]
			m := bigtable.NewMutation()
			m.DeleteRow()
			apply(row, m)
			for d := range stored {
				if d.Row == row {
					delete(stored, d)
				}
			}
		case x < 845: // GC
			_, err := r.srv.RunGC(ctx, "t")
			require.NoError(t, err)
			for c := range stored {
				if gcCollects(schema[c.Family], c.TS, now) {
					delete(stored, c)
					collected[c] = true
				}
			}
			tick()
		case x < 849: // a consumer killed and restarted
			cons.kill(t)
			cons = consumer()
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
			r.mu.Lock()
			from := len(r.events)
			r.mu.Unlock()
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
			r.mu.Lock()
			for _, e := range r.events[from:] {
				c := idOf(e)
				require.False(t, schema[c.Family].IsLive(c.TS, bigtable.Time(e.At)), "step %d: %v announced while live", step, c)
				if e.Collected {
					require.True(t, collected[c], "step %d: %v announced from GC, but GC did not remove it past its instant", step, c)
				} else {
					require.True(t, stored[c], "step %d: %v announced, not stored", step, c)
					require.True(t, e.At.Equal(now), "step %d: announced at the poll", step)
				}
				announced[c] = true
			}
			r.mu.Unlock()
			for c := range stored {
				if !schema[c.Family].ExpiryTime(c.TS).After(now) {
					require.True(t, announced[c], "step %d (seed %d): %v stored past its instant %v, not announced at %v", step, seed, c, schema[c.Family].ExpiryTime(c.TS), now)
				}
			}
		}
	}
	r.mu.Lock()
	events := len(r.events)
	r.mu.Unlock()
	t.Logf("seed %d: %d steps, %d polls, %d events, %d distinct cells announced, %d collected, in %v",
		seed, steps, polls, events, len(announced), len(collected), time.Since(began).Round(time.Millisecond))
}

// gcCollects is the change-stream server's GC of a max-age family: a cell
// older than the family's max age (strategy.Policy.MaxAge).
func gcCollects(p strategy.Policy, ts bigtable.Timestamp, now time.Time) bool {
	return ts < bigtable.Timestamp(now.UnixMicro()-p.MaxAge().Microseconds())
}

// record keeps an event.
func (r *rig) record(ctx context.Context, e expiry.Event) error {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	return nil
}
