package ttlclient_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

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
	var opts []wireguard.Option
	if readFilter {
		opts = append(opts, wireguard.WithReadFilter())
	}
	c := guardedClient(t, h, map[string]strategy.Schema{table: schema}, opts...)
	tbl, err := c.Open(ctx, table, schema)
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

// A ttlclient client on a guarded connection keeps write times: WriteTime
// finds the companion, and Expire and a time-to-idle refresh move it with its
// cell, keeping its value, whether or not the guard filters reads
// (issue 26 item 1(a)).
func TestGuardedConnectionKeepsWriteTimes(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		withAndWithoutReadFilter(t, func(t *testing.T, readFilter bool) {
			ctx := context.Background()
			schema := strategy.Schema{
				"s": strategy.OneSecond(strategy.WithWriteTime()),
				"i": strategy.OneSecond(strategy.WithIdleTTL(10*time.Second, strategy.DefaultIdleDebounce), strategy.WithWriteTime()),
			}
			c, tbl := guardedTable(t, h, "wt", schema, readFilter)
			written := h.Clock.Now().Truncate(time.Millisecond)
			m := ttlclient.NewMutation()
			m.SetTTL("s", "c", time.Hour, []byte("v"))
			m.SetTTL("i", "c", 10*time.Second, []byte("w"))
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

// On a one-version family, the purge of hidden versions before Expire shortens
// a cell sees the versions the guard's read filter would hide, so the older
// value does not come back (issue 26 item 1(b)).
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
				m.SetTTL("f", "c", w.ttl, []byte(w.v))
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

// The README's read-then-WriteTime on a time-to-idle family with write times.
// The read's own refresh moves the cell (and its companion); WriteTime finds
// it where it went, whether the refresh has run (FlushIdleRefreshes) or is
// racing the call; and after an Expire of the same cell too
// (issue 26 item 10).
func TestWriteTimeFollowsARefreshedCell(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		schema := strategy.Schema{"s": strategy.OneSecond(strategy.WithIdleTTL(10*time.Second, strategy.DefaultIdleDebounce), strategy.WithWriteTime())}
		tbl := h.MustTable(t, "idlewt", schema)
		write := func(row string) time.Time {
			m := ttlclient.NewMutation()
			m.SetTTL("s", "user", 10*time.Second, []byte("alice"))
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
			m.SetTTL("s", "c", ttl, []byte("same"))
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

// hookConn is a client interceptor that runs a hook once before the next
// call of a method: a concurrent writer, or the clock moving, at an exact
// point of a lifecycle operation. It counts the calls of each method.
type hookConn struct {
	mu     sync.Mutex
	hooks  map[string]func()
	counts map[string]int
}

func newHookConn() *hookConn {
	return &hookConn{hooks: map[string]func(){}, counts: map[string]int{}}
}

func (c *hookConn) before(method string, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hooks["/google.bigtable.v2.Bigtable/"+method] = f
}

func (c *hookConn) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts["/google.bigtable.v2.Bigtable/"+method]
}

func (c *hookConn) take(method string) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[method]++
	f := c.hooks[method]
	delete(c.hooks, method)
	return f
}

func (c *hookConn) config() bttestharness.Config {
	return bttestharness.Config{DialOptions: []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if f := c.take(method); f != nil {
				f()
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if f := c.take(method); f != nil {
				f()
			}
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}}
}

// A cell at the largest timestamp (a "forever" cell) has its write time, can
// be expired, and does not stop ExpireRow; its remaining TTL, over
// time.Duration's range, is reported as such (issue 26 items 11 and 12(a)).
func TestLifecycleOfACellAtTheLargestTimestamp(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "max", strategy.Schema{"s": strategy.OneSecond(strategy.WithWriteTime())})
		written := h.Clock.Now().Truncate(time.Millisecond)
		m := ttlclient.NewMutation()
		m.SetTTL("s", "a", time.Hour, []byte("a"))
		m.Set("s", "forever", math.MaxInt64, []byte("f"))
		m.Set("s", "forever2", math.MaxInt64, []byte("g"))
		m.SetTTL("s", "z", 2*time.Hour, []byte("z"))
		require.NoError(t, tbl.Apply(ctx, "r", m))
		h.Clock.Advance(time.Second)

		r, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		var forever bigtable.ReadItem
		for _, it := range r["s"] {
			if it.Column == "s:forever" {
				forever = it
			}
		}
		require.Equal(t, strategy.MaxTimestamp, forever.Timestamp)
		wt, err := tbl.WriteTime(ctx, forever)
		require.NoError(t, err, "WriteTime of a cell in the last millisecond")
		assert.True(t, written.Equal(wt), "write time %s, want %s", wt, written)
		exp, err := tbl.Expiry(forever)
		require.NoError(t, err)
		assert.Equal(t, time.UnixMicro(int64(strategy.MaxTimestamp)), exp)
		left, err := tbl.RemainingTTL(forever)
		assert.ErrorIs(t, err, strategy.ErrTimestampOverflow, "over 292 years left")
		assert.Equal(t, time.Duration(math.MaxInt64), left)

		applied, err := tbl.Expire(ctx, "r", "s", "forever", time.Minute) // a logout
		require.NoError(t, err)
		require.True(t, applied)
		target := strategy.Millis(bigtable.Time(h.Clock.Now().Add(time.Minute)))
		assert.Equal(t, map[bigtable.Timestamp]bigtable.Timestamp{target: bigtable.Time(written)}, storedCompanions(t, h, "max", "r", "s", "forever"))

		moved, err := tbl.ExpireRow(ctx, "r", 30*time.Minute)
		require.NoError(t, err, "ExpireRow through a cell at the largest timestamp")
		assert.Equal(t, 4, moved)
		want := strategy.Millis(bigtable.Time(h.Clock.Now().Add(30 * time.Minute)))
		for _, col := range []string{"a", "forever", "forever2", "z"} {
			assert.Equal(t, want, storedTimestampIn(t, h, "max", "r", "s", col), col)
		}
	})
}

