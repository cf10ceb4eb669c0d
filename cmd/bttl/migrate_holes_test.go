package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	bttestharness "github.com/bttl/bttl/bttest_harness"
)

// Issue 35 item 6: migrate's flags were checked against the schema after
// the clients were made, so a missing -first-switch was reported as
// missing credentials. They are checked before any client exists.
func TestMigrateFlagsCheckedBeforeDialling(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json"))
	schema := writeFile(t, "s.yaml", "tables: {t: {f: {strategy: one-second}}}\n")
	r := runRaw(context.Background(), "-project", "p", "-instance", "i", "-schema", schema,
		"migrate", "-table", "t", "-family", "f", "-from", "real", "-ttl", "1d")
	assert.Equal(t, exitError, r.code, r.stderr)
	assert.Contains(t, r.stderr, "-first-switch")
	assert.NotContains(t, r.stderr, "credentials")
	assert.NotContains(t, r.stderr, "client")
}

// Suspected in issue 35 item 7, and real: a server that stops answering
// migrate's writes hung it (-stall watched reads only). -stall bounds each
// write too: the command fails, exit 2, naming the endpoint.
func TestMigrateWriteThatGetsNoAnswerFailsWithinStall(t *testing.T) {
	block := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/CheckAndMutateRow") {
			<-ctx.Done() // never answers
			return nil, ctx.Err()
		}
		return handler(ctx, req)
	}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{ServerOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(block)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	t.Setenv("BIGTABLE_EMULATOR_HOST", h.Addr)
	ctx := context.Background()
	ac, err := bigtable.NewAdminClient(ctx, "p", "i")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ac.Close() })
	dc, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dc.Close() })
	createLegacy(t, ac)
	now := time.Now().Add(-time.Second)
	loadRealTimestamps(t, dc, "legacy", "f", 3, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)

	// Bounded by the test: without the fix the command never returns.
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	start := time.Now()
	code := run(rctx, append([]string{"-project", "p", "-instance", "i", "-schema", schema, "migrate", "-table", "legacy", "-family", "f",
		"-from", "real", "-ttl", "30d", "-stall", "1s"}, switchedAt(now)...), strings.NewReader(""), &out, &errb)
	elapsed := time.Since(start)
	assert.Equal(t, exitError, code, errb.String())
	assert.Contains(t, errb.String(), h.Addr, "names the endpoint")
	assert.Contains(t, errb.String(), "CheckAndMutateRow")
	assert.Less(t, elapsed, 10*time.Second)
}
