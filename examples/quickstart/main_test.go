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
	assert.Contains(t, text, "server-timestamp write to a one-second family: bttl: server timestamp")
	final := text[strings.Index(text, "at t0+73h0m0s"):]
	lines := strings.Split(final, "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	assert.Contains(t, lines[1], `read through bttl (3 cells): doc:body="revision 2" doc:body="revision 3" meta:owner="ada"`)
	assert.Contains(t, lines[2], `clicks:checkout="3 clicks"`, "expired cells are still physically stored")
	assert.Contains(t, lines[2], `session:token="abc"`)
}
