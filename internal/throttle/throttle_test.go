package throttle

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fakeClock moves only when told, or by the waits it is asked for: Sleep
// advances it at once.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	slept  time.Duration
	sleeps int
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.slept += d
	f.sleeps++
	return nil
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fakeClock) sleptFor() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slept
}

func throttled(delay time.Duration) error {
	st := status.New(codes.ResourceExhausted, "throttled")
	if delay > 0 {
		st, _ = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
	}
	return st.Err()
}

func TestCeilingPacesCells(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Ceiling: 100, Clock: clk})
	require.NoError(t, c.WaitN(context.Background(), 100)) // one second's burst
	assert.Zero(t, clk.sleptFor())
	require.NoError(t, c.WaitN(context.Background(), 250))
	// 250 more cells at 100 a second: 2.5 s.
	assert.InDelta(t, 2.5, clk.sleptFor().Seconds(), 0.01)
	assert.Equal(t, 100.0, c.Rate())
}

func TestUnlimitedWithoutCeilingNeverWaits(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Clock: clk})
	for range 100 {
		require.NoError(t, c.WaitN(context.Background(), 1_000_000))
	}
	assert.Zero(t, clk.sleptFor())
	assert.Zero(t, c.Rate(), "0: unlimited")
}

func TestResourceExhaustedLowersTheRateOncePerPeriod(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Ceiling: 1000, Period: time.Second, Clock: clk})
	c.Throttle(10 * time.Millisecond)
	assert.InDelta(t, 700, c.Rate(), 1e-9)
	// More answers of the same overload, within the period: lowered once.
	clk.advance(300 * time.Millisecond)
	c.Throttle(10 * time.Millisecond)
	c.Throttle(10 * time.Millisecond)
	assert.InDelta(t, 700, c.Rate(), 1e-9)
	clk.advance(time.Second)
	c.Throttle(10 * time.Millisecond)
	assert.InDelta(t, 490, c.Rate(), 1e-9)
	assert.Equal(t, Stats{Throttled: 4, Decreases: 2}, c.Stats())
}

func TestQuietPeriodsRaiseTheRateToTheCeilingOnly(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Ceiling: 1000, Period: time.Second, Clock: clk})
	c.Throttle(0)
	c.mu.Lock()
	c.lastDecrease = time.Time{} // lower again at once: the floor of the test
	c.mu.Unlock()
	c.Throttle(0)
	assert.InDelta(t, 490, c.Rate(), 1e-9)
	// Within a period of the last RESOURCE_EXHAUSTED: no increase.
	clk.advance(900 * time.Millisecond)
	assert.InDelta(t, 490, c.Rate(), 1e-9)
	// Each quiet period adds a tenth of the ceiling.
	clk.advance(100 * time.Millisecond)
	assert.InDelta(t, 590, c.Rate(), 1e-9)
	clk.advance(2 * time.Second)
	assert.InDelta(t, 790, c.Rate(), 1e-9)
	clk.advance(time.Hour)
	assert.Equal(t, 1000.0, c.Rate(), "never above the ceiling")
}

func TestRateNeverFallsBelowTheFloor(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Ceiling: 2, Period: time.Second, Clock: clk})
	for range 10 {
		c.Throttle(0)
		clk.advance(time.Second)
	}
	c.mu.Lock()
	assert.Equal(t, MinRate, c.cur) // read without the increase Rate applies
	c.mu.Unlock()
	// A ceiling below the floor is the most the pace reaches, throttled
	// or not.
	low := New(Config{Ceiling: 0.5, Clock: clk})
	low.Throttle(0)
	assert.Equal(t, 0.5, low.Rate())
}

func TestRetryInfoHoldsEveryWorker(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Ceiling: 1000, Clock: clk})
	c.Throttle(250 * time.Millisecond)
	require.NoError(t, c.WaitN(context.Background(), 1))
	assert.Equal(t, 250*time.Millisecond, clk.sleptFor(), "the first cell waits the RetryInfo delay")
}

func TestWithoutCeilingTheFirstThrottleStartsFromThePaceMeasured(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Period: time.Second, Clock: clk})
	// 5000 cells a second for two seconds.
	for range 20 {
		require.NoError(t, c.WaitN(context.Background(), 500))
		clk.advance(100 * time.Millisecond)
	}
	c.Throttle(0)
	assert.InDelta(t, 0.7*5000, c.Rate(), 1)
	// The increase is a tenth of the pace measured, without a ceiling.
	clk.advance(time.Second)
	assert.InDelta(t, 0.7*5000+500, c.Rate(), 1)
}

// A RESOURCE_EXHAUSTED before any cell was paced, without a ceiling (a
// first SampleRowKeys refused): nothing to lower from, so the pace stays
// unlimited and only the hold applies; it is not set to the floor.
func TestWithoutCeilingAThrottleBeforeAnyCellOnlyHolds(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Period: time.Second, Clock: clk})
	c.Throttle(50 * time.Millisecond)
	assert.Zero(t, c.Rate(), "still unlimited")
	require.NoError(t, c.WaitN(context.Background(), 1_000_000))
	assert.Equal(t, 50*time.Millisecond, clk.sleptFor(), "the hold only")
	assert.Equal(t, Stats{Throttled: 1}, c.Stats())
}

