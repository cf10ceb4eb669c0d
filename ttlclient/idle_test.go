package ttlclient_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

const (
	famIdleOne = "is" // one-second, idle TTL 10m
	famIdleDef = "id" // default expiry D = 5m, idle TTL 10m (longer than D)
	idleTTL    = 10 * time.Minute
)

func idleSchema() strategy.Schema {
	return strategy.Schema{
		famIdleOne: strategy.OneSecond(strategy.WithIdleTTL(idleTTL, strategy.DefaultIdleDebounce)),
		famIdleDef: strategy.DefaultExpiry(5*time.Minute, strategy.WithIdleTTL(idleTTL, strategy.DefaultIdleDebounce)),
		famDef:     strategy.DefaultExpiry(defaultD), // no idle TTL: never refreshed
	}
}

// idleCounter is a Recorder counting time-to-idle results per family.
type idleCounter struct {
	nopRecorder
	mu sync.Mutex
	n  map[string]map[ttlclient.IdleResult]int
}

func newIdleCounter() *idleCounter {
	return &idleCounter{n: map[string]map[ttlclient.IdleResult]int{}}
}

func (c *idleCounter) Table(string, ttlclient.Schema) ttlclient.TableRecorder { return c }

func (c *idleCounter) IdleRefresh(family string, r ttlclient.IdleResult, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[family] == nil {
		c.n[family] = map[ttlclient.IdleResult]int{}
	}
	c.n[family][r] += n
}

func (c *idleCounter) get(family string, r ttlclient.IdleResult) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[family][r]
}

// nopRecorder is a TableRecorder that records nothing.
type nopRecorder struct{}

func (nopRecorder) Read(time.Duration)                               {}
func (nopRecorder) Write(time.Duration)                              {}
func (nopRecorder) CellWritten(string, strategy.Kind, time.Duration) {}
func (nopRecorder) Refused(string, string)                           {}
func (nopRecorder) ExpiredCell(string, strategy.Kind, time.Duration) {}
func (nopRecorder) ShadowRead(int, error)                            {}
func (nopRecorder) ShadowDropped()                                   {}
func (nopRecorder) VerifySkipped()                                   {}

// moveCounter is a server interceptor counting the conditional mutations
// that reach the server (every refresh is one), and optionally holding or
// failing them.
type moveCounter struct {
	n       atomic.Int64
	hold    atomic.Bool   // hold each one until release is closed or its context ends
	fail    atomic.Bool   // answer PermissionDenied (not retried by the client)
	entered chan struct{} // one send per held call
	release chan struct{}
}

func newMoveCounter() *moveCounter {
	return &moveCounter{entered: make(chan struct{}, 64), release: make(chan struct{})}
}

func (c *moveCounter) options() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !strings.HasSuffix(info.FullMethod, "/CheckAndMutateRow") {
			return h(ctx, req)
		}
		c.n.Add(1)
		if c.fail.Load() {
			return nil, status.Error(codes.PermissionDenied, "refused by the test")
		}
		if c.hold.Load() {
			c.entered <- struct{}{}
			select {
			case <-c.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return h(ctx, req)
	})}
}

// newIdleEnv starts an in-process server counting conditional mutations,
// with a client of clientOpts, and opens the idle schema on it, recorded
// by a new idleCounter.
func newIdleEnv(t *testing.T, clientOpts ...ttlclient.ClientOption) (*env, *moveCounter, *idleCounter) {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", "") // the interceptor needs the in-process server
	moves := newMoveCounter()
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{ServerOptions: moves.options(), ClientOptions: clientOpts})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	rec := newIdleCounter()
	tbl, err := h.Table(context.Background(), "t", idleSchema(), ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(0))
	require.NoError(t, err)
	return &env{h: h, tbl: tbl, ctx: context.Background()}, moves, rec
}

func (e *env) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, e.h.Client.FlushIdleRefreshes(ctx))
}

// expiryOf is the expiry of the only stored cell of fam:col.
func (e *env) expiryOf(t *testing.T, row, fam, col string) time.Time {
	t.Helper()
	p, _ := e.tbl.Policy(fam)
	return time.UnixMicro(int64(p.Expiry(e.storedTimestamp(t, row, fam, col))))
}

