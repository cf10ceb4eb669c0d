package matrix_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/internal/testenv"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/matrix"
	"github.com/bttl/bttl/ttlclient"
)

// flakyWrites fails a fraction of MutateRow and MutateRows calls with
// UNAVAILABLE, half of them before the server applies the write and half
// after (the client cannot tell the two apart and retries both). Each
// failure moves the library's clock a second forward: a retry that
// recomputed timestamps would write a second cell with a shifted one.
type flakyWrites struct {
	mu       sync.Mutex
	rng      *rand.Rand
	fraction float64
	clock    *bttestharness.ManualClock
	before   atomic.Int64 // failed before applying
	after    atomic.Int64 // applied, then failed
}

// decide returns 0 (pass), 1 (fail before) or 2 (fail after).
func (f *flakyWrites) decide() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rng.Float64() >= f.fraction {
		return 0
	}
	f.clock.Advance(time.Second)
	return 1 + f.rng.IntN(2)
}

// unavailable carries a RetryInfo of 1ms so the client retries at once
// instead of backing off for 100ms and more.
func unavailable() error {
	st, err := status.New(codes.Unavailable, "injected fault").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Millisecond)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func (f *flakyWrites) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if !strings.HasSuffix(info.FullMethod, "/MutateRow") {
				return h(ctx, req)
			}
			switch f.decide() {
			case 1:
				f.before.Add(1)
				return nil, unavailable()
			case 2:
				if _, err := h(ctx, req); err != nil {
					return nil, err
				}
				f.after.Add(1)
				return nil, unavailable()
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if !strings.HasSuffix(info.FullMethod, "/MutateRows") {
				return h(srv, ss)
			}
			switch f.decide() {
			case 1:
				f.before.Add(1)
				return unavailable()
			case 2:
				// Apply every entry but lose the per-entry results.
				if err := h(srv, muteStream{ss}); err != nil {
					return err
				}
				f.after.Add(1)
				return unavailable()
			}
			return h(srv, ss)
		}),
	}
}

type muteStream struct{ grpc.ServerStream }

func (muteStream) SendMsg(any) error { return nil }

