package ttlclient_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

// seamServers runs f on bttest and on cbtemulator (skipped, with a message,
// when the binary is missing outside CI), each with GC off: the tests look
// at every stored cell, which the servers' GC would otherwise race.
func seamServers(t *testing.T, f func(t *testing.T, h *bttestharness.Harness)) {
	seamServersWith(t, bttestharness.Config{}, f)
}

// seamServersWith is seamServers with cfg (client interceptors, say).
func seamServersWith(t *testing.T, cfg bttestharness.Config, f func(t *testing.T, h *bttestharness.Harness)) {
	cfg.NoGC = true
	for _, server := range []string{"bttest", "cbtemulator"} {
		t.Run(server, func(t *testing.T) {
			var h *bttestharness.Harness
			if server == "bttest" {
				var err error
				h, err = bttestharness.StartWithConfig(context.Background(), cfg)
				require.NoError(t, err)
				t.Cleanup(func() { _ = h.Close() })
			} else {
				h, _ = bttestharness.NewOnEmulator(t, cfg)
			}
			f(t, h)
		})
	}
}

// guardedTable creates table and opens it through a ttlclient client whose
// connection also carries the wire guard for the same schema (with
// WithReadFilter when readFilter), on the harness's clock: the "belt and
// braces" setup of issue 26 item 1.
func guardedTable(t *testing.T, h *bttestharness.Harness, table string, schema strategy.Schema, readFilter bool) (*ttlclient.Client, *ttlclient.Table) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, table, schema))
	opts := []wireguard.Option{wireguard.WithClock(h.Clock)}
	if readFilter {
		opts = append(opts, wireguard.WithReadFilter())
	}
	g, err := wireguard.New(map[string]strategy.Schema{table: schema}, opts...)
	require.NoError(t, err)
	conn, err := grpc.NewClient(h.Addr, append(g.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	raw, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true}, option.WithGRPCConn(conn))
	require.NoError(t, err)
	c := ttlclient.Wrap(raw, ttlclient.WithClock(h.Clock), ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance))
	t.Cleanup(func() {
		_ = c.Close() // stops the refreshes; does not close raw (Wrap)
		_ = raw.Close()
		_ = conn.Close()
	})
	tbl, err := c.Open(table, schema)
	require.NoError(t, err)
	return c, tbl
}

func withAndWithoutReadFilter(t *testing.T, f func(t *testing.T, readFilter bool)) {
	for _, rf := range []bool{false, true} {
		name := "guard"
		if rf {
			name = "guard+WithReadFilter"
		}
		t.Run(name, func(t *testing.T) { f(t, rf) })
	}
}

// storedCompanions lists the write-time companions of fam:col stored in
// row, as timestamp -> write time.
func storedCompanions(t *testing.T, h *bttestharness.Harness, table, row, fam, col string) map[bigtable.Timestamp]bigtable.Timestamp {
	t.Helper()
	r, err := h.Stored(context.Background(), table, row)
	require.NoError(t, err)
	out := map[bigtable.Timestamp]bigtable.Timestamp{}
	for _, it := range r[fam] {
		if it.Column == fam+":"+strategy.WriteTimeColumn(col) {
			wt, err := strategy.ParseWriteTime(it.Value)
			require.NoError(t, err)
			out[it.Timestamp] = wt
		}
	}
	return out
}