// liveNow reads row through the TTL filter alone, past the library: a read
// that queues no refresh.
func (e *env) liveNow(t *testing.T, row string) []string {
	t.Helper()
	r, err := e.tbl.Raw().ReadRow(e.ctx, row, bigtable.RowFilter(e.tbl.Filters().TTL(e.tbl.Now())))
	require.NoError(t, err)
	return cells(r)
}

// readEveryStep is acceptance 3 of issue 19 on one server: with the clock
// moved in steps smaller than the idle TTL, a cell read at every step never
// expires, and the debounce bounds the refresh writes; left unread, it
// expires on time, and is not revived by a read after that.
func readEveryStep(t *testing.T, e *env, rec *idleCounter, moves *moveCounter) {
	const (
		step  = 7 * time.Second
		steps = 600 // 70 minutes: seven idle TTLs
	)
	e.setTTL(t, "r", famIdleOne, "c", "one", idleTTL)
	e.setTTL(t, "r", famIdleDef, "c", "def", idleTTL)
	e.setTTL(t, "r", famDef, "c", "plain", 20*time.Minute)
	start := e.h.Clock.Now()
	lastRefresh := map[string]time.Time{famIdleOne: start, famIdleDef: start}
	for i := 1; i <= steps; i++ {
		e.h.Clock.Advance(step)
		before := map[string]int{famIdleOne: rec.get(famIdleOne, ttlclient.IdleRefreshed), famIdleDef: rec.get(famIdleDef, ttlclient.IdleRefreshed)}
		got := e.read(t, "r", bigtable.RowFilter(bigtable.LatestNFilter(1)))
		require.Len(t, got, 2+idleB2i(i*int(step) < int(20*time.Minute)), "step %d at +%s: %v", i, time.Duration(i)*step, got)
		e.flush(t)
		for fam, n := range before {
			if rec.get(fam, ttlclient.IdleRefreshed) > n {
				lastRefresh[fam] = e.h.Clock.Now()
			}
		}
	}
	elapsed := time.Duration(steps) * step
	debounce := time.Duration(float64(idleTTL) * strategy.DefaultIdleDebounce)
	for _, fam := range []string{famIdleOne, famIdleDef} {
		n := rec.get(fam, ttlclient.IdleRefreshed)
		// At most one refresh per debounce (plus the first); and one at
		// least every debounce plus a step, or the cell would be idling.
		assert.LessOrEqual(t, n, int(elapsed/debounce)+1, "%s: %d refreshes for %d reads", fam, n, steps)
		assert.GreaterOrEqual(t, n, int(elapsed/(debounce+step))-1, "%s: %d refreshes", fam, n)
		assert.Zero(t, rec.get(fam, ttlclient.IdleFailed)+rec.get(fam, ttlclient.IdleConflict)+rec.get(fam, ttlclient.IdleDropped), fam)
		t.Logf("%s: %d reads, %d refreshes (bound %d)", fam, steps, n, int(elapsed/debounce)+1)
		// The cell expires an idle TTL after its last refresh, exactly.
		assert.Equal(t, lastRefresh[fam].Add(idleTTL).UnixMicro(), e.expiryOf(t, "r", fam, "c").UnixMicro(), fam)
	}
	assert.Zero(t, rec.get(famDef, ttlclient.IdleRefreshed)+rec.get(famDef, ttlclient.IdleSkipped), "a family without an idle TTL is not looked at")
	if moves != nil {
		assert.Equal(t, int64(rec.get(famIdleOne, ttlclient.IdleRefreshed)+rec.get(famIdleDef, ttlclient.IdleRefreshed)), moves.n.Load(),
			"one conditional mutation per refresh reached the server")
	}

	// Left unread: live until its expiry, not refreshed meanwhile, gone at it.
	expiry := e.expiryOf(t, "r", famIdleOne, "c")
	e.h.Clock.Set(expiry.Add(-time.Millisecond))
	assert.Contains(t, e.liveNow(t, "r"), famIdleOne+":c@"+itoa(int64(e.storedTimestamp(t, "r", famIdleOne, "c")))+"=one")
	e.h.Clock.Set(expiry)
	for _, it := range e.read(t, "r") {
		assert.False(t, strings.HasPrefix(it, famIdleOne+":"), "expired at %s: %s", expiry, it)
	}
	e.flush(t)
	assert.Equal(t, expiry, e.expiryOf(t, "r", famIdleOne, "c"), "a read after expiry revives nothing")
}

