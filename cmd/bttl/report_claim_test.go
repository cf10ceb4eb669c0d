package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A rerun of a shard's audit that stops right after claiming the report's
// row (here: its next write to the row fails) leaves the earlier report
// hidden: the claim and the hiding are one write. They were two (Open,
// then Save of an empty record), and a run stopped between them left the
// earlier report readable under the new claim, which merge took for the
// shard's (fails before: merge exits 0).
func TestAuditReportClaimHidesEarlierReportAtOnce(t *testing.T) {
	var armed atomic.Bool
	var writes atomic.Int32
	failSecond := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if r, ok := req.(*btpb.CheckAndMutateRowRequest); ok && armed.Load() &&
			strings.HasSuffix(r.GetTableName(), "/bttl_reports") && strings.HasSuffix(string(r.GetRowKey()), "/1/2") {
			if writes.Add(1) > 1 {
				return nil, status.Error(codes.PermissionDenied, "test: the run's second write to its report row fails")
			}
		}
		return handler(ctx, req)
	}
	ac, dc, addr := newServerWith(t, grpc.UnaryInterceptor(failSecond))

	loadHashedClicks(t, ac, dc, 10)
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	audit := func() result {
		return bttl(t, addr, "", "-schema", schema, "audit", "-now", "2026-01-02T15:04:05Z", "-shard", "1/2", "-report", "bigtable://bttl_reports/job")
	}
	r := bttl(t, addr, "", "-schema", schema, "audit", "-now", "2026-01-02T15:04:05Z", "-shard", "0/2", "-report", "bigtable://bttl_reports/job")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = audit()
	require.Equal(t, exitOK, r.code, r.stderr)
	r = bttl(t, addr, "", "audit", "merge", "bigtable://bttl_reports/job")
	require.Equal(t, exitOK, r.code, r.stderr)

	armed.Store(true)
	r = audit()
	require.NotEqual(t, exitOK, r.code, "the rerun's second write to its row fails: %s", r.stdout)
	assert.Equal(t, int32(2), writes.Load(), "the claim, then one refused write")
	armed.Store(false)

	r = bttl(t, addr, "", "audit", "merge", "bigtable://bttl_reports/job")
	assert.Equal(t, exitFindings, r.code, "merged with the earlier report of shard 1/2 under the rerun's claim: %s", r.stdout)
	assert.Contains(t, r.stderr, "bigtable://bttl_reports/job, shard 1/2: no report yet")
}
