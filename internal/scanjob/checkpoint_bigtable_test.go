package scanjob_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	scan "github.com/bttl/bttl/internal/scanjob"
)

// newHarness starts bttest with the given server options and table "t"
// (family "f").
func newHarness(t *testing.T, opts ...grpc.ServerOption) *bttestharness.Harness {
	t.Helper()
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{ServerOptions: opts})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTable(ctx, "t"))
	require.NoError(t, h.Admin.CreateColumnFamily(ctx, "t", "f"))
	return h
}

func finishedRanges(s *scan.Summary) []scan.Range {
	var out []scan.Range
	for _, r := range s.Ranges {
		if r.Done {
			out = append(out, r.Range)
		}
	}
	return out
}

// A checkpoint kept in a Bigtable table (created by the scan) resumes a
// cancelled scan as a file does: the restart, a new process with no local
// state, skips the ranges the first run finished.
func TestBigtableCheckpointResumesWithoutLocalState(t *testing.T) {
	h := newHarness(t)
	tbl := h.Raw.Open("t")
	keys := load(t, tbl, 6000, 1, func(i int) string { return fmt.Sprintf("row%06d", i) })
	job := map[string]string{"job": "test"}
	opts := func() []scan.Option {
		return []scan.Option{scan.WithWorkers(2), scan.WithRanges(20),
			scan.WithCheckpoint("bigtable://checkpoints", job), scan.WithBigtableCheckpoints(h.Raw, h.Admin)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := newCounter()
	var n atomic.Int64
	sum1, err := scan.Run(ctx, tbl, "t", func(ctx context.Context, r bigtable.Row) error {
		if n.Add(1) == 3000 {
			cancel()
		}
		return first.row(ctx, r)
	}, opts()...)
	require.ErrorIs(t, err, context.Canceled)
	finished := finishedRanges(sum1)
	require.NotEmpty(t, finished)
	require.Less(t, len(finished), len(sum1.Ranges))

	tables, err := h.Admin.Tables(context.Background())
	require.NoError(t, err)
	assert.Contains(t, tables, "checkpoints", "the scan created the checkpoint table")

	second := newCounter()
	sum2, err := scan.Run(context.Background(), tbl, "t", second.row, opts()...)
	require.NoError(t, err)
	require.True(t, sum2.Complete())
	require.Equal(t, len(sum1.Ranges), len(sum2.Ranges), "the ranges are the first run's")
	for i := range sum1.Ranges {
		assert.Equal(t, sum1.Ranges[i].Done, sum2.Ranges[i].Resumed, "range %d resumed iff finished before", i)
	}
	for _, k := range keys {
		require.GreaterOrEqual(t, first.seen[k]+second.seen[k], 1, "row %q delivered", k)
	}
	for k := range second.seen {
		for _, f := range finished {
			require.False(t, f.Contains(k), "row %q of finished range %s read again", k, f)
		}
	}

	// One row per job and shard: another job starts its own.
	other := newCounter()
	sum3, err := scan.Run(context.Background(), tbl, "t", other.row, scan.WithCheckpoint("bigtable://checkpoints", "other job"), scan.WithBigtableCheckpoints(h.Raw, h.Admin))
	require.NoError(t, err)
	assert.Len(t, other.seen, len(keys), "another job's row is its own: it reads everything")
	assert.True(t, sum3.Complete())
	var rows int
	require.NoError(t, h.Raw.Open("checkpoints").ReadRows(context.Background(), bigtable.InfiniteRange(""), func(bigtable.Row) bool { rows++; return true }))
	assert.Equal(t, 2, rows, "one row per job and shard")
}

// Two runs on one shard: the one that started later claims the row, and
// the earlier one's next write is refused (ErrCheckpointClaimed) rather
// than overwriting the later one's record.
func TestBigtableCheckpointRefusesTheEarlierOfTwoClaims(t *testing.T) {
	h := newHarness(t)
	tbl := h.Raw.Open("t")
	load(t, tbl, 3000, 1, func(i int) string { return fmt.Sprintf("row%06d", i) })
	opts := []scan.Option{scan.WithRanges(20), scan.WithCheckpoint("bigtable://ck", "job"), scan.WithBigtableCheckpoints(h.Raw, h.Admin)}
	started := make(chan struct{})
	release := make(chan struct{})
	var once atomic.Bool
	errc := make(chan error, 1)
	go func() {
		_, err := scan.Run(context.Background(), tbl, "t", func(ctx context.Context, r bigtable.Row) error {
			if once.CompareAndSwap(false, true) {
				close(started)
				<-release // the second run claims the shard meanwhile
			}
			return nil
		}, opts...)
		errc <- err
	}()
	<-started
	sum, err := scan.Run(context.Background(), tbl, "t", func(context.Context, bigtable.Row) error { return nil }, opts...)
	require.NoError(t, err, "the later run claims the shard and finishes it")
	require.True(t, sum.Complete())
	close(release)
	err = <-errc
	require.ErrorIs(t, err, scan.ErrCheckpointClaimed, "the earlier run may not write any more")
	var cerr *scan.CheckpointError
	require.ErrorAs(t, err, &cerr)
	assert.Contains(t, cerr.Path, "bigtable://ck/t#")

	// The record is the later run's: a third run finds every range done.
	third := newCounter()
	sum3, err := scan.Run(context.Background(), tbl, "t", third.row, opts...)
	require.NoError(t, err)
	assert.Empty(t, third.seen, "nothing read again: the record did not go back")
	assert.True(t, sum3.Complete())
}

func TestBigtableCheckpointOptionErrors(t *testing.T) {
	h := newHarness(t)
	tbl := h.Raw.Open("t")
	f := func(context.Context, bigtable.Row) error { return nil }
	_, err := scan.Run(context.Background(), tbl, "t", f, scan.WithCheckpoint("bigtable://ck", "job"))
	require.ErrorIs(t, err, scan.ErrOption, "no clients for the checkpoint table")
	_, err = scan.Run(context.Background(), tbl, "t", f, scan.WithCheckpoint("bigtable://bad/name", "job"), scan.WithBigtableCheckpoints(h.Raw, h.Admin))
	require.ErrorIs(t, err, scan.ErrOption)
	require.NoError(t, h.Admin.CreateTable(context.Background(), "notck"))
	require.NoError(t, h.Admin.CreateColumnFamily(context.Background(), "notck", "other"))
	_, err = scan.Run(context.Background(), tbl, "t", f, scan.WithCheckpoint("bigtable://notck", "job"), scan.WithBigtableCheckpoints(h.Raw, h.Admin))
	require.ErrorIs(t, err, scan.ErrCheckpoint, "a table that is not a checkpoint table is refused")
}

// NewBigtableStore keeps any record as checkpoints are kept (bttl audit
// -report keeps reports so): the table is created when missing, of two
// stores of one row the later claim's Save wins and the earlier one's is
// refused, and ReadBigtableRecords reads a prefix's rows back, a row
// claimed but not written as nil. On both servers.
func TestBigtableStoreKeepsRecords(t *testing.T) {
	for _, srv := range []string{"bttest", "cbtemulator"} {
		t.Run(srv, func(t *testing.T) {
			var h *bttestharness.Harness
			if srv == "bttest" {
				h = newHarness(t)
			} else {
				h, _ = bttestharness.NewOnEmulator(t, bttestharness.Config{})
			}
			ctx := context.Background()
			open := func(key string) scan.CheckpointStore {
				st, err := scan.NewBigtableStore(ctx, h.Raw, h.Admin, "records", key)
				require.NoError(t, err)
				rec, err := st.Open(ctx)
				require.NoError(t, err)
				assert.Nil(t, rec, "a new row holds no record")
				return st
			}
			a := open("job/0/2")
			b, err := scan.NewBigtableStore(ctx, h.Raw, h.Admin, "records", "job/0/2")
			require.NoError(t, err)
			_, err = b.Open(ctx)
			require.NoError(t, err)
			require.ErrorIs(t, a.Save(ctx, []byte("a")), scan.ErrCheckpointClaimed, "the earlier claim may not write")
			require.NoError(t, b.Save(ctx, []byte("b")))
			open("job/1/2") // claimed, never written
			other := open("jobx/0/1")
			require.NoError(t, other.Save(ctx, []byte("x")))

			recs, err := scan.ReadBigtableRecords(ctx, h.Raw, "records", "job/")
			require.NoError(t, err)
			assert.Equal(t, map[string][]byte{"job/0/2": []byte("b"), "job/1/2": nil}, recs)
			assert.Equal(t, "bigtable://records/job/0/2", b.Name())

			_, err = scan.NewBigtableStore(ctx, h.Raw, h.Admin, "bad/name", "k")
			require.ErrorIs(t, err, scan.ErrOption)
			_, err = scan.ReadBigtableRecords(ctx, h.Raw, "bad/name", "k")
			require.ErrorIs(t, err, scan.ErrOption)
		})
	}
}

// stallReads makes ReadRows streams go silent after sending after
// messages, until their call ends, for the calls stall says.
func stallReads(after int, stall func(call int) bool) grpc.ServerOption {
	var calls atomic.Int64
	return grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if info.FullMethod != "/google.bigtable.v2.Bigtable/ReadRows" || !stall(int(calls.Add(1))) {
			return handler(srv, ss)
		}
		return handler(srv, &silentStream{ServerStream: ss, after: after})
	})
}