func idleB2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestIdleReadEveryStepNeverExpires(t *testing.T) {
	e, moves, rec := newIdleEnv(t)
	readEveryStep(t, e, rec, moves)
}

func TestIdleReadEveryStepNeverExpiresOnCbtemulator(t *testing.T) {
	h, _ := bttestharness.NewOnEmulator(t, bttestharness.Config{})
	rec := newIdleCounter()
	tbl := h.MustTable(t, "t", idleSchema(), ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(0))
	readEveryStep(t, &env{h: h, tbl: tbl, ctx: context.Background()}, rec, nil)
}

// ReadRows and the TableAPI path refresh like ReadRow; only the newest cell
// of a column is refreshed, and a cell with more than the idle TTL left
// (written with a longer TTL) is left alone.
func TestIdleReadRowsAPIAndNewestOnly(t *testing.T) {
	e, _, rec := newIdleEnv(t)
	e.setTTL(t, "a", famIdleOne, "c", "old", time.Minute)
	e.h.Clock.Advance(time.Millisecond)
	e.setTTL(t, "a", famIdleOne, "c", "new", 2*time.Minute)
	e.setTTL(t, "b", famIdleOne, "c", "b", time.Minute)
	e.setTTL(t, "long", famIdleOne, "c", "remember me", 30*24*time.Hour)
	longTS := e.storedTimestamp(t, "long", famIdleOne, "c")
	oldTS := e.stored(t, "a")[0]

	var keys []string
	require.NoError(t, e.tbl.API().ReadRows(e.ctx, bigtable.PrefixRange(""), func(r bigtable.Row) bool {
		keys = append(keys, r.Key())
		return true
	}))
	assert.Equal(t, []string{"a", "b", "long"}, keys)
	e.flush(t)
	assert.Equal(t, 2, rec.get(famIdleOne, ttlclient.IdleRefreshed), "a's newest cell and b's")
	assert.Equal(t, 1, rec.get(famIdleOne, ttlclient.IdleSkipped), "long has more than the idle TTL left")
	assert.Equal(t, longTS, e.storedTimestamp(t, "long", famIdleOne, "c"), "time-to-idle never shortens a TTL")
	stored := e.stored(t, "a")
	require.Len(t, stored, 2)
	assert.Equal(t, oldTS, stored[0], "the older version is not refreshed")
	assert.Equal(t, famIdleOne+":c@"+itoa(int64(strategy.Millis(bigtable.Timestamp(e.h.Clock.Now().Add(idleTTL).UnixMicro()))))+"=new", stored[1])
	assert.Equal(t, e.h.Clock.Now().Add(idleTTL), e.expiryOf(t, "b", famIdleOne, "c"))

	// Table.API().ReadRow too.
	e.h.Clock.Advance(2 * time.Minute)
	_, err := e.tbl.API().ReadRow(e.ctx, "b")
	require.NoError(t, err)
	e.flush(t)
	assert.Equal(t, 3, rec.get(famIdleOne, ttlclient.IdleRefreshed))
	assert.Equal(t, e.h.Clock.Now().Add(idleTTL), e.expiryOf(t, "b", famIdleOne, "c"))
}