// A day before the largest timestamp, Expiry and RemainingTTL are exact (no
// saturation) and a max TTL check of an explicit timestamp counts the default
// TTL exactly (issue 26 item 11, through the client).
func TestExpiryExactNearTheLargestTimestamp(t *testing.T) {
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		h.Clock.Set(time.UnixMicro(int64(strategy.MaxTimestamp)).Add(-24 * time.Hour))
		tbl := h.MustTable(t, "end", strategy.Schema{
			"d":   strategy.DefaultExpiry(48 * time.Hour),
			"cap": strategy.DefaultExpiry(48*time.Hour, strategy.WithMaxTTL(49*time.Hour, strategy.RefuseLonger)),
		})
		m := ttlclient.NewMutation()
		m.SetTTL("d", "c", 72*time.Hour, []byte("v"))
		require.NoError(t, tbl.Apply(ctx, "r", m))
		r, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		require.Len(t, r["d"], 1)
		it := r["d"][0]
		exp, err := tbl.Expiry(it)
		require.NoError(t, err)
		assert.Equal(t, time.UnixMicro(int64(it.Timestamp)).Add(48*time.Hour), exp)
		left, err := tbl.RemainingTTL(it)
		require.NoError(t, err)
		assert.Equal(t, 72*time.Hour, left)

		over := ttlclient.NewMutation()
		over.Set("cap", "c", bigtable.Timestamp(h.Clock.Now().Add(10*time.Hour).UnixMicro()), []byte("58h")) // 10h + D = 58h
		assert.ErrorIs(t, tbl.Apply(ctx, "over", over), strategy.ErrTTLTooLong)
		stored, err := h.Stored(ctx, "end", "over")
		require.NoError(t, err)
		assert.Empty(t, stored)
	})
}

