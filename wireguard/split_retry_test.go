package wireguard_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// A bulk request the guard sends as two whose second part fails after the
// backend applied it (UNAVAILABLE, retryable): the client retries the
// whole group, the guard checks it again, and every row ends written once,
// its cells and their companions at the same timestamps (no second
// version beside the first attempt's).
func TestGuardSplitBulkRetriedAfterItsSecondPartFails(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	var mu sync.Mutex
	calls := 0
	t.Cleanup(rules.SetRequestLimitForTest(smallLimit)) // see smallLimit
	s := prodserver.New(t, prodserver.Config{MaxMutations: smallLimit, Fault: func(c prodserver.Call) prodserver.Fault {
		if c.Method != "MutateRows" {
			return prodserver.FaultNo
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 2 { // the first attempt's second part
			return prodserver.FaultUnavailableAfterApply
		}
		return prodserver.FaultNo
	}})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: s.Addr, NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	h.MustTable(t, "t", limitSchema)
	g, err := wireguard.New(map[string]strategy.Schema{"t": limitSchema})
	require.NoError(t, err)
	tbl := guardedClient(t, s.Addr, g).Open("t")

	ctx := context.Background()
	var rows []string
	muts := cellsN(t, 52, 10, &rows)
	errs, err := tbl.ApplyBulk(ctx, rows, muts)
	require.NoError(t, err)
	require.Nil(t, errs)
	mu.Lock()
	assert.Equal(t, 4, calls, "two parts, then the whole group again in two parts")
	mu.Unlock()
	for _, row := range rows {
		r, err := h.Stored(ctx, "t", row)
		require.NoError(t, err)
		assert.Len(t, r["wt"], 20, "row %s: 10 cells and their companions, once", row)
	}
}

func cellsN(t *testing.T, n, per int, rows *[]string) []*bigtable.Mutation {
	t.Helper()
	var muts []*bigtable.Mutation
	for i := range n {
		*rows = append(*rows, fmt.Sprintf("r%02d", i))
		muts = append(muts, cells(t, per))
	}
	return muts
}

// A row of a split request's second part the server fails (a family the
// guard knows but the table lacks) gets its error at its own index in the
// caller's request, and every other row is written.
// (TestGuardSplitsABulkRequestItsRulesPushOverTheLimit has none failing.)
func TestGuardSplitBulkEntryErrorAtItsIndex(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	t.Cleanup(rules.SetRequestLimitForTest(smallLimit)) // see smallLimit
	s := prodserver.New(t, prodserver.Config{MaxMutations: smallLimit})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: s.Addr, NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	h.MustTable(t, "t", limitSchema)
	guardSchema := strategy.Schema{"wt": limitSchema["wt"], "gone": strategy.Unmanaged()}
	g, err := wireguard.New(map[string]strategy.Schema{"t": guardSchema})
	require.NoError(t, err)
	tbl := guardedClient(t, s.Addr, g).Open("t")

	ctx := context.Background()
	var rows []string
	muts := cellsN(t, 52, 10, &rows)
	const bad = 40 // rows 0-48 fill the first part (its extra cell pushes row 49 out)
	muts[bad].Set("gone", "c", 1000, []byte("v"))
	errs, err := tbl.ApplyBulk(ctx, rows, muts)
	require.NoError(t, err)
	require.Len(t, errs, len(rows))
	for i, e := range errs {
		if i == bad {
			assert.Error(t, e, "row %d", i)
			continue
		}
		assert.NoError(t, e, "row %d", i)
	}
	for i, row := range rows {
		r, err := h.Stored(ctx, "t", row)
		require.NoError(t, err)
		if i == bad {
			continue // bttest applies a failed row's mutations up to the failing one
		}
		assert.Len(t, r["wt"], 20, "row %s", row)
	}
}

// A MutateRows request without entries is the server's to answer
// (production: "at least one entry must be specified",
// google.bigtable.v2.MutateRowsRequest.entries; bttest and cbtemulator:
// InvalidArgument "No mutations provided"): the guard has nothing to check
// in it and sends it, as it did before it split requests, rather than
// answering it as written. The unguarded answer is the reference.
func TestGuardSendsAnEmptyBulkRequestToTheServer(t *testing.T) {
	servers(t, func(t *testing.T, addr string) {
		g, err := wireguard.New(map[string]strategy.Schema{"t": limitSchema})
		require.NoError(t, err)
		answer := func(opts ...grpc.DialOption) error {
			conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
			require.NoError(t, err)
			defer func() { _ = conn.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stream, err := btpb.NewBigtableClient(conn).MutateRows(ctx, &btpb.MutateRowsRequest{TableName: "projects/p/instances/i/tables/t"})
			require.NoError(t, err)
			_, err = stream.Recv()
			return err
		}
		raw := answer()
		require.Equal(t, codes.InvalidArgument, status.Code(raw), "the server's own answer: %v", raw)
		guarded := answer(grpc.WithStreamInterceptor(g.StreamClientInterceptor()))
		assert.Equal(t, codes.InvalidArgument, status.Code(guarded), "the server's answer, not the guard's silence: %v", guarded)
	})
}

// smallLimit is the request limit the split tests lower Bigtable's
// 100,000 to, on both sides (rules.SetRequestLimitForTest, the server's
// prodserver.Config.MaxMutations), so a request over it is a few thousand
// mutations, cheap under -race on a loaded machine, not 100,000.
const smallLimit = 1000

// smallLimitEnv is limitEnv with the limit lowered to smallLimit on both
// sides; calls counts the server's MutateRows calls.
func smallLimitEnv(t *testing.T) (s *prodserver.Server, h *bttestharness.Harness, calls func() int) {
	t.Helper()
	t.Cleanup(rules.SetRequestLimitForTest(smallLimit))
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	var mu sync.Mutex
	n := 0
	s = prodserver.New(t, prodserver.Config{MaxMutations: smallLimit, Fault: func(c prodserver.Call) prodserver.Fault {
		if c.Method == "MutateRows" {
			mu.Lock()
			n++
			mu.Unlock()
		}
		return prodserver.FaultNo
	}})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: s.Addr, NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	h.MustTable(t, "t", limitSchema)
	return s, h, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// wtRequest is a raw MutateRows request of rows rows of perRow cells of
// family wt each (their companions double them in the guard), row keys
// prefix and a two-digit index.
func wtRequest(t *testing.T, prefix string, rows, perRow int) *btpb.MutateRowsRequest {
	t.Helper()
	ts, err := limitSchema["wt"].WriteTimestamp(time.Now(), time.Hour)
	require.NoError(t, err)
	req := &btpb.MutateRowsRequest{TableName: fmt.Sprintf("projects/%s/instances/%s/tables/t", bttestharness.Project, bttestharness.Instance)}
	for i := range rows {
		var ms []*btpb.Mutation
		for j := range perRow {
			ms = append(ms, &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: "wt", ColumnQualifier: []byte(fmt.Sprintf("c%06d", j)), TimestampMicros: int64(ts), Value: []byte("v")}}})
		}
		req.Entries = append(req.Entries, &btpb.MutateRowsRequest_Entry{RowKey: []byte(fmt.Sprintf("%s%03d", prefix, i)), Mutations: ms})
	}
	return req
}

