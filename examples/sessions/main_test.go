package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sessions program's story, line by line: the used session never
// expires and costs a bounded number of writes, the idle one expires 30
// minutes after its last refresh, "remember me" is not shortened by reads,
// and a logout ends a session at once.
func TestSessionsLifecycle(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	text := out.String()
	for _, line := range []string{
		`carol ticks "remember me": Expire(30 days) applied=true`,
		"at t0+15m dave logs out: Expire(1ms) applied=true",
		"at t0+16m dave's session has expired (last used at t0+14m)",
		"at t0+50m bob's session has expired (last used at t0+20m)",
		"at t0+2h       alice: 30m left        bob: expired         carol: 718h left       dave: expired",
		"alice: 120 reads, 30 refresh writes",
		"carol: 120 reads, 0 refresh writes",
		"debounce 3m (a tenth of the 30m idle TTL): alice's 120 minutes of use cost 30 refresh writes, at most 41",
	} {
		assert.Contains(t, text, line+"\n")
	}
	assert.NotContains(t, text, "alice's session has expired")
	assert.NotContains(t, text, "carol's session has expired")
}
