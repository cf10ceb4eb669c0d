package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuickstartShowsFilteredAndStoredViews(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	text := out.String()
	lines := strings.Split(text, "\n")
	require.GreaterOrEqual(t, len(lines), 2)
	assert.Equal(t, "wrote row user#1: a session token (TTL 30m), three click counters (TTL 1h, the family's 48h, 72h), three doc revisions (2 kept), an unmanaged owner", lines[0])
	// The refused write is shown as the guardrail working, with the
	// refusal registry's message naming the rule and the cell.
	refusal := lines[1]
	assert.True(t, strings.HasPrefix(refusal, "guardrail, as expected: a server-timestamp write to the one-second family is refused before it is sent (bttl: server timestamp on a managed family: "), refusal)
	assert.Contains(t, refusal, "a one-second family without a default TTL needs a TTL per cell")
	assert.Contains(t, refusal, `(table "quickstart", row "user#1", family "session", column "token", timestamp bigtable.ServerTime))`)
	assert.Equal(t, 1, strings.Count(refusal, "bttl:"), "the refusal shows the prefix once")
	final := text[strings.Index(text, "at t0+73h0m0s"):]
	lines = strings.Split(final, "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	assert.Contains(t, lines[1], `read through bttl (3 cells): doc:body="revision 2" doc:body="revision 3" meta:owner="ada"`)
	assert.Contains(t, lines[2], `clicks:checkout="3 clicks"`, "expired cells are still physically stored")
	assert.Contains(t, lines[2], `session:token="abc"`)
}
