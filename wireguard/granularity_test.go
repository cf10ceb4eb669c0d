package wireguard_test

import (
	"context"
	"io"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

var granularitySchema = strategy.Schema{"plain": strategy.Unmanaged(), "one": strategy.OneSecond()}

// granularityEnv is a raw data API client through the guard (with its
// read filter) and bttl's client, on a production-rules server, which
// refuses a timestamp not in whole milliseconds as production does; the
// row "r" holds plain:c at 1000 and 2000.
func granularityEnv(t *testing.T) (*prodserver.Server, btpb.BigtableClient, *ttlclient.Table, *bttestharness.Harness) {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	s := prodserver.New(t, prodserver.Config{})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: s.Addr, NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	bt := h.MustTable(t, "t", granularitySchema)
	g, err := wireguard.New(map[string]strategy.Schema{"t": granularitySchema}, wireguard.WithReadFilter())
	require.NoError(t, err)
	conn, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(g.UnaryClientInterceptor()), grpc.WithStreamInterceptor(g.StreamClientInterceptor()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	m := bigtable.NewMutation()
	m.Set("plain", "c", 1000, []byte("a"))
	m.Set("plain", "c", 2000, []byte("b"))
	require.NoError(t, h.Raw.Open("t").Apply(context.Background(), "r", m))
	return s, btpb.NewBigtableClient(conn), bt, h
}

const granularityTable = "projects/" + bttestharness.Project + "/instances/" + bttestharness.Instance + "/tables/t"

func setCell(fam string, ts int64) *btpb.Mutation {
	return &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
		FamilyName: fam, ColumnQualifier: []byte("c"), TimestampMicros: ts, Value: []byte("x")}}}
}

func deleteCells(start, end int64) *btpb.Mutation {
	return &btpb.Mutation{Mutation: &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
		FamilyName: "plain", ColumnQualifier: []byte("c"), TimeRange: &btpb.TimestampRange{StartTimestampMicros: start, EndTimestampMicros: end}}}}
}

func timestampRange(start, end int64) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_TimestampRangeFilter{TimestampRangeFilter: &btpb.TimestampRange{StartTimestampMicros: start, EndTimestampMicros: end}}}
}

// requireGranularityRefusal: the guard's refusal (FailedPrecondition,
// its rule named), not the server's InvalidArgument.
func requireGranularityRefusal(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%s: the guard's refusals are FailedPrecondition: %v", what, err)
	assert.Contains(t, err.Error(), "rule timestamp-granularity", what)
}

