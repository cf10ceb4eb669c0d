package migratejob_test

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/internal/testenv"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// onEmulator starts cbtemulator and a harness on it. Without the binary
// the test is skipped, or fails in CI (CI=true), where it is installed.
func onEmulator(t *testing.T, cfg bttestharness.Config) *bttestharness.Harness {
	t.Helper()
	if _, err := bttestharness.FindEmulator(); err != nil {
		testenv.Missing(t, testenv.CBTEmulator, err)
	}
	h, _ := bttestharness.NewOnEmulator(t, cfg)
	return h
}

// Acceptance 4: a writer writing through ttlclient (the one-second
// schema, as the live-system steps switch writers first) during the
// migration of the same rows and columns: none of its 10,000 values is
// lost or altered, and every legacy cell ends at its old timestamp + 30
// days (the whole family compared with the model).
func TestConcurrentWriterThroughBTTLKeepsEveryValue(t *testing.T) {
	h := onEmulator(t, bttestharness.Config{})
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "live", strategy.Schema{"f": strategy.Unmanaged()}))
	raw := h.Raw.Open("live")
	switched := h.Clock.Now() // every writer writes through bttl from here
	legacy := load(t, raw, "f", 2000, 10, switched, 10*day)
	h.Clock.Set(switched.Add(time.Second)) // past the switch plus the clock skew
	at := h.Clock.Now()
	// The family's rule is not max age 1s until the migration is done:
	// writers open without verification meanwhile (see Plan.Steps).
	w, err := h.Client.Open(context.Background(), "live", ttlclient.Schema{"f": strategy.OneSecond()}, ttlclient.WithoutVerify())
	require.NoError(t, err)

	plan := inPlace(switched, 30*day)
	m, err := migrate.New(raw, "live", plan, migrate.WithClock(h.Clock))
	require.NoError(t, err)
	var migrating atomic.Bool
	migrating.Store(true)
	type result struct {
		rep *migrate.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := m.Run(ctx, scan.WithWorkers(4), scan.WithCellsPerSecond(2000))
		migrating.Store(false)
		done <- result{rep, err}
	}()
	for m.Stats().Moved == 0 {
		time.Sleep(time.Millisecond) // waiting for another goroutine's first RPC; no clock involved
	}
	const writes = 10_000
	written := map[key]string{}
	during := 0
	for i := 0; i < writes; i++ {
		row, col := fmt.Sprintf("row%07d", i%2000), fmt.Sprintf("c%02d", (i/2000)%10)
		ttl := time.Hour + time.Duration(i)*time.Millisecond // distinct timestamps
		v := fmt.Sprintf("writer %d", i)
		mut := ttlclient.NewMutation()
		mut.SetTTL("f", col, ttl, []byte(v))
		require.NoError(t, w.Apply(ctx, row, mut))
		written[key{row, col, bigtable.Time(at.Add(ttl))}] = v
		if migrating.Load() {
			during++
		}
	}
	res := <-done
	require.NoError(t, res.err)
	t.Logf("%d of %d writes made while the migration ran; migration: %+v", during, writes, res.rep.Stats)
	require.Greater(t, during, 0, "the writer ran during the migration")
	require.Len(t, written, writes)

	want := shifted(legacy, 30*day)
	for k, v := range written {
		want[k] = v
	}
	got := stored(t, raw, "f")
	lost := 0
	for k, v := range written {
		if got[k] != v {
			lost++
		}
	}
	assert.Zero(t, lost, "writer values lost or altered")
	assert.Equal(t, want, got, "legacy cells at +30 days, writer cells as written, nothing else")
	assert.Equal(t, int64(len(legacy)), res.rep.Moved, "each legacy cell moved once")
	assert.Zero(t, res.rep.Unmoved(), "the writer adds cells at new timestamps: no legacy cell changes, none collides")

	// A rerun (the steps say: until it reports nothing) finds only the
	// writer's cells, on the target already.
	m2, err := migrate.New(raw, "live", plan, migrate.WithClock(h.Clock))
	require.NoError(t, err)
	rep, err := m2.Run(ctx)
	require.NoError(t, err)
	assert.Zero(t, rep.Changes())
	assert.Equal(t, int64(len(want)), rep.OnTarget)
}