func newFlaky(t *testing.T, fraction float64) (*bttestharness.Harness, *flakyWrites) {
	f := &flakyWrites{rng: rand.New(rand.NewPCG(7, 7)), fraction: fraction}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{ServerOptions: f.options()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	f.clock = h.Clock
	return h, f
}

// A write that the server applied but reported failed, retried while the
// clock moves: exactly one cell, with the timestamp of the first attempt.
func TestRetryKeepsTheFirstTimestamp(t *testing.T) {
	h, f := newFlaky(t, 1) // every call fails until the fraction drops
	tbl := h.MustTable(t, "t", strategy.Schema{"one": strategy.OneSecond(), "def": strategy.DefaultExpiry(time.Hour)})
	ctx := context.Background()
	start := h.Clock.Now()
	wantOne := bigtable.Timestamp(start.Add(time.Hour).UnixMicro()) - bigtable.Timestamp(start.Add(time.Hour).UnixMicro())%1000
	wantDef := bigtable.Timestamp(start.Add(-30*time.Minute).UnixMicro()) - bigtable.Timestamp(start.Add(-30*time.Minute).UnixMicro())%1000

	// Fail the first few attempts, then let the rest through.
	go func() {
		for f.before.Load()+f.after.Load() < 3 {
			runtime.Gosched()
		}
		f.mu.Lock()
		f.fraction = 0
		f.mu.Unlock()
	}()
	m := ttlclient.NewMutation()
	m.SetTTL("one", "c", time.Hour, []byte("v"))
	m.SetTTL("def", "c", 30*time.Minute, []byte("v"))
	require.NoError(t, tbl.Apply(ctx, "row", m))
	require.GreaterOrEqual(t, f.before.Load()+f.after.Load(), int64(3), "faults injected")
	require.True(t, h.Clock.Now().After(start), "the clock moved during the retries")

	stored, err := h.Stored(ctx, "t", "row")
	require.NoError(t, err)
	require.Len(t, stored["one"], 1, "one cell, no duplicate with a shifted timestamp")
	require.Len(t, stored["def"], 1, "one cell, no duplicate with a shifted timestamp")
	assert.Equal(t, wantOne, stored["one"][0].Timestamp)
	assert.Equal(t, wantDef, stored["def"][0].Timestamp)
}

// Acceptance 4 (retries): the conformance suite over a server that fails a
// third of all writes, checking after every few steps that the server
// stores exactly the model's cells.
func TestConformanceUnderWriteFaults(t *testing.T) {
	h, f := newFlaky(t, 0.3)
	tbl := h.MustTable(t, "faults", matrix.Schema())
	seed, _ := settings(t)
	const ops = 800
	t.Logf("seed %d, %d operations", seed, ops)
	stats, err := matrix.Run(context.Background(), matrix.Config{
		Seed: seed, Ops: ops,
		Target:         matrix.TableTarget(tbl),
		Clock:          h.Clock,
		Raw:            tbl.Raw(),
		FullCheckEvery: 20,
		FlushIdle:      h.Client.FlushIdleRefreshes,
	})
	t.Logf("%s; faults injected: %d before applying, %d after", stats, f.before.Load(), f.after.Load())
	require.NoError(t, err)
	require.Positive(t, f.before.Load())
	require.Positive(t, f.after.Load())
}

// Acceptance 4 (crash): cbtemulator is killed in the middle of an ApplyBulk
// of 10,000 rows. Every row is reported written or failed, nothing panics,
// the goroutines wind down, and the same client works against a restarted
// server.
func TestEmulatorKilledMidApplyBulk(t *testing.T) {
	if _, err := bttestharness.FindEmulator(); err != nil {
		testenv.Missing(t, testenv.CBTEmulator, err)
	}
	before := runtime.NumGoroutine()
	func() {
		emu, err := bttestharness.StartEmulator(context.Background())
		require.NoError(t, err)
		defer emu.Kill()

		// Kill the server as soon as the first MutateRows stream has
		// finished: ApplyBulk sends 10,000 rows of 12 cells as two
		// streams (the client caps one at 100,000 mutations).
		// A generous deadline: on a loaded machine the first stream alone
		// can take seconds. The kill cancels the call 2s later.
		bulkCtx, cancelBulk := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancelBulk()
		var streams atomic.Int64
		var killOnce sync.Once
		intercept := grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || !strings.HasSuffix(method, "/MutateRows") {
				return cs, err
			}
			streams.Add(1)
			return &onEOF{ClientStream: cs, fn: func() {
				killOnce.Do(func() {
					emu.Kill()
					// Let the client retry against the dead server for a
					// while, then give up.
					time.AfterFunc(2*time.Second, cancelBulk)
				})
			}}, nil
		})
		h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: emu.Addr, DialOptions: []grpc.DialOption{intercept}})
		require.NoError(t, err)
		defer h.Close()
		schema := strategy.Schema{"def": strategy.DefaultExpiry(time.Hour)}
		tbl := h.MustTable(t, "bulk", schema)

		const rows = 10_000
		keys := make([]string, rows)
		muts := make([]*ttlclient.Mutation, rows)
		for i := range rows {
			keys[i] = fmt.Sprintf("row%05d", i)
			m := ttlclient.NewMutation()
			for c := range 12 {
				m.SetTTL("def", fmt.Sprintf("c%02d", c), time.Duration(1+c)*time.Minute, []byte("v"))
			}
			muts[i] = m
		}
		errs, err := tbl.ApplyBulk(bulkCtx, keys, muts)
		written, failed := 0, 0
		for i := range rows {
			switch {
			case errs != nil && errs[i] != nil:
				failed++
			case errs == nil && err != nil:
				failed++ // the whole call failed: no row is reported written
			default:
				written++
			}
		}
		t.Logf("ApplyBulk after the kill: %d rows written, %d failed, %d streams; err=%v", written, failed, streams.Load(), err)
		require.Equal(t, rows, written+failed)
		require.Positive(t, failed, "rows sent after the kill must be reported failed")
		require.Positive(t, written, "the first stream finished before the kill")
		for i, e := range errs {
			if e != nil {
				c := status.Code(e)
				require.Contains(t, []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Canceled}, c, "row %d: %v", i, e)
			}
		}

		// The same clients work again against a restarted (empty) server.
		require.NoError(t, emu.Restart(context.Background()))
		require.Eventually(t, func() bool {
			return h.CreateTable(context.Background(), "bulk", schema) == nil
		}, 30*time.Second, 100*time.Millisecond, "admin client reconnects")
		m := ttlclient.NewMutation()
		m.Set("def", "c", bigtable.ServerTime, []byte("again"))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, tbl.Apply(ctx, "row", m))
		r, err := tbl.ReadRow(ctx, "row")
		require.NoError(t, err)
		require.Len(t, r["def"], 1)
		assert.Equal(t, "again", string(r["def"][0].Value))
	}()
	// Everything closed: the goroutine count returns to where it started.
	// Polled by hand: require.Eventually runs goroutines of its own.
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(20 * time.Second); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("goroutines: %d before, %d after", before, after)
	require.LessOrEqual(t, after, before, "goroutines leaked")
}