// A refresh queued before a newer write to the same column does not apply:
// lifting the read cell above the newer one would hide the newer value.
func TestIdleRefreshNeverHidesANewerWrite(t *testing.T) {
	e, moves, rec := newIdleEnv(t, ttlclient.WithIdleRefreshConcurrency(1))
	e.setTTL(t, "r", famIdleOne, "c", "v1", time.Minute)
	e.setTTL(t, "blocker", famIdleOne, "c", "x", time.Minute)
	moves.hold.Store(true)
	_, err := e.tbl.ReadRow(e.ctx, "blocker") // its refresh holds the only worker
	require.NoError(t, err)
	<-moves.entered
	moves.hold.Store(false)
	got := e.read(t, "r") // r's refresh is queued behind it
	require.Equal(t, []string{famIdleOne + ":c@" + itoa(int64(e.storedTimestamp(t, "r", famIdleOne, "c"))) + "=v1"}, got)
	e.h.Clock.Advance(time.Second)
	e.setTTL(t, "r", famIdleOne, "c", "v2", 2*time.Minute) // newer, with less time than a refresh would give v1
	close(moves.release)
	e.flush(t)

	assert.Equal(t, 1, rec.get(famIdleOne, ttlclient.IdleRefreshed), "the blocker")
	assert.Equal(t, 1, rec.get(famIdleOne, ttlclient.IdleConflict), "r's refresh did not apply")
	latest := e.read(t, "r", bigtable.RowFilter(bigtable.LatestNFilter(1)))
	require.Len(t, latest, 1)
	assert.True(t, strings.HasSuffix(latest[0], "=v2"), "the newer write is still the newest: %v", latest)
	assert.Len(t, e.stored(t, "r"), 2, "v1 unmoved, v2 as written")
}

// Under pressure refreshes are dropped and counted, never waited for: the
// reads return at once, with their rows, while every refresh worker is
// stuck. Close drops the queue, cancels the running refresh and leaves no
// goroutine behind.
func TestIdleDropsUnderPressureAndCloseLeavesNoGoroutine(t *testing.T) {
	e, moves, rec := newIdleEnv(t, ttlclient.WithIdleRefreshConcurrency(1), ttlclient.WithIdleRefreshQueue(2))
	rows := []string{"r0", "r1", "r2", "r3", "r4"}
	for _, r := range rows {
		e.setTTL(t, r, famIdleOne, "c", r, time.Minute) // due at once: 1m left of a 10m idle TTL
	}
	_, err := e.tbl.ReadRow(e.ctx, "nothing") // the connection's goroutines exist before the snapshot
	require.NoError(t, err)
	ignore := goleak.IgnoreCurrent()

	moves.hold.Store(true)
	got := e.read(t, "r0")
	require.Len(t, got, 1)
	<-moves.entered // r0's refresh runs, held by the server
	for _, r := range rows[1:] {
		got := e.read(t, r)
		require.Len(t, got, 1, r)
		assert.True(t, strings.HasSuffix(got[0], "="+r), "%s: %v", r, got)
	}
	_ = e.read(t, "r1") // queued already: skipped, not queued twice
	assert.Equal(t, 2, rec.get(famIdleOne, ttlclient.IdleDropped), "r3 and r4 found the queue full")
	assert.Equal(t, 1, rec.get(famIdleOne, ttlclient.IdleSkipped), "r1 read again")

	require.NoError(t, e.h.Client.Close())
	assert.Equal(t, 5, rec.get(famIdleOne, ttlclient.IdleDropped), "and r1, r2 queued, r0 cancelled")
	assert.Zero(t, rec.get(famIdleOne, ttlclient.IdleRefreshed)+rec.get(famIdleOne, ttlclient.IdleFailed))
	goleak.VerifyNone(t, ignore)

	// After Close a read still works (the raw client is the caller's), and
	// its refresh is dropped.
	e.h.Clock.Advance(time.Second)
	assert.Len(t, e.read(t, "r0"), 1)
	assert.Equal(t, 6, rec.get(famIdleOne, ttlclient.IdleDropped))
	assert.Equal(t, int64(1), moves.n.Load(), "only r0's refresh reached the server")
}