type silentStream struct {
	grpc.ServerStream
	after, sent int
}

func (s *silentStream) SendMsg(m any) error {
	if s.sent >= s.after {
		<-s.Context().Done()
		return s.Context().Err()
	}
	s.sent++
	return s.ServerStream.SendMsg(m)
}

// A read that goes silent is retried once from after its last row: every
// row is delivered exactly once.
func TestStalledReadIsRetriedFromItsLastRow(t *testing.T) {
	h := newHarness(t, stallReads(3, func(call int) bool { return call == 1 }))
	tbl := h.Raw.Open("t")
	keys := load(t, tbl, 2000, 1, func(i int) string { return fmt.Sprintf("row%06d", i) })
	c := newCounter()
	start := time.Now()
	// 1s: far above a healthy gap between rows, also under -race on a
	// loaded machine.
	sum, err := scan.Run(context.Background(), tbl, "t", c.row, scan.WithRanges(1), scan.WithStall(time.Second))
	require.NoError(t, err)
	assert.True(t, sum.Complete())
	require.Len(t, c.seen, len(keys))
	for _, k := range keys {
		require.Equal(t, 1, c.seen[k], "row %q once", k)
	}
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "the first read stalled")
}

// A read silent on its retry too fails the scan with a StallError within
// about two stall intervals.
func TestStalledTwiceFailsWithStallError(t *testing.T) {
	h := newHarness(t, stallReads(2, func(int) bool { return true }))
	tbl := h.Raw.Open("t")
	load(t, tbl, 500, 1, func(i int) string { return fmt.Sprintf("row%06d", i) })
	const stall = 200 * time.Millisecond
	start := time.Now()
	_, err := scan.Run(context.Background(), tbl, "t", func(context.Context, bigtable.Row) error { return nil }, scan.WithRanges(1), scan.WithStall(stall))
	elapsed := time.Since(start)
	require.ErrorIs(t, err, scan.ErrStalled)
	var se *scan.StallError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, stall, se.Interval)
	assert.GreaterOrEqual(t, elapsed, 2*stall)
	assert.Less(t, elapsed, 2*stall+5*time.Second)
}

// A callback slower than the stall interval is not a stall: only time
// waiting for the server counts.
func TestSlowCallbackIsNotAStall(t *testing.T) {
	h := newHarness(t)
	tbl := h.Raw.Open("t")
	load(t, tbl, 3, 1, func(i int) string { return fmt.Sprintf("row%06d", i) })
	c := newCounter()
	_, err := scan.Run(context.Background(), tbl, "t", func(ctx context.Context, r bigtable.Row) error {
		time.Sleep(700 * time.Millisecond) // the callback's own work, e.g. migrate's writes
		return c.row(ctx, r)
	}, scan.WithStall(500*time.Millisecond))
	require.NoError(t, err)
	assert.Len(t, c.seen, 3)
}