type onEOF struct {
	grpc.ClientStream
	fn func()
}

func (s *onEOF) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == io.EOF {
		s.fn()
	}
	return err
}

// Through Table.API the interceptor assigns a server-timestamp cell's
// timestamp on each attempt it sees. The client does not retry a mutation
// carrying a server timestamp (mutationsAreRetryable, v1.58.0), so a write the
// server applied and then reported Unavailable is not sent again: one cell,
// and the caller sees the Unavailable. A cell with an explicit timestamp is
// retried and rewritten the same way each time: still one cell. The clock
// moves a second at each fault, so a second attempt with a reassigned
// timestamp would store a second cell (issue 34).
func TestTimestampAssignedOnceAcrossRetries(t *testing.T) {
	h, f := newFlaky(t, 0)
	schema := strategy.Schema{"def": strategy.DefaultExpiry(time.Hour), "one": strategy.OneSecond()}
	tbl := h.MustTable(t, "t", schema)
	ctx := context.Background()
	failAfterApply := func() {
		f.mu.Lock()
		f.fraction = 1
		f.rng = rand.New(rand.NewPCG(1, 2))
		f.mu.Unlock()
	}

	// A server timestamp: applied once, reported failed, not retried.
	failAfterApply()
	server := bigtable.NewMutation()
	server.Set("def", "c", bigtable.ServerTime, []byte("v"))
	err := tbl.API().Apply(ctx, "server", server)
	f.mu.Lock()
	f.fraction = 0
	f.mu.Unlock()
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	stored, err := h.Stored(ctx, "t", "server")
	require.NoError(t, err)
	require.LessOrEqual(t, len(stored["def"]), 1, "a cell written twice: %v", stored["def"])
	assert.Equal(t, f.before.Load()+f.after.Load(), int64(1), "one attempt")

	// An explicit timestamp: retried until it passes, rewritten the same
	// way on every attempt.
	ts := bigtable.Time(h.Clock.Now().Add(time.Hour)).TruncateToMilliseconds()
	explicit := bigtable.NewMutation()
	explicit.Set("one", "c", ts, []byte("v"))
	go func() {
		for f.before.Load()+f.after.Load() < 4 {
			runtime.Gosched()
		}
		f.mu.Lock()
		f.fraction = 0
		f.mu.Unlock()
	}()
	failAfterApply()
	require.NoError(t, tbl.API().Apply(ctx, "explicit", explicit))
	stored, err = h.Stored(ctx, "t", "explicit")
	require.NoError(t, err)
	require.Len(t, stored["one"], 1, "one cell")
	assert.Equal(t, ts, stored["one"][0].Timestamp)
}

