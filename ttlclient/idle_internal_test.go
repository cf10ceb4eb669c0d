package ttlclient

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/internal/lifecycle"
)

// The refreshes' results come from internal/lifecycle as its IdleResult
// and reach the recorder converted: each value must name the same result.
func TestIdleResultMatchesLifecycle(t *testing.T) {
	pairs := map[IdleResult]lifecycle.IdleResult{
		IdleRefreshed: lifecycle.IdleRefreshed,
		IdleSkipped:   lifecycle.IdleSkipped,
		IdleDropped:   lifecycle.IdleDropped,
		IdleFailed:    lifecycle.IdleFailed,
		IdleConflict:  lifecycle.IdleConflict,
	}
	for want, got := range pairs {
		require.Equal(t, want, IdleResult(got), want.String())
	}
}
