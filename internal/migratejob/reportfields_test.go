package migratejob_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
)

// Report embeds Stats, whose DeletedBefore (deletions carried over in the
// ranges this run read again) a Report field of the same name (every
// deletion the checkpoint records) shadowed: rep.DeletedBefore was not the
// run's count as every other promoted count is, and a Report encoded as
// JSON lost the run's count. A restarted deletion run whose finished
// ranges deleted cells tells the two apart.
//
// The ranges are cut at fixed points (every 100th row): bttest answers
// SampleRowKeys with points it picks at random, and a cut that fell on
// the first expired row, or no cut between row 5 and it, left no finished
// range holding both moves and deletions (it failed once so).
func TestReportKeepsTheRunsDeletedBefore(t *testing.T) {
	var points []string
	for r := 100; r < 1500; r += 100 {
		points = append(points, fmt.Sprintf("row%07d", r))
	}
	h := fixedSampleHarness(t, points)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	raw := h.Raw.Open("t")
	now := h.Clock.Now()
	load(t, raw, "f", 1500, 1, now, 10*day) // written over the last 1500 s, the oldest in the last rows
	const ttl = 750 * time.Second           // half expired
	// A cell stamped before 2000 is never moved: its range stays unfinished.
	m := bigtable.NewMutation()
	m.Set("f", "c00", bigtable.Timestamp(1000), []byte("seq"))
	require.NoError(t, raw.Apply(ctx, "row0000005", m))
	h.Clock.Set(now.Add(time.Second))
	plan := inPlace(now, ttl)
	dry, err := migrate.New(raw, "t", plan, migrate.WithClock(h.Clock), migrate.WithDryRun())
	require.NoError(t, err)
	drep, err := dry.Run(ctx)
	require.NoError(t, err)
	del := plan
	del.Expired, del.ExpiredAsOf, del.ExpectExpired = migrate.DeleteExpired, drep.Now, drep.ExpiredLeft
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	run := func() *migrate.Report {
		mg, err := migrate.New(raw, "t", del, migrate.WithClock(h.Clock), migrate.WithCheckpoint(ckpt))
		require.NoError(t, err)
		rep, err := mg.Run(ctx, scan.WithRanges(8))
		require.NoError(t, err)
		return rep
	}
	first := run()
	require.Equal(t, del.ExpectExpired, first.ExpiredDeleted)
	cuts := map[string]bool{"": true}
	for _, k := range points {
		cuts[k] = true
	}
	require.Greater(t, len(first.Scan.Ranges), 1)
	for _, r := range first.Scan.Ranges {
		require.True(t, cuts[r.Range.Start] && cuts[r.Range.End], "range %s is cut at the fixed points", r.Range)
	}
	second := run()
	require.Positive(t, second.Earlier.ExpiredDeleted, "a finished range's deletions, not read again")
	require.Positive(t, second.Stats.DeletedBefore, "the unfinished range's, carried over")
	require.Less(t, second.Stats.DeletedBefore, del.ExpectExpired)

	b, err := json.Marshal(second)
	require.NoError(t, err)
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &top))
	var got int64
	require.NoError(t, json.Unmarshal(top["DeletedBefore"], &got))
	assert.Equal(t, second.Stats.DeletedBefore, got, "the run's count, as every other count of the run")
	assert.Equal(t, second.Stats.DeletedBefore, second.DeletedBefore, "promoted as every other count")
	assert.Equal(t, first.ExpiredDeleted, second.RecordedDeletions, "the checkpoint's record of every range")
}

// fixedSampleHarness is an in-process bttest server whose SampleRowKeys
// answers points (then the table's end) instead of bttest's random ones,
// so that a scan's ranges are the same every run.
func fixedSampleHarness(t *testing.T, points []string) *bttestharness.Harness {
	t.Helper()
	sample := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !strings.HasSuffix(info.FullMethod, "/SampleRowKeys") {
			return handler(srv, ss)
		}
		if err := ss.RecvMsg(new(btpb.SampleRowKeysRequest)); err != nil {
			return err
		}
		for i, k := range append(append([]string(nil), points...), "") {
			if err := ss.SendMsg(&btpb.SampleRowKeysResponse{RowKey: []byte(k), OffsetBytes: int64(i+1) << 20}); err != nil {
				return err
			}
		}
		return nil
	}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{ServerOptions: []grpc.ServerOption{grpc.ChainStreamInterceptor(sample)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h
}