// A MutateRows stream that fails after the server applied its entries is
// retried whole by the client (applyGroup retries the group on a stream
// error, server timestamps included), so the interceptor sees the entry
// again: it stamps it at the call's first instant, and the retry
// rewrites the same cell rather than writing a second one at a later
// timestamp (the clock moves a second per injected fault).
func TestBulkRetryAfterApplyKeepsTheTimestamp(t *testing.T) {
	h, f := newFlaky(t, 0)
	tbl := h.MustTable(t, "t", strategy.Schema{"def": strategy.DefaultExpiry(time.Hour), "one": strategy.OneSecond(strategy.WithDefaultTTL(time.Hour))})
	ctx := context.Background()
	start := h.Clock.Now()
	go func() {
		for f.after.Load() < 1 {
			runtime.Gosched()
		}
		f.mu.Lock()
		f.fraction = 0
		f.mu.Unlock()
	}()
	f.mu.Lock()
	f.fraction = 1
	f.mu.Unlock()

	m := bigtable.NewMutation()
	m.Set("def", "c", bigtable.ServerTime, []byte("v"))
	m.Set("one", "c", bigtable.ServerTime, []byte("v"))
	errs, err := tbl.API().ApplyBulk(ctx, []string{"row"}, []*bigtable.Mutation{m})
	require.NoError(t, err)
	require.Nil(t, errs)
	require.GreaterOrEqual(t, f.after.Load(), int64(1), "a fault injected after the server applied the entries")
	require.True(t, h.Clock.Now().After(start), "the clock moved between the attempts")

	stored, err := h.Stored(ctx, "t", "row")
	require.NoError(t, err)
	require.Len(t, stored["def"], 1, "a cell written twice: %v", stored["def"])
	require.Len(t, stored["one"], 1, "a cell written twice: %v", stored["one"])
	assert.Equal(t, bigtable.Time(start).TruncateToMilliseconds(), stored["def"][0].Timestamp)
	assert.Equal(t, bigtable.Time(start.Add(time.Hour)).TruncateToMilliseconds(), stored["one"][0].Timestamp)
}

// refusalCounter counts a table's refusals by reason.
type refusalCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *refusalCounter) Table(string, ttlclient.Schema) ttlclient.TableRecorder { return c }
func (c *refusalCounter) Read(time.Duration)                                     {}
func (c *refusalCounter) Write(time.Duration)                                    {}
func (c *refusalCounter) CellWritten(string, strategy.Kind, time.Duration)       {}
func (c *refusalCounter) ExpiredCell(string, strategy.Kind, time.Duration)       {}
func (c *refusalCounter) ShadowRead(int, error)                                  {}
func (c *refusalCounter) ShadowDropped()                                         {}
func (c *refusalCounter) VerifySkipped()                                         {}
func (c *refusalCounter) Refused(family, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[reason]++
}

// A row the interceptor refuses in a Table.API ApplyBulk is one refusal,
// counted once, though the client sends its group again after a stream
// error (the interceptor answers the row again, from the call's first
// answer).
func TestBulkRetryCountsARefusalOnce(t *testing.T) {
	h, f := newFlaky(t, 0)
	rec := &refusalCounter{n: map[string]int{}}
	tbl := h.MustTable(t, "t", strategy.Schema{"def": strategy.DefaultExpiry(time.Hour)}, ttlclient.WithRecorder(rec))
	ctx := context.Background()
	go func() {
		for f.after.Load() < 1 {
			runtime.Gosched()
		}
		f.mu.Lock()
		f.fraction = 0
		f.mu.Unlock()
	}()
	f.mu.Lock()
	f.fraction = 1
	f.mu.Unlock()

	ok, bad := bigtable.NewMutation(), bigtable.NewMutation()
	ok.Set("def", "c", bigtable.ServerTime, []byte("v"))
	bad.Set("unknown", "c", bigtable.ServerTime, []byte("v"))
	errs, err := tbl.API().ApplyBulk(ctx, []string{"ok", "bad"}, []*bigtable.Mutation{ok, bad})
	require.NoError(t, err)
	require.Len(t, errs, 2)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], ttlclient.ErrUnknownFamily)
	require.GreaterOrEqual(t, f.after.Load(), int64(1), "a fault injected after the server applied the entries")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Equal(t, map[string]int{"unknown_family": 1}, rec.n)
}
