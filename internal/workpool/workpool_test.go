package workpool

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errClosed = errors.New("closed")

type ctxKey struct{}

// A pool of 1 worker and a queue of 1: the second job waits, the third is
// dropped, a job whose key is queued or running is a duplicate; the job
// runs with the caller's values, not its cancellation; Close drops the
// queued job (telling Dropped), cancels the running one with Cause and
// waits for it; a later Submit is dropped.
func TestPoolBoundsDedupeAndClose(t *testing.T) {
	started, release := make(chan context.Context, 4), make(chan struct{})
	var ran, dropped atomic.Int32
	p := New(Config[int, int]{
		Workers: 1, Queue: 1, Timeout: time.Minute, Cause: errClosed,
		Key: func(j int) int { return j },
		Run: func(ctx context.Context, j int) {
			ran.Add(1)
			started <- ctx
			select {
			case <-release:
			case <-ctx.Done():
			}
		},
		Dropped: func(int) { dropped.Add(1) },
	})
	caller, cancelCaller := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	require.Equal(t, Queued, p.Submit(caller, 1))
	running := <-started
	cancelCaller()
	assert.NoError(t, running.Err(), "the caller's cancellation does not reach the job")
	assert.Equal(t, "v", running.Value(ctxKey{}), "the caller's values do")

	assert.Equal(t, Duplicate, p.Submit(context.Background(), 1), "running")
	assert.Equal(t, Queued, p.Submit(context.Background(), 2))
	assert.Equal(t, Duplicate, p.Submit(context.Background(), 2), "queued")
	assert.Equal(t, Dropped, p.Submit(context.Background(), 3), "worker busy, queue full")

	p.Close()
	assert.ErrorIs(t, context.Cause(running), errClosed)
	assert.Equal(t, int32(1), ran.Load(), "the queued job never ran")
	assert.Equal(t, int32(1), dropped.Load())
	assert.Equal(t, Dropped, p.Submit(context.Background(), 4))
}

// Flush returns once nothing is queued or running, jobs submitted
// meanwhile included, or when its context ends.
func TestPoolFlush(t *testing.T) {
	release := make(chan struct{})
	p := New(Config[struct{}, int]{Workers: 2, Queue: 4, Run: func(ctx context.Context, j int) { <-release }})
	defer p.Close()
	require.NoError(t, p.Flush(context.Background()), "an idle pool")
	for i := 0; i < 3; i++ {
		require.Equal(t, Queued, p.Submit(context.Background(), i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, p.Flush(ctx), context.Canceled)
	done := make(chan error)
	go func() { done <- p.Flush(context.Background()) }()
	close(release)
	require.NoError(t, <-done)
}

// With no queue a job runs at once or is dropped: the shadow reads' pool.
func TestPoolWithoutQueue(t *testing.T) {
	release := make(chan struct{})
	p := New(Config[struct{}, int]{Workers: 1, Run: func(ctx context.Context, j int) { <-release }})
	assert.Equal(t, Queued, p.Submit(context.Background(), 1))
	assert.Equal(t, Dropped, p.Submit(context.Background(), 2))
	close(release)
	require.NoError(t, p.Flush(context.Background()))
	assert.Equal(t, Queued, p.Submit(context.Background(), 3))
	p.Close()
}
