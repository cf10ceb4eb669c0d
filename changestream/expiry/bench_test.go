package expiry_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/strategy"
	"github.com/stretchr/testify/require"
)

// benchWrite writes n one-second cells, one change each, expiring at
// expiry(i), in bulk.
func benchWrite(b *testing.B, r *rig, n int, ts func(i int) bigtable.Timestamp) {
	tbl := r.client.Open("t")
	for lo := 0; lo < n; lo += 500 {
		var keys []string
		var muts []*bigtable.Mutation
		for i := lo; i < min(n, lo+500); i++ {
			m := bigtable.NewMutation()
			m.Set("s", "c", ts(i), []byte("v"))
			keys = append(keys, fmt.Sprintf("row%08d", i))
			muts = append(muts, m)
		}
		errs, err := tbl.ApplyBulk(context.Background(), keys, muts)
		require.NoError(b, err)
		require.Empty(b, errs)
	}
}

// benchConsumer runs one worker's consumer feeding nt until the returned
// stop is called.
func benchConsumer(b *testing.B, r *rig, store changestream.Store, nt *expiry.Notifier, clk changestream.Clock) (stop func()) {
	c, err := changestream.NewConsumer(r.dial(), changestreams.DefaultProject, changestreams.DefaultInstance, "t", store,
		changestream.WithClock(clk), changestream.WithStartTime(t0.Add(-time.Hour)), changestream.WithPollInterval(5*time.Millisecond),
		changestream.WithHeartbeat(50*time.Millisecond))
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx, func(ctx context.Context, ch changestream.Change) error {
			if err := nt.Handle(ctx, ch); err != nil {
				return err
			}
			r.mu.Lock()
			r.seen[fmt.Sprint(ch.CommitTime.UnixNano(), string(ch.RowKey), ch.Type)] = true
			r.mu.Unlock()
			return nil
		})
	}()
	return func() { cancel(); <-done }
}

// BenchmarkConsume: change records one worker consumes per second, each a
// write of one managed cell scheduled in the index (one index write per
// change, the consumer's default checkpointing).
func BenchmarkConsume(b *testing.B) {
	schema := strategy.Schema{"s": strategy.OneSecond()}
	r := newRig(b, schema)
	store := r.store()
	nt, err := expiry.New(r.client, "t", schema, "idx", store, r.record, expiry.WithClock(r.clock))
	require.NoError(b, err)
	benchWrite(b, r, b.N, func(i int) bigtable.Timestamp { return bigtable.Time(t0.Add(time.Hour)).TruncateToMilliseconds() })
	b.ResetTimer()
	stop := benchConsumer(b, r, store, nt, r.clock)
	r.waitStream()
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAnnounce: events one worker emits per second, each a due entry
// read back from the table and acknowledged (its entry deleted), spread
// over 100 buckets.
func BenchmarkAnnounce(b *testing.B) {
	schema := strategy.Schema{"s": strategy.OneSecond()}
	r := newRig(b, schema)
	store := r.store()
	nt, err := expiry.New(r.client, "t", schema, "idx", store, r.record, expiry.WithClock(r.clock))
	require.NoError(b, err)
	benchWrite(b, r, b.N, func(i int) bigtable.Timestamp {
		return bigtable.Time(t0.Add(time.Duration(i%100) * time.Second)).TruncateToMilliseconds()
	})
	stop := benchConsumer(b, r, store, nt, r.clock)
	r.waitStream()
	stop()
	r.clock.Advance(time.Hour)
	b.ResetTimer()
	for {
		_, err := nt.Poll(context.Background())
		require.NoError(b, err)
		r.mu.Lock()
		n := len(r.events)
		r.mu.Unlock()
		if n >= b.N {
			break
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDelay: the delay from each cell's expiry instant to its event,
// on the real clock, one worker polling every 100ms: cells written with
// instants 50ms apart (20 a second, well under the worker's throughput),
// announced by Run. Reported as
// percentiles over the cells whose write the stream delivered before their
// instant (the timer's own delay); late-writes counts the others, whose
// delay is the stream's.
func BenchmarkDelay(b *testing.B) {
	schema := strategy.Schema{"s": strategy.OneSecond()}
	ctx := context.Background()
	r := newRigClock(b, schema, nil)
	store := r.store()
	got := make(chan expiry.Event, b.N)
	nt, err := expiry.New(r.client, "t", schema, "idx", store, func(ctx context.Context, e expiry.Event) error {
		got <- e
		return nil
	}, expiry.WithPollInterval(100*time.Millisecond))
	require.NoError(b, err)
	c, err := changestream.NewConsumer(r.dial(), changestreams.DefaultProject, changestreams.DefaultInstance, "t", store,
		changestream.WithStartTime(time.Now()), changestream.WithPollInterval(5*time.Millisecond), changestream.WithHeartbeat(50*time.Millisecond))
	require.NoError(b, err)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	handled := map[string]time.Time{} // row -> when its write was scheduled
	go func() {
		if err := c.Run(rctx, func(ctx context.Context, ch changestream.Change) error {
			if err := nt.Handle(ctx, ch); err != nil {
				return err
			}
			mu.Lock()
			handled[string(ch.RowKey)] = time.Now()
			mu.Unlock()
			return nil
		}); rctx.Err() == nil {
			b.Errorf("consumer: %v", err)
		}
	}()
	go func() {
		if err := nt.Run(rctx); rctx.Err() == nil {
			b.Errorf("notifier: %v", err)
		}
	}()
	b.ResetTimer()
	// Far enough ahead that the stream has delivered every write before
	// the first instant (consuming takes a few ms per change here): the
	// delay measured is the timer's, for a stream that keeps up.
	start := time.Now().Add(time.Second + time.Duration(b.N)*10*time.Millisecond)
	benchWrite(b, r, b.N, func(i int) bigtable.Timestamp {
		return bigtable.Time(start.Add(time.Duration(i) * 50 * time.Millisecond)).TruncateToMilliseconds()
	})
	delays := make([]time.Duration, 0, b.N)
	late := 0
	deadline := time.After(2 * time.Minute)
	for n := 0; n < b.N; n++ {
		select {
		case e := <-got:
			mu.Lock()
			at := handled[string(e.RowKey)]
			mu.Unlock()
			if at.After(e.Expiry) {
				late++ // the stream delivered the write after its instant
				continue
			}
			delays = append(delays, e.Delay)
		case <-deadline:
			b.Fatalf("%d of %d events within 2 min", n, b.N)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(late), "late-writes")
	if len(delays) == 0 {
		return
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	pct := func(p float64) float64 { return delays[int(p*float64(len(delays)-1))].Seconds() * 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.9), "p90-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(delays[len(delays)-1].Seconds()*1000, "max-ms")
}