// Production refuses a timestamp that is not a whole millisecond; the
// guard refuses it first, before any RPC, on every call that can carry
// one, and nothing is written: MutateRow, MutateRows (refused whole,
// its good entry included), CheckAndMutateRow (either branch, and the
// predicate's ranges) and ReadRows' filter. Before the rule the server
// saw and refused each (Counts().Refused).
func TestGuardRefusesSubMillisecondTimestampsBeforeAnyRPC(t *testing.T) {
	s, raw, _, h := granularityEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: granularityTable, RowKey: []byte("w1"),
		Mutations: []*btpb.Mutation{setCell("plain", 1000), setCell("plain", 1500)}})
	requireGranularityRefusal(t, err, "MutateRow SetCell")
	_, err = raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: granularityTable, RowKey: []byte("r"),
		Mutations: []*btpb.Mutation{deleteCells(1500, 2500)}})
	requireGranularityRefusal(t, err, "MutateRow delete range")

	stream, err := raw.MutateRows(ctx, &btpb.MutateRowsRequest{TableName: granularityTable, Entries: []*btpb.MutateRowsRequest_Entry{
		{RowKey: []byte("w2"), Mutations: []*btpb.Mutation{setCell("plain", 3000)}},
		{RowKey: []byte("w3"), Mutations: []*btpb.Mutation{setCell("plain", 3001)}},
	}})
	if err == nil {
		_, err = stream.Recv()
	}
	requireGranularityRefusal(t, err, "MutateRows")

	for name, req := range map[string]*btpb.CheckAndMutateRowRequest{
		"true branch":  {TrueMutations: []*btpb.Mutation{setCell("plain", 4001)}},
		"false branch": {FalseMutations: []*btpb.Mutation{deleteCells(0, 999)}},
		"predicate": {PredicateFilter: &btpb.RowFilter{Filter: &btpb.RowFilter_Chain_{Chain: &btpb.RowFilter_Chain{Filters: []*btpb.RowFilter{
			{Filter: &btpb.RowFilter_PassAllFilter{PassAllFilter: true}}, timestampRange(1000, 1999)}}}},
			TrueMutations: []*btpb.Mutation{setCell("plain", 5000)}},
	} {
		req.TableName, req.RowKey = granularityTable, []byte("w4")
		_, err = raw.CheckAndMutateRow(ctx, req)
		requireGranularityRefusal(t, err, "CheckAndMutateRow "+name)
	}

	read, err := raw.ReadRows(ctx, &btpb.ReadRowsRequest{TableName: granularityTable, Filter: timestampRange(1, 0)})
	if err == nil {
		_, err = read.Recv()
	}
	requireGranularityRefusal(t, err, "ReadRows")

	for _, row := range []string{"w1", "w2", "w3", "w4"} {
		r, err := h.Stored(ctx, "t", row)
		require.NoError(t, err)
		assert.Empty(t, r, "row %s: nothing written", row)
	}
	r, err := h.Stored(ctx, "t", "r")
	require.NoError(t, err)
	assert.Len(t, r["plain"], 2, "nothing deleted")
	assert.Zero(t, s.Counts().Refused, "refused before any RPC: the server saw nothing to refuse")

	// Whole milliseconds, a server timestamp and a client-generated
	// timestamp (the server truncates it) pass.
	auto := setCell("plain", 6001)
	auto.TimestampOrigin = btpb.Mutation_CLIENT_AUTO_GENERATED
	_, err = raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: granularityTable, RowKey: []byte("ok"),
		Mutations: []*btpb.Mutation{setCell("plain", 7000), setCell("plain", -1), auto, deleteCells(1000, 2000)}})
	require.NoError(t, err)
	read, err = raw.ReadRows(ctx, &btpb.ReadRowsRequest{TableName: granularityTable, Filter: timestampRange(1000, 3000)})
	require.NoError(t, err)
	for err == nil {
		_, err = read.Recv()
	}
	require.ErrorIs(t, err, io.EOF)
	assert.Zero(t, s.Counts().Refused)
}

// bttl's client refuses a delete range bound that is not a whole
// millisecond before any RPC: a *CellError wrapping
// ErrTimestampGranularity, InvalidArgument as the server's answer would
// be, and nothing deleted. Before, the Go client's DeleteTimestampRange
// truncated [1500, 2500) to [1000, 2000): it deleted the cell at 1000,
// outside the range asked, and kept the one at 2000, inside it.
func TestClientRefusesSubMillisecondDeleteRangeBeforeAnyRPC(t *testing.T) {
	s, _, bt, h := granularityEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	m := ttlclient.NewMutation()
	m.DeleteTimestampRange("plain", "c", 1500, 2500)
	err := bt.Apply(ctx, "r", m)
	require.ErrorIs(t, err, ttlclient.ErrTimestampGranularity)
	var ce *ttlclient.CellError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "plain", ce.Family)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))

	errs, err := bt.ApplyBulk(ctx, []string{"r", "w"}, []*ttlclient.Mutation{m, setPlain(8000)})
	require.NoError(t, err)
	require.Len(t, errs, 2)
	assert.ErrorIs(t, errs[0], ttlclient.ErrTimestampGranularity)
	assert.NoError(t, errs[1], "the other row is written, as for any refused row")

	r, err := h.Stored(ctx, "t", "r")
	require.NoError(t, err)
	require.Len(t, r["plain"], 2, "nothing deleted")
	assert.Equal(t, bigtable.Timestamp(2000), r["plain"][0].Timestamp)
	assert.Equal(t, bigtable.Timestamp(1000), r["plain"][1].Timestamp)
	assert.Zero(t, s.Counts().Refused, "refused before any RPC")
}

func setPlain(ts bigtable.Timestamp) *ttlclient.Mutation {
	m := ttlclient.NewMutation()
	m.Set("plain", "c", ts, []byte("v"))
	return m
}