// Issue 26 item 1(a): a ttlclient client on a guarded connection keeps
// write times: WriteTime finds the companion, and Expire and a
// time-to-idle refresh move it with its cell, keeping its value, whether
// or not the guard filters reads.
func TestGuardedConnectionKeepsWriteTimes(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		withAndWithoutReadFilter(t, func(t *testing.T, readFilter bool) {
			ctx := context.Background()
			schema := strategy.Schema{
				"s": strategy.OneSecond(strategy.WithWriteTime()),
				"i": strategy.OneSecond(strategy.WithIdleTTL(10*time.Second), strategy.WithWriteTime()),
			}
			c, tbl := guardedTable(t, h, "wt", schema, readFilter)
			written := h.Clock.Now().Truncate(time.Millisecond)
			m := ttlclient.NewMutation()
			m.Set("s", "c", ttlclient.Auto, []byte("v"), ttlclient.WithTTL(time.Hour))
			m.Set("i", "c", ttlclient.Auto, []byte("w"), ttlclient.WithTTL(10*time.Second))
			require.NoError(t, tbl.Apply(ctx, "r", m))
			h.Clock.Advance(2 * time.Second)

			row, err := tbl.ReadRow(ctx, "r") // also refreshes i:c (8s left < 9s)
			require.NoError(t, err)
			require.Len(t, row["s"], 1)
			wt, err := tbl.WriteTime(ctx, row["s"][0])
			require.NoError(t, err, "WriteTime of a cell with a companion")
			assert.True(t, written.Equal(wt), "write time %s, want %s", wt, written)

			applied, err := tbl.Expire(ctx, "r", "s", "c", 2*time.Hour)
			require.NoError(t, err)
			require.True(t, applied)
			require.NoError(t, c.FlushIdleRefreshes(ctx))

			row, err = tbl.ReadRow(ctx, "r")
			require.NoError(t, err)
			require.Len(t, row["s"], 1)
			require.Len(t, row["i"], 1)
			for _, fam := range []string{"s", "i"} {
				wt, err := tbl.WriteTime(ctx, row[fam][0])
				require.NoError(t, err, fam)
				assert.True(t, written.Equal(wt), "%s: write time %s after the move, want %s", fam, wt, written)
				// Exactly one companion, at the cell's new timestamp,
				// holding the real write time: none left behind, none
				// written by the guard with the move's time.
				assert.Equal(t, map[bigtable.Timestamp]bigtable.Timestamp{row[fam][0].Timestamp: bigtable.Time(written)},
					storedCompanions(t, h, "wt", "r", fam, "c"), fam)
			}
			assert.Equal(t, strategy.Millis(bigtable.Time(h.Clock.Now().Add(10*time.Second))), row["i"][0].Timestamp, "the refresh moved i:c")
		})
	})
}

// Issue 26 item 1(b): on a one-version family, the purge of hidden
// versions before Expire shortens a cell sees the versions the guard's
// read filter would hide, so the older value does not come back.
func TestGuardedConnectionExpirePurgesHiddenVersions(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		withAndWithoutReadFilter(t, func(t *testing.T, readFilter bool) {
			ctx := context.Background()
			schema := strategy.Schema{"f": strategy.OneSecond(strategy.WithMaxVersions(1))}
			_, tbl := guardedTable(t, h, "mv", schema, readFilter)
			for _, w := range []struct {
				v   string
				ttl time.Duration
			}{{"old", 2 * time.Hour}, {"new", 3 * time.Hour}} {
				m := ttlclient.NewMutation()
				m.Set("f", "c", ttlclient.Auto, []byte(w.v), ttlclient.WithTTL(w.ttl))
				require.NoError(t, tbl.Apply(ctx, "r", m))
			}
			applied, err := tbl.Expire(ctx, "r", "f", "c", time.Hour)
			require.NoError(t, err)
			require.True(t, applied)
			row, err := tbl.ReadRow(ctx, "r")
			require.NoError(t, err)
			require.Len(t, row["f"], 1)
			assert.Equal(t, "new", string(row["f"][0].Value), "the read after Expire")
			r, err := h.Stored(ctx, "mv", "r")
			require.NoError(t, err)
			require.Len(t, r["f"], 1, "the hidden version was purged: %v", cells(r))
			assert.Equal(t, "new", string(r["f"][0].Value))
		})
	})
}

