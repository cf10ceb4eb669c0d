package expiry_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/strategy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The stock of expired cells not yet collected, as the stream sees it, on
// two workers each exporting the gauge: 0 before anything expires; up by
// each cell announced; down by a user's delete of an announced cell (found
// by the recheck of the bucket's worker); down to 0 once GC collects the
// rest, with one worker killed (the other's consumer takes over its
// partitions and handles every GC record); the restarted worker counts
// the same from the index.
func TestStockGauge(t *testing.T) {
	ctx := context.Background()
	schema := strategy.Schema{"s": strategy.OneSecond(), "u": strategy.Unmanaged()}
	r := newRig(t, schema, "m")
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	start := func(i int) *worker {
		return r.startWorker(i, 2, expiry.WithRegisterer(regs[i]), expiry.WithRecheck(time.Second))
	}
	ws := []*worker{start(0), start(1)}
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.kill(t)
			}
		}
	}()
	// gaugeIs waits until worker i's gauge for family s reads want,
	// moving the clock a recheck interval on every 20ms of real time it
	// does not (a recheck may have run before the change it waits for).
	gaugeIs := func(i int, want float64, what string) {
		t.Helper()
		last := time.Now()
		r.waitFor(what, func() bool {
			if v, ok := stockOf(regs[i], "s"); ok && v == want {
				return true
			}
			if time.Since(last) > 20*time.Millisecond {
				r.clock.Advance(time.Second)
				last = time.Now()
			}
			return false
		})
	}
	gaugeIs(0, 0, "worker 0 counts 0 before any expiry")
	gaugeIs(1, 0, "worker 1 counts 0 before any expiry")

	// Four one-second cells on both sides of the split, in even and odd
	// buckets (both workers'), and an unmanaged one.
	data := r.client.Open("t")
	for i, row := range []string{"a", "b", "x", "y"} {
		at := bigtable.Time(r.clock.Now().Add(time.Duration(i) * time.Second))
		m := bigtable.NewMutation()
		m.Set("s", "c", at, []byte("v"))
		m.Set("u", "c", at, []byte("v"))
		require.NoError(t, data.Apply(ctx, row, m))
	}
	r.waitStream()
	r.clock.Advance(6 * time.Second)
	r.waitFor("4 cells announced", func() bool { return len(distinct(r.events)) == 4 })
	gaugeIs(0, 4, "worker 0 counts the 4 announced cells")
	gaugeIs(1, 4, "worker 1 counts the 4 announced cells")

	// A user deletes an announced cell: no GC record follows; the recheck
	// of its bucket's worker reads it back missing.
	del := bigtable.NewMutation()
	del.DeleteCellsInColumn("s", "c")
	require.NoError(t, data.Apply(ctx, "b", del))
	gaugeIs(0, 3, "worker 0 drops the deleted cell")
	gaugeIs(1, 3, "worker 1 drops the deleted cell")

	// Worker 1 killed; GC runs; worker 0 takes over its partitions once
	// their leases lapse and handles every GC record.
	ws[1].kill(t)
	ws[1] = nil
	n, err := r.srv.RunGC(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, 3, n, "GC collects the three stored expired cells")
	gaugeIs(0, 0, "worker 0 counts 0 once GC collected the rest")
	r.mu.Lock()
	collected := map[string]bool{} // distinct: a taken-over partition may give a record again
	for _, g := range r.gc {
		collected[string(g.RowKey)+"/"+g.Family] = true
	}
	r.mu.Unlock()
	assert.Equal(t, map[string]bool{"a/s": true, "x/s": true, "y/s": true}, collected, "the GC records of the three stored cells")

	ws[1] = start(1)
	gaugeIs(1, 0, "the restarted worker counts 0 from the index")
	assert.Len(t, distinct(r.events), 4, "no cell announced again")
	_, ok := stockOf(regs[0], "u")
	assert.False(t, ok, "no gauge for an unmanaged family")
}

// stockOf is the stock gauge's value for table t and family fam in reg.
func stockOf(reg *prometheus.Registry, fam string) (float64, bool) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, false
	}
	for _, mf := range mfs {
		if mf.GetName() != expiry.StockMetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["table"] == "t" && labels["family"] == fam {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}