// The guard checks requests of another Go type (a dynamicpb message, as
// TestGuardInspectsRequestsOfAnotherGoType sends): its responses are of
// that type too, and a split request's entries must still be answered at
// the caller's indexes, each once. (The limit is lowered to smallLimit
// on both sides: the split is the same at 100,000.)
func TestGuardSplitBulkAnswersAnotherGoTypeAtTheCallersIndexes(t *testing.T) {
	s, h, calls := smallLimitEnv(t)
	g, err := wireguard.New(map[string]strategy.Schema{"t": limitSchema})
	require.NoError(t, err)
	conn, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(g.StreamClientInterceptor()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// 52 rows of 10 cells: 520 mutations as sent, 1,040 with their
	// companions, over the limit: two requests (50 rows, then 2).
	req := wtRequest(t, "r", 52, 10)
	b, err := proto.Marshal(req)
	require.NoError(t, err)
	dyn := dynamicpb.NewMessage(req.ProtoReflect().Descriptor())
	require.NoError(t, proto.Unmarshal(b, dyn))

	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/google.bigtable.v2.Bigtable/MutateRows")
	require.NoError(t, err)
	require.NoError(t, cs.SendMsg(dyn))
	require.NoError(t, cs.CloseSend())
	seen := map[int64]int{}
	for {
		res := dynamicpb.NewMessage((&btpb.MutateRowsResponse{}).ProtoReflect().Descriptor())
		err := cs.RecvMsg(res)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := proto.Marshal(res)
		require.NoError(t, err)
		var r btpb.MutateRowsResponse
		require.NoError(t, proto.Unmarshal(b, &r))
		for _, e := range r.GetEntries() {
			assert.Zero(t, e.GetStatus().GetCode(), "entry %d", e.GetIndex())
			seen[e.GetIndex()]++
		}
	}
	assert.Equal(t, 2, calls(), "the request was sent as two")
	for i, e := range req.GetEntries() {
		assert.Equal(t, 1, seen[int64(i)], "row %d (%s) answered once, at its index", i, e.GetRowKey())
	}
	assert.Len(t, seen, len(req.GetEntries()), "no index outside the request")
	for _, row := range []string{"r000", "r051"} { // in the first part and the second
		r, err := h.Stored(ctx, "t", row)
		require.NoError(t, err)
		assert.Len(t, r["wt"], 20, "row %s: its cells and their companions", row)
	}
}

// A bulk request over Bigtable's limit as the caller sent it (not
// grouped by the Go client) is the server's to refuse, whole, as it
// refuses it without the guard: the guard splits only what its rules took
// over the limit (wirestream.NewBulkWhole), and does not turn the
// server's refusal into rows written. (The limit is lowered to
// smallLimit on both sides: the rule is the same at 100,000.)
func TestGuardDoesNotSplitARequestTheCallerSentOverTheLimit(t *testing.T) {
	s, h, _ := smallLimitEnv(t)
	g, err := wireguard.New(map[string]strategy.Schema{"t": limitSchema})
	require.NoError(t, err)
	req := wtRequest(t, "over", 120, 10) // 1,200 mutations; 20 a row with its companions
	answer := func(opts ...grpc.DialOption) error {
		conn, err := grpc.NewClient(s.Addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stream, err := btpb.NewBigtableClient(conn).MutateRows(ctx, req)
		require.NoError(t, err)
		for {
			if _, err := stream.Recv(); err != nil {
				return err
			}
		}
	}
	raw := answer()
	require.Equal(t, codes.InvalidArgument, status.Code(raw), "the server's own answer: %v", raw)
	guarded := answer(grpc.WithStreamInterceptor(g.StreamClientInterceptor()))
	assert.Equal(t, codes.InvalidArgument, status.Code(guarded), "the server's refusal, not a split: %v", guarded)
	assert.Contains(t, guarded.Error(), "Too many mutations in one request: 2400", "sent whole, companions included")
	for _, i := range []int{0, 119} {
		r, err := h.Stored(context.Background(), "t", fmt.Sprintf("over%03d", i))
		require.NoError(t, err)
		assert.Empty(t, r, "row over%03d: nothing written", i)
	}
}

// ctxWatch is a stream interceptor before the guard that looks, at each
// response, at the stream's Context: a stream still delivering is not
// done.
type ctxWatch struct {
	grpc.ClientStream
	doneWhileDelivering *int
}

func (s ctxWatch) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil && s.ClientStream.Context().Err() != nil {
		*s.doneWhileDelivering++
	}
	return err
}

// A split request's stream's Context is not done while its later parts
// still deliver: an interceptor before the guard (tracing, logging) sees
// one stream, in flight until its last answer.
func TestGuardSplitBulkContextLastsTheWholeStream(t *testing.T) {
	s, _, _, h := smallLimitTableEnv(t)
	g, err := wireguard.New(map[string]strategy.Schema{"t": limitSchema})
	require.NoError(t, err)
	done := 0
	watch := grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || method != "/google.bigtable.v2.Bigtable/MutateRows" {
			return cs, err
		}
		return ctxWatch{ClientStream: cs, doneWhileDelivering: &done}, nil
	})
	client, err := bigtable.NewClientWithConfig(context.Background(), bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true},
		append([]option.ClientOption{option.WithEndpoint(s.Addr), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())), option.WithGRPCDialOption(watch)}, g.ClientOptions()...)...)
	require.NoError(t, err)
	defer client.Close()

	var rows []string
	muts := cellsN(t, 52, 10, &rows)
	errs, err := client.Open("t").ApplyBulk(context.Background(), rows, muts)
	require.NoError(t, err)
	require.Nil(t, errs)
	assert.Zero(t, done, "responses delivered on a stream whose Context was done")
	r, err := h.Stored(context.Background(), "t", rows[51])
	require.NoError(t, err)
	assert.Len(t, r["wt"], 20)
}
