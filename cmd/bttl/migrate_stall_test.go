package main

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc"
)

// A move whose predicate does not match is followed by a read of the
// cell (gone, or changed?): that read was bounded by nothing but
// -timeout, so an endpoint that stopped answering then hung the command
// (the scan had delivered every row, so its stall watch saw nothing).
// -stall bounds it as it bounds the write.
func TestMigrateReadAfterAMissedMoveFailsWithinStall(t *testing.T) {
	var missed atomic.Bool
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/CheckAndMutateRow") {
			missed.Store(true)
			return &btpb.CheckAndMutateRowResponse{PredicateMatched: false}, nil // as if the cell changed
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if strings.HasSuffix(info.FullMethod, "/ReadRows") && missed.Load() {
			<-ss.Context().Done() // never answers
			return ss.Context().Err()
		}
		return handler(srv, ss)
	}
	migrateAgainstStalledServer(t, "ReadRow", grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
}

// A server that stops answering migrate's writes hung it (-stall watched reads
// only). -stall bounds each write too: the command fails, exit 2, naming the
// endpoint (suspected in issue 35 item 7, and real).
func TestMigrateWriteThatGetsNoAnswerFailsWithinStall(t *testing.T) {
	block := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/CheckAndMutateRow") {
			<-ctx.Done() // never answers
			return nil, ctx.Err()
		}
		return handler(ctx, req)
	}
	migrateAgainstStalledServer(t, "CheckAndMutateRow", grpc.ChainUnaryInterceptor(block))
}

// migrateAgainstStalledServer runs a migration of a legacy family against a
// server with opts (interceptors that stop answering one call) and asserts
// that the command fails within -stall (1s) with exit 2, naming the endpoint
// and the stalled call.
func migrateAgainstStalledServer(t *testing.T, stalled string, opts ...grpc.ServerOption) {
	t.Helper()
	ac, dc, addr := newServerWith(t, opts...)
	ctx := context.Background()
	createLegacy(t, ac)
	now := time.Now().Add(-time.Second)
	loadRealTimestamps(t, dc, "legacy", "f", 3, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)

	// Bounded by the test: without -stall on the call the command returns
	// only then, or never.
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	start := time.Now()
	code := run(rctx, append([]string{"-project", "p", "-instance", "i", "-schema", schema, "migrate", "-table", "legacy", "-family", "f",
		"-from", "real", "-ttl", "30d", "-stall", "1s"}, switchedAt(now)...), strings.NewReader(""), &out, &errb)
	elapsed := time.Since(start)
	assert.Equal(t, exitError, code, errb.String())
	assert.Contains(t, errb.String(), addr, "names the endpoint")
	assert.Contains(t, errb.String(), stalled)
	assert.Less(t, elapsed, 10*time.Second)
}
