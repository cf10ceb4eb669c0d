package expiry_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// scriptSchema has a family per strategy and option the history uses.
func scriptSchema() strategy.Schema {
	return strategy.Schema{
		"s": strategy.OneSecond(),
		"d": strategy.DefaultExpiry(time.Hour, strategy.WithIdleTTL(10*time.Minute, strategy.DefaultIdleDebounce)),
		"v": strategy.DefaultExpiry(time.Hour, strategy.SingleValue()),
		"w": strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime()),
		"q": strategy.Sequence(2),
		"u": strategy.Unmanaged(),
	}
}

// A scripted history through ttlclient on the change-stream server, read
// by two workers (consumer and notifier each) that are killed and
// restarted, while the stream's partitions split and merge: each cell
// stored at its expiry instant is announced at least once, soon after the
// instant, and no other cell ever is (overwritten by a single-value write,
// moved by Expire either way or by a time-to-idle refresh, deleted, a
// write-time companion, a sequence or unmanaged cell); a lost
// acknowledgement announces a cell again; a cell GC removed while the
// notifiers were down is announced from its GC change; GC records carry
// their exact lag.
func TestScriptedHistory(t *testing.T) {
	ctx := context.Background()
	schema := scriptSchema()
	r := newRig(t, schema, "m")
	conn, err := grpc.NewClient(r.srv.Addr, append(ttlclient.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	defer conn.Close()
	raw, err := bigtable.NewClientWithConfig(ctx, changestreams.DefaultProject, changestreams.DefaultInstance,
		bigtable.ClientConfig{DisableSession: true}, option.WithGRPCConn(conn))
	require.NoError(t, err)
	defer raw.Close()
	tc := ttlclient.Wrap(raw, ttlclient.WithClock(r.clock), ttlclient.WithAdminClient(r.admin, changestreams.DefaultProject, changestreams.DefaultInstance))
	defer tc.Close()
	tbl, err := tc.Open(ctx, "t", schema)
	require.NoError(t, err)

	step := func() { r.clock.Advance(time.Millisecond) } // distinct commit times
	set := func(row, fam, col string, ttl time.Duration, v string) bigtable.Timestamp {
		t.Helper()
		m := ttlclient.NewMutation()
		m.SetTTL(fam, col, ttl, []byte(v))
		require.NoError(t, tbl.Apply(ctx, row, m))
		step()
		return cellTS(t, r, row, fam, col)
	}
	apply := func(row string, m *ttlclient.Mutation) {
		t.Helper()
		require.NoError(t, tbl.Apply(ctx, row, m))
		step()
	}
	expire := func(row, fam, col string, ttl time.Duration) bigtable.Timestamp {
		t.Helper()
		ok, err := tbl.Expire(ctx, row, fam, col, ttl)
		require.NoError(t, err)
		require.True(t, ok)
		step()
		return cellTS(t, r, row, fam, col)
	}
	id := func(row, fam, col string, ts bigtable.Timestamp) cellID { return cellID{row, fam, col, ts} }
	var want []cellID

	w0, w1 := r.startWorker(0, 2), r.startWorker(1, 2)

	// Writes, a delete, Expire both ways, single value, write time,
	// sequence and unmanaged cells.
	want = append(want, id("a", "s", "x", set("a", "s", "x", 10*time.Second, "1")))
	set("a", "s", "gone", 10*time.Second, "1")
	del := ttlclient.NewMutation()
	del.DeleteCellsInColumn("s", "gone")
	apply("a", del)
	set("n", "s", "later", 10*time.Second, "1")
	want = append(want, id("n", "s", "later", expire("n", "s", "later", 60*time.Second)))
	set("n", "s", "sooner", 60*time.Second, "1")
	want = append(want, id("n", "s", "sooner", expire("n", "s", "sooner", 5*time.Second)))
	set("b", "v", "one", 20*time.Second, "1")
	want = append(want, id("b", "v", "one", set("b", "v", "one", 40*time.Second, "2")))
	want = append(want, id("o", "w", "wt", set("o", "w", "wt", 15*time.Second, "1")))
	seq := ttlclient.NewMutation()
	seq.SetVersion("q", "seq", 1, []byte("1"))
	apply("c", seq)
	plain := ttlclient.NewMutation()
	plain.Set("u", "plain", bigtable.Timestamp(t0.UnixMilli()*1000), []byte("1"))
	apply("c", plain)
	set("p", "s", "row", 10*time.Second, "1")
	dr := ttlclient.NewMutation()
	dr.DeleteRow()
	apply("p", dr)
	set("d", "d", "idle", 10*time.Minute, "1")

	// A worker killed and restarted; the partitions split and merge.
	r.waitStream()
	w1.kill(t)
	require.NoError(t, r.srv.Split("t", "g"))
	want = append(want, id("h", "s", "aftersplit", set("h", "s", "aftersplit", 25*time.Second, "1")))
	w1 = r.startWorker(1, 2)
	require.NoError(t, r.srv.Merge("t", "g"))
	want = append(want, id("i", "s", "aftermerge", set("i", "s", "aftermerge", 35*time.Second, "1")))
	r.waitStream()

	// The first acknowledgement of a:x is lost: it is announced again.
	lost := false
	r.mu.Lock()
	r.failAck = func(e expiry.Event) bool {
		if string(e.RowKey) == "a" && !lost {
			lost = true
			return true
		}
		return false
	}
	r.mu.Unlock()

	// Time passes in steps; after each, every cell whose instant passed is
	// announced, within the step.
	for _, at := range []time.Duration{6 * time.Second, 11 * time.Second, 16 * time.Second, 26 * time.Second, 36 * time.Second, 41 * time.Second, 61 * time.Second} {
		r.clock.Advance(t0.Add(at).Sub(r.clock.Now()))
		now := r.clock.Now()
		var due []cellID
		for _, c := range want {
			if !schema[c.Family].ExpiryTime(c.TS).After(now) {
				due = append(due, c)
			}
		}
		r.waitFor("announcements at "+at.String(), func() bool { return len(distinct(r.events)) >= len(due) })
		got := r.announced()
		sortIDs(due)
		require.Equal(t, due, got, "at +%v", at)
	}
	r.mu.Lock()
	assert.True(t, lost)
	aCount := 0
	first := map[cellID]time.Duration{}
	for _, e := range r.events {
		assert.False(t, schema[e.Family].IsLive(bigtable.Timestamp(e.Timestamp.UnixMicro()), bigtable.Timestamp(e.At.UnixMicro())), "%v announced while live", idOf(e))
		if first[idOf(e)] == 0 {
			first[idOf(e)] = e.Delay
		}
		if string(e.RowKey) == "a" {
			aCount++
		}
	}
	r.failAck = nil
	r.mu.Unlock()
	for c, d := range first {
		// Each instant is a second before the step that passes it.
		assert.Less(t, d, 2*time.Second, "%v announced late", c)
	}
	assert.GreaterOrEqual(t, aCount, 2, "a:x again after its lost acknowledgement")

	// Notifiers down: a cell expires and GC collects it; its GC change
	// announces it. Every expired one-second cell is collected, with its
	// lag.
	w0.kill(t)
	w1.kill(t)
	want = append(want, id("z", "s", "gcfirst", set("z", "s", "gcfirst", 3*time.Second, "1")))
	r.clock.Advance(t0.Add(70 * time.Second).Sub(r.clock.Now()))
	gcAt := r.clock.Now()
	_, err = r.srv.RunGC(ctx, "t")
	require.NoError(t, err)
	w0, w1 = r.startWorker(0, 2), r.startWorker(1, 2)
	r.waitStream()
	r.waitFor("gcfirst from GC", func() bool { return len(distinct(r.events)) >= 8 })
	r.mu.Lock()
	var fromGC []expiry.Event
	for _, e := range r.events {
		if e.Collected {
			fromGC = append(fromGC, e)
		}
	}
	gcLags := map[cellID]time.Duration{}
	for _, g := range r.gc {
		gcLags[cellID{string(g.RowKey), g.Family, g.Column, bigtable.Timestamp(g.Timestamp.UnixMicro())}] = g.Lag
	}
	r.mu.Unlock()
	// z:gcfirst, which no notifier announced, comes from its GC change;
	// others may too, again, when a restarted consumer's replay scheduled
	// them anew before GC's change (at least once).
	fromZ := false
	for _, e := range fromGC {
		fromZ = fromZ || string(e.RowKey) == "z"
		assert.Contains(t, want, idOf(e))
		assert.True(t, gcAt.Equal(e.At), "announced at GC's commit")
	}
	assert.True(t, fromZ, "z:gcfirst announced from its GC change")
	for _, c := range want {
		assert.Equal(t, gcAt.Sub(schema[c.Family].ExpiryTime(c.TS)), gcLags[c], "GC lag of %v", c)
	}
	assert.Len(t, gcLags, len(want)+1, "every announced cell, and w:wt's write-time companion")

	// A time-to-idle refresh at +2 min moves d:idle from +10 min to +12
	// min: nothing at +10 min, its announcement at +12 min.
	r.clock.Advance(t0.Add(2 * time.Minute).Sub(r.clock.Now()))
	_, err = tbl.ReadRow(ctx, "d")
	require.NoError(t, err)
	require.NoError(t, tc.FlushIdleRefreshes(ctx))
	step()
	moved := cellTS(t, r, "d", "d", "idle")
	require.True(t, t0.Add(12*time.Minute).Equal(schema["d"].ExpiryTime(moved).Truncate(time.Second)), "moved to +12 min")
	want = append(want, id("d", "d", "idle", moved))
	r.waitStream()
	r.clock.Advance(t0.Add(10*time.Minute + time.Second).Sub(r.clock.Now()))
	n := len(r.announced())
	// (An event for the old instant would be in the final comparison.)
	r.clock.Advance(t0.Add(12*time.Minute + time.Second).Sub(r.clock.Now()))
	r.waitFor("d:idle", func() bool { return len(distinct(r.events)) > n })
	sortIDs(want)
	require.Equal(t, want, r.announced())

	// GC of the default-expiry families, with their lags.
	gcAt = r.clock.Now()
	_, err = r.srv.RunGC(ctx, "t")
	require.NoError(t, err)
	r.waitStream()
	r.mu.Lock()
	for _, g := range r.gc {
		gcLags[cellID{string(g.RowKey), g.Family, g.Column, bigtable.Timestamp(g.Timestamp.UnixMicro())}] = g.Lag
	}
	r.mu.Unlock()
	idle := want[0]
	for _, c := range want {
		if c.Row == "d" {
			idle = c
		}
	}
	assert.Equal(t, gcAt.Sub(schema["d"].ExpiryTime(idle.TS)), gcLags[idle], "GC lag of %v", idle)
	assert.Len(t, gcLags, len(want)+1)
	w0.kill(t)
	w1.kill(t)
}

// cellTS is the timestamp of the newest cell of row's fam:col.
func cellTS(t *testing.T, r *rig, row, fam, col string) bigtable.Timestamp {
	t.Helper()
	got, err := r.client.Open("t").ReadRow(context.Background(), row, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.FamilyFilter("^"+fam+"$"), bigtable.ColumnRangeFilter(fam, col, col+"\x00"), bigtable.LatestNFilter(1))))
	require.NoError(t, err)
	require.Len(t, got[fam], 1)
	return got[fam][0].Timestamp
}