// Issue 26 item 10: the README's read-then-WriteTime on a time-to-idle
// family with write times. The read's own refresh moves the cell (and
// its companion); WriteTime finds it where it went, whether the refresh
// has run (FlushIdleRefreshes) or is racing the call; and after an Expire
// of the same cell too.
func TestWriteTimeFollowsARefreshedCell(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		schema := strategy.Schema{"s": strategy.OneSecond(strategy.WithIdleTTL(10*time.Second), strategy.WithWriteTime())}
		tbl := h.MustTable(t, "idlewt", schema)
		write := func(row string) time.Time {
			m := ttlclient.NewMutation()
			m.Set("s", "user", ttlclient.Auto, []byte("alice"), ttlclient.WithTTL(10*time.Second))
			require.NoError(t, tbl.Apply(ctx, row, m))
			return h.Clock.Now().Truncate(time.Millisecond)
		}
		read := func(row string) bigtable.ReadItem {
			r, err := tbl.ReadRow(ctx, row) // due: 8s left < 9s, so it queues a refresh
			require.NoError(t, err)
			require.Len(t, r["s"], 1)
			return r["s"][0]
		}

		t.Run("flushed", func(t *testing.T) {
			written := write("flushed")
			h.Clock.Advance(2 * time.Second)
			it := read("flushed")
			require.NoError(t, h.Client.FlushIdleRefreshes(ctx))
			stored, err := h.Stored(ctx, "idlewt", "flushed")
			require.NoError(t, err)
			require.NotEqual(t, it.Timestamp, stored["s"][0].Timestamp, "the refresh moved the cell")
			wt, err := tbl.WriteTime(ctx, it)
			require.NoError(t, err)
			assert.True(t, written.Equal(wt), "write time %s, want %s", wt, written)

			// The README goes on: Expire the same cell, then WriteTime of
			// the item read before either move.
			applied, err := tbl.Expire(ctx, "flushed", "s", "user", 14*24*time.Hour)
			require.NoError(t, err)
			require.True(t, applied)
			wt, err = tbl.WriteTime(ctx, it)
			require.NoError(t, err)
			assert.True(t, written.Equal(wt), "after Expire: write time %s, want %s", wt, written)
		})

		t.Run("racing the refresh", func(t *testing.T) {
			for i := range 20 {
				row := "race" + itoa(int64(i))
				written := write(row)
				h.Clock.Advance(2 * time.Second)
				it := read(row)
				wt, err := tbl.WriteTime(ctx, it) // before, during or after the move
				require.NoError(t, err, "round %d", i)
				assert.True(t, written.Equal(wt), "round %d: write time %s, want %s", i, wt, written)
				h.Clock.Advance(-2 * time.Second)
			}
			require.NoError(t, h.Client.FlushIdleRefreshes(ctx))
		})
	})
}

// When the cell moved and its value is in the column more than once, with
// different write times, WriteTime says so (ErrCellMoved) rather than
// guess; the cell read again answers.
func TestWriteTimeOfAMovedCellWithARepeatedValue(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "rep", strategy.Schema{"s": strategy.OneSecond(strategy.WithMaxVersions(2), strategy.WithWriteTime())})
		var written []time.Time
		for _, ttl := range []time.Duration{time.Hour, 2 * time.Hour} {
			m := ttlclient.NewMutation()
			m.Set("s", "c", ttlclient.Auto, []byte("same"), ttlclient.WithTTL(ttl))
			require.NoError(t, tbl.Apply(ctx, "r", m))
			written = append(written, h.Clock.Now().Truncate(time.Millisecond))
			h.Clock.Advance(time.Second)
		}
		r, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		require.Len(t, r["s"], 2)
		newest := r["s"][0]
		applied, err := tbl.Expire(ctx, "r", "s", "c", 3*time.Hour)
		require.NoError(t, err)
		require.True(t, applied)
		_, err = tbl.WriteTime(ctx, newest)
		assert.ErrorIs(t, err, ttlclient.ErrCellMoved)
		var ce *ttlclient.CellError
		assert.ErrorAs(t, err, &ce)

		r, err = tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		wt, err := tbl.WriteTime(ctx, r["s"][0])
		require.NoError(t, err)
		assert.True(t, written[1].Equal(wt), "write time %s, want %s", wt, written[1])
	})
}