func TestWaitPastTheDeadlineFailsAtOnce(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Ceiling: 10, Clock: clk})
	require.NoError(t, c.WaitN(context.Background(), 10))
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Second))
	defer cancel()
	err := c.WaitN(ctx, 100) // 10 s at 10 a second
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, clk.sleptFor())
}

// The interceptor sends a call answered RESOURCE_EXHAUSTED with RetryInfo
// again after the delay; without RetryInfo, or on another code, the answer
// is returned as it is.
func TestUnaryInterceptorRetriesWhatTheServerAskedFor(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Ceiling: 1000, Clock: clk})
	answers := []error{throttled(40 * time.Millisecond), throttled(60 * time.Millisecond), nil}
	calls := 0
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		calls++
		return answers[calls-1]
	}
	err := c.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/CheckAndMutateRow", nil, nil, nil, invoker)
	require.NoError(t, err)
	assert.Equal(t, 3, calls)
	assert.Equal(t, 100*time.Millisecond, clk.sleptFor(), "each RetryInfo delay waited")
	assert.Equal(t, Stats{Throttled: 2, Retried: 2, Decreases: 1}, c.Stats())

	for _, answer := range []error{throttled(0), status.Error(codes.Unavailable, "gone")} {
		calls = 0
		err = c.UnaryClientInterceptor()(context.Background(), "/m", nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			calls++
			return answer
		})
		assert.Equal(t, answer, err)
		assert.Equal(t, 1, calls)
	}
}

func TestUnaryInterceptorStopsRetryingWhenTheContextEnds(t *testing.T) {
	c := New(Config{Ceiling: 1000, Clock: newFakeClock()})
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := c.UnaryClientInterceptor()(ctx, "/m", nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		calls++
		cancel()
		return throttled(time.Second)
	})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "the server's answer, not the context's")
	assert.Equal(t, 1, calls)
}

// fakeStream ends with err.
type fakeStream struct {
	grpc.ClientStream
	err error
}

func (s fakeStream) RecvMsg(any) error { return s.err }

func TestStreamInterceptorObservesTheEndOnce(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Ceiling: 1000, Clock: clk})
	s, err := c.StreamClientInterceptor()(context.Background(), &grpc.StreamDesc{}, nil, "/google.bigtable.v2.Bigtable/ReadRows",
		func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			return fakeStream{err: throttled(30 * time.Millisecond)}, nil
		})
	require.NoError(t, err)
	for range 3 {
		assert.Equal(t, codes.ResourceExhausted, status.Code(s.RecvMsg(nil)))
	}
	assert.Equal(t, int64(1), c.Stats().Throttled)
	assert.InDelta(t, 700, c.Rate(), 1e-9)
}

func TestWriteMetrics(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Ceiling: 1000, Clock: clk})
	c.Throttle(0)
	var b bytes.Buffer
	require.NoError(t, c.WriteMetrics(&b, "audit"))
	out := b.String()
	for _, want := range []string{
		`bttl_throttle_rate_cells_per_second{command="audit"} 700`,
		`bttl_throttle_ceiling_cells_per_second{command="audit"} 1000`,
		`bttl_throttle_resource_exhausted_total{command="audit"} 1`,
		`bttl_throttle_decreases_total{command="audit"} 1`,
	} {
		assert.Contains(t, out, want)
	}
	b.Reset()
	require.NoError(t, New(Config{Clock: clk}).WriteMetrics(&b, "migrate"))
	assert.True(t, strings.Contains(b.String(), `bttl_throttle_rate_cells_per_second{command="migrate"} +Inf`), b.String())
}

// A RetryInfo of an hour holds the workers Config.MaxHold only (they wait
// where no stall watch looks); the refused unary call itself is sent again
// only after its whole delay, which its context bounds.
func TestLongRetryInfoHoldsTheWorkersAtMostMaxHold(t *testing.T) {
	clk := newFakeClock()
	c := New(Config{Ceiling: 1000, MaxHold: 5 * time.Second, Clock: clk})
	c.Throttle(time.Hour)
	require.NoError(t, c.WaitN(context.Background(), 1))
	assert.Equal(t, 5*time.Second, clk.sleptFor(), "the workers' hold: MaxHold")

	clk = newFakeClock()
	c = New(Config{Ceiling: 1000, MaxHold: 5 * time.Second, Clock: clk})
	answers := []error{throttled(time.Hour), nil}
	calls := 0
	err := c.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/CheckAndMutateRow", nil, nil, nil,
		func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			calls++
			return answers[calls-1]
		})
	require.NoError(t, err)
	assert.Equal(t, 2, calls)
	assert.Equal(t, time.Hour, clk.sleptFor(), "the call's own retry waits the delay the server asked for")

	// Within a deadline shorter than the delay: the answer at once.
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Minute))
	defer cancel()
	calls = 0
	err = c.UnaryClientInterceptor()(ctx, "/m", nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		calls++
		return throttled(time.Hour)
	})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.Equal(t, 1, calls)
	assert.Equal(t, time.Hour, clk.sleptFor(), "no wait past the deadline")
}