// Expire of a column's newest cell, and ExpireColumn, never lift the cell over
// a value written between the read and the move (on a one-version family that
// value would be hidden and collectable): the move does not apply, and the
// newer value stays the one read (issue 26 item 12(c)).
func TestExpireNeverLiftsOverAConcurrentWrite(t *testing.T) {
	hooks := newHookConn()
	seamServersWith(t, hooks.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "lift", strategy.Schema{"f": strategy.OneSecond(strategy.WithMaxVersions(1))})
		for _, op := range []string{"Expire", "ExpireColumn", "ExpireRow"} {
			t.Run(op, func(t *testing.T) {
				row := "r" + op
				m := ttlclient.NewMutation()
				m.SetTTL("f", "c", time.Hour, []byte("a"))
				require.NoError(t, tbl.Apply(ctx, row, m))
				concurrent := strategy.Millis(bigtable.Time(h.Clock.Now().Add(2 * time.Hour)))
				hooks.before("CheckAndMutateRow", func() {
					w := bigtable.NewMutation()
					w.Set("f", "c", concurrent, []byte("b"))
					require.NoError(t, h.Raw.Open("lift").Apply(ctx, row, w))
				})
				var moved int
				var err error
				switch op {
				case "Expire":
					var applied bool
					applied, err = tbl.Expire(ctx, row, "f", "c", 3*time.Hour)
					moved = btoi(applied)
				case "ExpireColumn":
					moved, err = tbl.ExpireColumn(ctx, row, "f", "c", 3*time.Hour)
				default:
					moved, err = tbl.ExpireRow(ctx, row, 3*time.Hour)
				}
				require.NoError(t, err)
				assert.Equal(t, 0, moved, "not lifted over the concurrent write")
				assert.Equal(t, []string{"f:c@" + itoa(int64(concurrent)) + "=b"}, readCells(t, tbl, row))
			})
		}
	})
}

func readCells(t *testing.T, tbl *ttlclient.Table, row string) []string {
	t.Helper()
	r, err := tbl.ReadRow(context.Background(), row)
	require.NoError(t, err)
	return cells(r)
}

// Expire and ExpireColumn of a cell already at its target agree: the cell
// counts as given its TTL and no mutation is sent (issue 26 item 12(d)).
func TestExpireToWhereTheCellIsSendsNothing(t *testing.T) {
	hooks := newHookConn()
	seamServersWith(t, hooks.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "same", strategy.Schema{"f": strategy.OneSecond()})
		m := ttlclient.NewMutation()
		m.SetTTL("f", "c", time.Hour, []byte("v"))
		require.NoError(t, tbl.Apply(ctx, "r", m))
		before := hooks.count("CheckAndMutateRow")
		applied, err := tbl.Expire(ctx, "r", "f", "c", time.Hour)
		require.NoError(t, err)
		assert.True(t, applied)
		moved, err := tbl.ExpireColumn(ctx, "r", "f", "c", time.Hour)
		require.NoError(t, err)
		assert.Equal(t, 1, moved)
		moved, err = tbl.ExpireRow(ctx, "r", time.Hour)
		require.NoError(t, err)
		assert.Equal(t, 1, moved)
		assert.Equal(t, before, hooks.count("CheckAndMutateRow"), "no mutation sent")
	})
}

// Expire checks the cell is live at the table's clock after its reads (the
// companion's included), just before sending the CheckAndMutateRow, so a cell
// that expires before that is not moved. A cell that expires while the
// mutation is in flight (after the check) is moved: no Bigtable predicate can
// test the server's time. The design says so (docs/design.md#expire)
// (issue 26 item 12(b), the exact window).
func TestExpireChecksLivenessJustBeforeTheMutation(t *testing.T) {
	hooks := newHookConn()
	seamServersWith(t, hooks.config(), func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		tbl := h.MustTable(t, "window", strategy.Schema{"f": strategy.OneSecond(strategy.WithWriteTime())})
		expire := func() { h.Clock.Advance(2 * time.Minute) }
		for _, c := range []struct {
			name, method string
			hook         func()
			moved        bool
		}{
			{"expires after the read", "ReadRows", expire, false},
			// The second ReadRows reads the write-time companion.
			{"expires after the companion read", "ReadRows", func() { hooks.before("ReadRows", expire) }, false},
			{"expires in the mutation's flight", "CheckAndMutateRow", expire, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				row := c.name
				m := ttlclient.NewMutation()
				m.SetTTL("f", "c", time.Minute, []byte("v"))
				require.NoError(t, tbl.Apply(ctx, row, m))
				ts := storedTimestampIn(t, h, "window", row, "f", "c")
				start := h.Clock.Now()
				hooks.before(c.method, c.hook)
				applied, err := tbl.Expire(ctx, row, "f", "c", time.Hour)
				require.NoError(t, err)
				assert.Equal(t, c.moved, applied)
				want := ts
				if c.moved {
					want = strategy.Millis(bigtable.Time(start.Add(time.Hour)))
				}
				assert.Equal(t, want, storedTimestampIn(t, h, "window", row, "f", "c"))
			})
		}
	})
}
