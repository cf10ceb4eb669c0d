package changestreams_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const table = "projects/project/instances/instance/tables/t"

func setup(t *testing.T, cfg changestreams.Config) (*changestreams.Server, *clock, btpb.BigtableClient, *bigtable.Table) {
	t.Helper()
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	cfg.Clock = clk
	srv, err := changestreams.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	admin, err := bigtable.NewAdminClient(ctx, "project", "instance", option.WithGRPCConn(conn))
	require.NoError(t, err)
	require.NoError(t, admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", Families: map[string]bigtable.GCPolicy{"f": bigtable.MaxVersionsPolicy(1)}}))
	client, err := bigtable.NewClient(ctx, "project", "instance", option.WithGRPCConn(conn))
	require.NoError(t, err)
	return srv, clk, btpb.NewBigtableClient(conn), client.Open("t")
}

func part(start, end string) *btpb.StreamPartition {
	rr := &btpb.RowRange{StartKey: &btpb.RowRange_StartKeyClosed{StartKeyClosed: []byte(start)}}
	if end != "" {
		rr.EndKey = &btpb.RowRange_EndKeyOpen{EndKeyOpen: []byte(end)}
	}
	return &btpb.StreamPartition{RowRange: rr}
}

// readAll reads a stream until it ends (end time), returning its records.
func readAll(t *testing.T, c btpb.BigtableClient, req *btpb.ReadChangeStreamRequest) ([]*btpb.ReadChangeStreamResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.ReadChangeStream(ctx, req)
	require.NoError(t, err)
	var out []*btpb.ReadChangeStreamResponse
	for {
		r, err := s.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func set(t *testing.T, tbl *bigtable.Table, clk *clock, row string) {
	m := bigtable.NewMutation()
	m.Set("f", "c", bigtable.ServerTime, []byte(row))
	require.NoError(t, tbl.Apply(context.Background(), row, m))
	clk.Advance(time.Millisecond)
}

// Tokens replay: from a change's token a stream delivers exactly the
// changes after it, every time; server timestamps are resolved to the
// commit time; the stream ends with an OK CloseStream past end_time.
func TestReplayFromTokens(t *testing.T) {
	_, clk, c, tbl := setup(t, changestreams.Config{})
	start := clk.Now()
	for _, r := range []string{"a", "b", "c"} {
		set(t, tbl, clk, r)
	}
	end := clk.Now()
	clk.Advance(time.Second)
	req := &btpb.ReadChangeStreamRequest{TableName: table, Partition: part("", ""),
		StartFrom: &btpb.ReadChangeStreamRequest_StartTime{StartTime: timestamppb.New(start)},
		EndTime:   timestamppb.New(end), HeartbeatDuration: durationpb.New(time.Minute)}
	recs, err := readAll(t, c, req)
	require.NoError(t, err)
	var changes []*btpb.ReadChangeStreamResponse_DataChange
	for _, r := range recs {
		if dc := r.GetDataChange(); dc != nil {
			changes = append(changes, dc)
		}
	}
	require.Len(t, changes, 3)
	assert.Equal(t, "b", string(changes[1].RowKey))
	assert.Equal(t, start.Add(time.Millisecond), changes[1].CommitTimestamp.AsTime())
	assert.Equal(t, start.Add(time.Millisecond).UnixMicro(), changes[1].Chunks[0].Mutation.GetSetCell().TimestampMicros, "server time resolved")
	last := recs[len(recs)-1].GetCloseStream()
	require.NotNil(t, last)
	assert.Equal(t, int32(codes.OK), last.GetStatus().GetCode())
	assert.Empty(t, last.NewPartitions)

	for i := 0; i < 2; i++ {
		req.StartFrom = &btpb.ReadChangeStreamRequest_ContinuationTokens{ContinuationTokens: &btpb.StreamContinuationTokens{
			Tokens: []*btpb.StreamContinuationToken{{Partition: part("", ""), Token: changes[0].Token}}}}
		recs, err = readAll(t, c, req)
		require.NoError(t, err)
		var keys []string
		for _, r := range recs {
			if dc := r.GetDataChange(); dc != nil {
				keys = append(keys, string(dc.RowKey))
			}
		}
		assert.Equal(t, []string{"b", "c"}, keys)
	}
}

// A split ends the parent's stream with CloseStream: tokens for each
// child's part of the parent and the new partitions; a token for another
// partition, or tokens not covering the request, are INVALID_ARGUMENT.
func TestSplitCloseStreamAndTokenChecks(t *testing.T) {
	srv, clk, c, tbl := setup(t, changestreams.Config{})
	start := clk.Now()
	set(t, tbl, clk, "a")
	require.NoError(t, srv.Split("t", "m"))
	set(t, tbl, clk, "z")
	recs, err := readAll(t, c, &btpb.ReadChangeStreamRequest{TableName: table, Partition: part("", ""),
		StartFrom: &btpb.ReadChangeStreamRequest_StartTime{StartTime: timestamppb.New(start)}})
	require.NoError(t, err)
	cs := recs[len(recs)-1].GetCloseStream()
	require.NotNil(t, cs)
	require.Len(t, cs.NewPartitions, 2)
	require.Len(t, cs.ContinuationTokens, 2)
	var keys []string
	for _, r := range recs {
		if dc := r.GetDataChange(); dc != nil {
			keys = append(keys, string(dc.RowKey))
		}
	}
	assert.Equal(t, []string{"a"}, keys, "the parent stops at the split")

	// The right child from its token: z.
	right := cs.ContinuationTokens[1]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.ReadChangeStream(ctx, &btpb.ReadChangeStreamRequest{TableName: table, Partition: part("m", ""),
		StartFrom: &btpb.ReadChangeStreamRequest_ContinuationTokens{ContinuationTokens: &btpb.StreamContinuationTokens{Tokens: []*btpb.StreamContinuationToken{right}}}})
	require.NoError(t, err)
	r, err := s.Recv()
	require.NoError(t, err)
	assert.Equal(t, "z", string(r.GetDataChange().GetRowKey()))

	// The left child's token used for the right child: refused.
	_, err = readAll(t, c, &btpb.ReadChangeStreamRequest{TableName: table, Partition: part("m", ""),
		StartFrom: &btpb.ReadChangeStreamRequest_ContinuationTokens{ContinuationTokens: &btpb.StreamContinuationTokens{Tokens: []*btpb.StreamContinuationToken{cs.ContinuationTokens[0]}}}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
}

// DropStreams ends open streams with UNAVAILABLE.
func TestDropStreams(t *testing.T) {
	srv, clk, c, _ := setup(t, changestreams.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.ReadChangeStream(ctx, &btpb.ReadChangeStreamRequest{TableName: table, Partition: part("", ""),
		StartFrom: &btpb.ReadChangeStreamRequest_StartTime{StartTime: timestamppb.New(clk.Now())}, HeartbeatDuration: durationpb.New(time.Minute)})
	require.NoError(t, err)
	r, err := s.Recv()
	require.NoError(t, err)
	require.NotNil(t, r.GetHeartbeat(), "a caught-up stream sends a heartbeat")
	srv.DropStreams()
	_, err = s.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err))
}

// RunGC deletes per the family's rule (max versions 1 here) on the backend
// and records a GARBAGE_COLLECTION change without a source cluster.
func TestRunGC(t *testing.T) {
	srv, clk, c, tbl := setup(t, changestreams.Config{})
	start := clk.Now()
	for _, ts := range []bigtable.Timestamp{1000, 2000} {
		m := bigtable.NewMutation()
		m.Set("f", "c", ts, []byte("v"))
		require.NoError(t, tbl.Apply(context.Background(), "r", m))
	}
	n, err := srv.RunGC(context.Background(), "t")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	row, err := tbl.ReadRow(context.Background(), "r")
	require.NoError(t, err)
	require.Len(t, row["f"], 1)
	assert.Equal(t, bigtable.Timestamp(2000), row["f"][0].Timestamp)
	end := clk.Now()
	clk.Advance(time.Millisecond) // the stream ends once it is past end_time
	recs, err := readAll(t, c, &btpb.ReadChangeStreamRequest{TableName: table, Partition: part("", ""),
		StartFrom: &btpb.ReadChangeStreamRequest_StartTime{StartTime: timestamppb.New(start)}, EndTime: timestamppb.New(end)})
	require.NoError(t, err)
	var gc *btpb.ReadChangeStreamResponse_DataChange
	for _, r := range recs {
		if dc := r.GetDataChange(); dc != nil && dc.Type == btpb.ReadChangeStreamResponse_DataChange_GARBAGE_COLLECTION {
			gc = dc
		}
	}
	require.NotNil(t, gc)
	assert.Empty(t, gc.SourceClusterId)
	d := gc.Chunks[0].Mutation.GetDeleteFromColumn()
	assert.Equal(t, int64(1000), d.TimeRange.StartTimestampMicros)
	assert.Equal(t, int64(2000), d.TimeRange.EndTimestampMicros)
}

// A start-time read of a partition created by a merge serves its range's
// history from that time, from before the merge too (regression: it began
// at the merge and lost what the parents had).
func TestStartTimeReadsHistoryBeforeMerge(t *testing.T) {
	srv, clk, c, tbl := setup(t, changestreams.Config{SplitKeys: []string{"m"}})
	start := clk.Now()
	set(t, tbl, clk, "a")
	set(t, tbl, clk, "z")
	require.NoError(t, srv.Merge("t", "m"))
	set(t, tbl, clk, "b")
	end := clk.Now()
	clk.Advance(time.Millisecond)
	recs, err := readAll(t, c, &btpb.ReadChangeStreamRequest{TableName: table, Partition: part("", ""),
		StartFrom: &btpb.ReadChangeStreamRequest_StartTime{StartTime: timestamppb.New(start)}, EndTime: timestamppb.New(end)})
	require.NoError(t, err)
	var keys []string
	for _, r := range recs {
		if dc := r.GetDataChange(); dc != nil {
			keys = append(keys, string(dc.RowKey))
		}
	}
	assert.Equal(t, []string{"a", "z", "b"}, keys)
}

// lastKey is the backend's last row, empty or not: bttest's SampleRowKeys
// always ends with it.
func lastKey(t *testing.T, tbl *bigtable.Table) string {
	t.Helper()
	keys, err := tbl.SampleRowKeys(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	return keys[len(keys)-1]
}

// A row a delete leaves without cells is gone from the backend, as in
// Bigtable (bttest kept it, so range reads walked every row a table ever
// held); a row sharing its key as prefix is never touched. Fails before:
// the last key stays "z".
func TestEmptiedRowIsGone(t *testing.T) {
	ctx := context.Background()
	_, _, _, tbl := setup(t, changestreams.Config{})
	set := func(row string) {
		m := bigtable.NewMutation()
		m.Set("f", "c", 1000, []byte("v"))
		require.NoError(t, tbl.Apply(ctx, row, m))
	}
	del := func(row string) {
		m := bigtable.NewMutation()
		m.DeleteCellsInColumn("f", "c")
		require.NoError(t, tbl.Apply(ctx, row, m))
	}
	for _, k := range []string{"a", "z", "zz"} {
		set(k)
	}
	del("zz")
	assert.Equal(t, "z", lastKey(t, tbl))
	del("z")
	assert.Equal(t, "a", lastKey(t, tbl))

	// "b" emptied while "bb" holds a cell: "bb" stays, readable.
	set("b")
	set("bb")
	del("b")
	r, err := tbl.ReadRow(ctx, "bb")
	require.NoError(t, err)
	assert.Len(t, r["f"], 1)
	assert.Equal(t, "bb", lastKey(t, tbl))
}

// Config.Tables: only the named tables' changes are recorded; another
// table's writes are applied, and logged nowhere.
func TestConfigTablesRecordsOnlyThose(t *testing.T) {
	ctx := context.Background()
	srv, _, _, tbl := setup(t, changestreams.Config{Tables: []string{"other"}})
	m := bigtable.NewMutation()
	m.Set("f", "c", 1000, []byte("v"))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	r, err := tbl.ReadRow(ctx, "r")
	require.NoError(t, err)
	assert.Len(t, r["f"], 1, "applied")
	assert.Equal(t, 0, srv.Records("t"), "not recorded")

	srv2, _, _, tbl2 := setup(t, changestreams.Config{Tables: []string{"t"}})
	require.NoError(t, tbl2.Apply(ctx, "r", m))
	assert.Equal(t, 1, srv2.Records("t"))
}