// A refresh that fails, for a cell too large to pin or by the server's
// refusal, changes nothing of the caller's read: same row, no error.
func TestIdleFailingRefreshKeepsTheRead(t *testing.T) {
	e, moves, rec := newIdleEnv(t)
	big := bytes.Repeat([]byte("x"), 20<<10)
	m := ttlclient.NewMutation()
	m.SetTTL(famIdleOne, "big", time.Minute, big)
	e.apply(t, "r", m)
	e.setTTL(t, "r", famIdleDef, "c", "small", time.Minute)
	want, err := e.tbl.Raw().ReadRow(e.ctx, "r", bigtable.RowFilter(e.tbl.Filters().TTL(e.tbl.Now())))
	require.NoError(t, err)

	moves.fail.Store(true)
	for i := 0; i < 3; i++ {
		got, err := e.tbl.ReadRow(e.ctx, "r")
		require.NoError(t, err)
		assert.Equal(t, want, got)
		e.flush(t)
	}
	assert.Equal(t, 3, rec.get(famIdleOne, ttlclient.IdleFailed), "too large to pin: refused before any RPC")
	assert.Equal(t, 3, rec.get(famIdleDef, ttlclient.IdleFailed), "refused by the server")
	assert.Equal(t, int64(3), moves.n.Load(), "only the small cell's refreshes were sent")
	stored, err := e.h.Stored(e.ctx, "t", "r")
	require.NoError(t, err)
	assert.Equal(t, want, stored, "nothing moved")

	// ReadRows alike.
	var rows []bigtable.Row
	require.NoError(t, e.tbl.ReadRows(e.ctx, bigtable.RowList{"r"}, func(r bigtable.Row) bool { rows = append(rows, r); return true }))
	assert.Equal(t, []bigtable.Row{want}, rows)
}

// On the caller's path, a row whose cells are not due costs no allocation:
// the look at its idle families is a loop over the returned cells.
func TestIdleLookAllocatesNothingWhenNotDue(t *testing.T) {
	e, moves, rec := newIdleEnv(t)
	now := e.tbl.Now()
	fresh := func(fam string) bigtable.Timestamp { // 10m left: not due
		p, _ := e.tbl.Policy(fam)
		ts, err := p.IdleRefreshTimestamp(time.UnixMicro(int64(now)))
		require.NoError(t, err)
		return ts
	}
	row := bigtable.Row{}
	for _, fam := range []string{famIdleOne, famIdleDef} {
		for c := 0; c < 5; c++ {
			col := string(rune('a' + c))
			row[fam] = append(row[fam],
				bigtable.ReadItem{Row: "r", Column: fam + ":" + col, Timestamp: fresh(fam), Value: []byte("v")},
				bigtable.ReadItem{Row: "r", Column: fam + ":" + col, Timestamp: fresh(fam) - 1000, Value: []byte("older")})
		}
	}
	allocs := testing.AllocsPerRun(100, func() { e.tbl.AfterIdleRead(row, now) })
	assert.Zero(t, allocs)
	e.flush(t)
	assert.Zero(t, moves.n.Load(), "nothing was due")
	assert.Equal(t, 101*5, rec.get(famIdleOne, ttlclient.IdleSkipped), "one skip per column, not per version")
}

// The same on cbtemulator, for the failure it can be made to have: a value
// too large to pin.
func TestIdleFailingRefreshKeepsTheReadOnCbtemulator(t *testing.T) {
	h, _ := bttestharness.NewOnEmulator(t, bttestharness.Config{})
	rec := newIdleCounter()
	tbl := h.MustTable(t, "t", idleSchema(), ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(0))
	e := &env{h: h, tbl: tbl, ctx: context.Background()}
	m := ttlclient.NewMutation()
	m.SetTTL(famIdleOne, "big", time.Minute, bytes.Repeat([]byte("x"), 20<<10))
	e.apply(t, "r", m)
	want, err := tbl.Raw().ReadRow(e.ctx, "r", bigtable.RowFilter(tbl.Filters().TTL(tbl.Now())))
	require.NoError(t, err)
	got, err := tbl.ReadRow(e.ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	e.flush(t)
	assert.Equal(t, 1, rec.get(famIdleOne, ttlclient.IdleFailed))
	stored, err := h.Stored(e.ctx, "t", "r")
	require.NoError(t, err)
	assert.Equal(t, want, stored, "nothing moved")
}