// Acceptance 5: D -> D' (48h -> 24h, lowering, and 48h -> 96h, raising)
// copied into a new family keeps every cell's expiry instant: a read
// through bttl (ttlclient with the injected clock) of the new family under
// D' returns at every clock time what a read of the old family under D
// returns, around each TTL's expiry.
func TestDefaultExpiryChangeKeepsExpiryInstants(t *testing.T) {
	h := onEmulator(t, bttestharness.Config{NoGC: true})
	ctx := context.Background()
	const d = 48 * time.Hour
	targets := map[string]time.Duration{"lower": 24 * time.Hour, "raise": 96 * time.Hour}
	schema := strategy.Schema{"f": strategy.DefaultExpiry(d)}
	for fam, dd := range targets {
		schema[fam] = strategy.DefaultExpiry(dd)
	}
	require.NoError(t, h.CreateTable(ctx, "dd", schema))
	src, err := h.Client.Open(context.Background(), "dd", ttlclient.Schema{"f": strategy.DefaultExpiry(d)})
	require.NoError(t, err)
	t0 := h.Clock.Now()
	ttls := []time.Duration{0, time.Hour, 12 * time.Hour, 47 * time.Hour, 60 * time.Hour, 100 * time.Hour} // 0: the default, D
	for _, back := range []time.Duration{0, 30 * time.Hour} {
		h.Clock.Set(t0.Add(-back)) // some cells written earlier: a few expired at t0
		for r := 0; r < 50; r++ {
			mut := ttlclient.NewMutation()
			for i, ttl := range ttls {
				col := fmt.Sprintf("c%d-%s", i, back)
				v := []byte(fmt.Sprintf("r%d %s", r, col))
				if ttl == 0 {
					mut.Set("f", col, bigtable.ServerTime, v)
				} else {
					mut.SetTTL("f", col, ttl+time.Duration(r)*time.Minute, v)
				}
			}
			require.NoError(t, src.Apply(ctx, fmt.Sprintf("row%03d", r), mut))
		}
	}
	h.Clock.Set(t0)
	visible := func(tbl *ttlclient.Table, fam string, at time.Time) []string {
		h.Clock.Set(at)
		var out []string
		require.NoError(t, tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
			for _, it := range r[fam] {
				out = append(out, it.Row+" "+string(it.Value))
			}
			return true
		}, bigtable.RowFilter(bigtable.FamilyFilter("^"+fam+"$"))))
		sort.Strings(out)
		return out
	}
	var times []time.Time
	for _, off := range []time.Duration{0, time.Hour, 11 * time.Hour, 12*time.Hour + 30*time.Minute, 18 * time.Hour,
		47*time.Hour + 10*time.Minute, 48 * time.Hour, 49 * time.Hour, 61 * time.Hour, 101 * time.Hour, 150 * time.Hour, 200 * time.Hour} {
		times = append(times, t0.Add(off), t0.Add(off-time.Millisecond))
	}
	before := map[time.Time][]string{}
	for _, at := range times {
		before[at] = visible(src, "f", at)
	}
	require.NotEmpty(t, before[t0])
	require.Empty(t, before[t0.Add(200*time.Hour)])
	h.Clock.Set(t0)
	for fam, dd := range targets {
		t.Run(fam, func(t *testing.T) {
			h.Clock.Set(t0)
			plan := migrate.Plan{Family: "f", From: strategy.DefaultExpiry(d), To: strategy.DefaultExpiry(dd), ToFamily: fam}
			m, err := migrate.New(src.Raw(), "dd", plan, migrate.WithClock(h.Clock))
			require.NoError(t, err)
			rep, err := m.Run(ctx, scan.WithWorkers(2))
			require.NoError(t, err)
			t.Logf("%s: %+v", fam, rep.Stats)
			assert.Equal(t, int64(len(before[t0])), rep.Moved, "every cell live at the run copied")
			assert.Equal(t, int64(0), rep.Unmoved())

			dst, err := h.Client.Open(context.Background(), "dd", ttlclient.Schema{fam: strategy.DefaultExpiry(dd)})
			require.NoError(t, err)
			for _, at := range times {
				assert.Equal(t, before[at], visible(dst, fam, at), "at t0%+v", at.Sub(t0))
				assert.Equal(t, before[at], visible(src, "f", at), "the source is unchanged, at t0%+v", at.Sub(t0))
			}

			h.Clock.Set(t0)
			again, err := migrate.New(src.Raw(), "dd", plan, migrate.WithClock(h.Clock))
			require.NoError(t, err)
			rep, err = again.Run(ctx)
			require.NoError(t, err)
			assert.Zero(t, rep.Changes(), "a second copy changes nothing")
			assert.Equal(t, int64(len(before[t0])), rep.OnTarget)
		})
	}
}
