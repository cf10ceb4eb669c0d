package prodserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/prodserver"
)

// profiles are one of each kind, on cluster-a.
var profiles = []prodserver.AppProfile{
	prodserver.SingleCluster("txn", prodserver.DefaultCluster, true),
	prodserver.SingleCluster("plain", prodserver.DefaultCluster, false),
	prodserver.MultiCluster("multi"),
	prodserver.DataBoost("boost", prodserver.DefaultCluster),
}

// onBothBackends runs f on a server in front of in-process bttest and one
// in front of cbtemulator.
func onBothBackends(t *testing.T, cfg prodserver.Config, f func(t *testing.T, s *prodserver.Server)) {
	t.Run("bttest", func(t *testing.T) { f(t, prodserver.New(t, cfg)) })
	t.Run("cbtemulator", func(t *testing.T) {
		e := bttestharness.NewEmulator(t)
		c := cfg
		c.Clusters = []prodserver.Cluster{{ID: prodserver.DefaultCluster, Addr: e.Addr}}
		f(t, prodserver.New(t, c))
	})
}

func condMutation() *bigtable.Mutation {
	return bigtable.NewCondMutation(bigtable.ColumnFilter("x"), set("t", bigtable.ServerTime, "1"), set("e", bigtable.ServerTime, "1"))
}

func increment() *bigtable.ReadModifyWrite {
	rmw := bigtable.NewReadModifyWrite()
	rmw.Increment(family, "n", 1)
	return rmw
}

func TestTransactionsNeedASingleClusterTransactionalProfile(t *testing.T) {
	onBothBackends(t, prodserver.Config{Profiles: profiles}, func(t *testing.T, s *prodserver.Server) {
		ctx := context.Background()
		createTable(t, s, "tx")
		for _, p := range []string{"txn", ""} { // the one-cluster default profile allows them
			tbl := table(t, s, p, "tx")
			require.NoError(t, tbl.Apply(ctx, "r", condMutation()), "profile %q", p)
			_, err := tbl.ApplyReadModifyWrite(ctx, "r", increment())
			require.NoError(t, err, "profile %q", p)
		}
		for _, p := range []string{"plain", "multi"} {
			tbl := table(t, s, p, "tx")
			requireCode(t, tbl.Apply(ctx, "r", condMutation()), codes.FailedPrecondition, "Single-row transactions are not allowed by this app profile")
			_, err := tbl.ApplyReadModifyWrite(ctx, "r", increment())
			requireCode(t, err, codes.FailedPrecondition, "Single-row transactions are not allowed by this app profile")
			// Plain writes and reads are allowed.
			require.NoError(t, tbl.Apply(ctx, "r", set("c", 1000, "v")))
			_, err = tbl.ReadRow(ctx, "r")
			require.NoError(t, err)
		}
	})
}

func TestDataBoostIsReadOnly(t *testing.T) {
	onBothBackends(t, prodserver.Config{Profiles: profiles}, func(t *testing.T, s *prodserver.Server) {
		ctx := context.Background()
		createTable(t, s, "db")
		tbl := table(t, s, "boost", "db")
		const msg = "is a Data Boost profile, which is read-only"
		requireCode(t, tbl.Apply(ctx, "r", set("c", 1000, "v")), codes.FailedPrecondition, msg)
		requireCode(t, tbl.Apply(ctx, "r", condMutation()), codes.FailedPrecondition, msg)
		_, err := tbl.ApplyReadModifyWrite(ctx, "r", increment())
		requireCode(t, err, codes.FailedPrecondition, msg)
		_, err = tbl.ApplyBulk(ctx, []string{"r"}, []*bigtable.Mutation{set("c", 1000, "v")})
		requireCode(t, err, codes.FailedPrecondition, msg)
		require.NoError(t, tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { return true }))
		require.Equal(t, int64(4), s.Counts().Refused)
	})
}

func TestUnknownProfileIsRefused(t *testing.T) {
	onBothBackends(t, prodserver.Config{Profiles: profiles}, func(t *testing.T, s *prodserver.Server) {
		createTable(t, s, "u")
		tbl := table(t, s, "nosuch", "u")
		_, err := tbl.ReadRow(context.Background(), "r")
		requireCode(t, err, codes.NotFound, `App profile not found: "nosuch"`)
		requireCode(t, tbl.Apply(context.Background(), "r", set("c", 1000, "v")), codes.NotFound, "nosuch")
	})
}

// The Go client truncates every timestamp it sends to the millisecond
// (Timestamp.TruncateToMilliseconds in Mutation.Set, DeleteTimestampRange
// and TimestampRangeFilterMicros, cloud.google.com/go/bigtable v1.58.0), so
// the refusals are shown with the generated gRPC client, as another
// language's client or a raw gRPC caller would meet them.
func TestTimestampsMustBeWholeMilliseconds(t *testing.T) {
	onBothBackends(t, prodserver.Config{}, func(t *testing.T, s *prodserver.Server) {
		ctx := context.Background()
		createTable(t, s, "ms")
		name := "projects/" + project + "/instances/" + instance + "/tables/ms"
		raw := btpb.NewBigtableClient(dial(t, s.Addr))
		setCell := func(ts int64) *btpb.Mutation {
			return &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{FamilyName: family, ColumnQualifier: []byte("c"), TimestampMicros: ts, Value: []byte("v")}}}
		}
		_, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: name, RowKey: []byte("r"), Mutations: []*btpb.Mutation{setCell(2000), setCell(1001)}})
		requireCode(t, err, codes.InvalidArgument,
			"Error in Mutation list : Error in element #1 : Timestamp granularity mismatch. Expected a multiple of 1000 (millisecond granularity), but got 1001.")
		del := &btpb.Mutation{Mutation: &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
			FamilyName: family, ColumnQualifier: []byte("c"), TimeRange: &btpb.TimestampRange{StartTimestampMicros: 1000, EndTimestampMicros: 2500}}}}
		_, err = raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: name, RowKey: []byte("r"), Mutations: []*btpb.Mutation{del}})
		requireCode(t, err, codes.InvalidArgument, "but got 2500.")
		// An aggregate's timestamp "must be a raw_timestamp_micros that
		// matches the table's granularity" (Mutation.AddToCell.timestamp):
		// refused before the backend, whatever the family's type.
		add := &btpb.Mutation{Mutation: &btpb.Mutation_AddToCell_{AddToCell: &btpb.Mutation_AddToCell{FamilyName: family,
			ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: []byte("n")}},
			Timestamp:       &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: 1500}},
			Input:           &btpb.Value{Kind: &btpb.Value_IntValue{IntValue: 1}}}}}
		_, err = raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: name, RowKey: []byte("r"), Mutations: []*btpb.Mutation{add}})
		requireCode(t, err, codes.InvalidArgument, "Error in element #0 : Timestamp granularity mismatch. Expected a multiple of 1000 (millisecond granularity), but got 1500.")
		rr, err := raw.ReadRows(ctx, &btpb.ReadRowsRequest{TableName: name, Filter: &btpb.RowFilter{Filter: &btpb.RowFilter_Chain_{Chain: &btpb.RowFilter_Chain{Filters: []*btpb.RowFilter{
			{Filter: &btpb.RowFilter_TimestampRangeFilter{TimestampRangeFilter: &btpb.TimestampRange{StartTimestampMicros: 1500}}}}}}}})
		require.NoError(t, err)
		_, err = rr.Recv()
		requireCode(t, err, codes.InvalidArgument, "Timestamp granularity mismatch. Expected a multiple of 1000 (millisecond granularity), but got 1500.")
		// MutateRows: the refused entry fails alone.
		mr, err := raw.MutateRows(ctx, &btpb.MutateRowsRequest{TableName: name, Entries: []*btpb.MutateRowsRequest_Entry{
			{RowKey: []byte("a"), Mutations: []*btpb.Mutation{setCell(1234)}},
			{RowKey: []byte("b"), Mutations: []*btpb.Mutation{setCell(3000)}},
		}})
		require.NoError(t, err)
		resp, err := mr.Recv()
		require.NoError(t, err)
		byIndex := map[int64]codes.Code{}
		for _, e := range resp.GetEntries() {
			byIndex[e.GetIndex()] = codes.Code(e.GetStatus().GetCode())
		}
		require.Equal(t, map[int64]codes.Code{0: codes.InvalidArgument, 1: codes.OK}, byIndex)
		// A client-auto-generated timestamp is truncated, not refused.
		auto := setCell(4321)
		auto.TimestampOrigin = btpb.Mutation_CLIENT_AUTO_GENERATED
		_, err = raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: name, RowKey: []byte("c"), Mutations: []*btpb.Mutation{auto}})
		require.NoError(t, err)

		tbl := table(t, s, "", "ms")
		m := set("c", 1001, "v")
		m.Set(family, "s", bigtable.ServerTime, []byte("v"))
		require.NoError(t, tbl.Apply(ctx, "go", m))
		for key, want := range map[string]bigtable.Timestamp{"b": 3000, "c": 4000, "go": 1000} {
			row, err := tbl.ReadRow(ctx, key)
			require.NoError(t, err)
			require.Equal(t, want, cells(row)[family+":c"].Timestamp, "row %s", key)
		}
		row, err := tbl.ReadRow(ctx, "a")
		require.NoError(t, err)
		require.Empty(t, row)
		row, err = tbl.ReadRow(ctx, "go")
		require.NoError(t, err)
		require.Zero(t, cells(row)[family+":s"].Timestamp%1000, "a server timestamp is a whole millisecond")
	})
}

func TestSizeLimits(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{})
	ctx := context.Background()
	createTable(t, s, "lim")
	tbl := table(t, s, "", "lim")

	long := strings.Repeat("k", prodserver.MaxRowKeyBytes)
	require.NoError(t, tbl.Apply(ctx, long, set("c", 1000, "v")))
	requireCode(t, tbl.Apply(ctx, long+"k", set("c", 1000, "v")), codes.InvalidArgument, "Row key is too long: 4097 bytes")
	_, err := tbl.ReadRow(ctx, long+"k")
	requireCode(t, err, codes.InvalidArgument, "Row key is too long")

	requireCode(t, tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { return true },
		bigtable.RowFilter(bigtable.ValueFilter(strings.Repeat("a", prodserver.MaxFilterBytes)))), codes.InvalidArgument, "Filter is too large")
	require.NoError(t, tbl.ReadRows(ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { return true },
		bigtable.RowFilter(bigtable.ValueFilter(strings.Repeat("a", prodserver.MaxFilterBytes-100)))))

	// MutateRows: an entry a rule refuses fails alone; the others apply.
	errs, err := tbl.ApplyBulk(ctx, []string{"ok", long + "k"}, []*bigtable.Mutation{set("c", 1000, "v"), set("c", 1000, "v")})
	require.NoError(t, err)
	require.Len(t, errs, 2)
	require.NoError(t, errs[0])
	requireCode(t, errs[1], codes.InvalidArgument, "Row key is too long")
	row, err := tbl.ReadRow(ctx, "ok")
	require.NoError(t, err)
	require.Len(t, row[family], 1)
}

// The answer carries RetryInfo on the wire. The Go client (v1.58.0) uses
// it to time its own retries but returns errors without details
// (internal/metrics.ConvertToGrpcStatusErr keeps only code and message),
// so the detail is read with the generated client, the code with both.
// A request of MaxMutations mutations passes the limit and reaches the
// fault stage (throttled here, so that the backend does not spend seconds
// applying it under -race); one more is refused before.
func TestMutationLimit(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{Fault: func(c prodserver.Call) prodserver.Fault {
		if c.Method == "MutateRow" {
			return prodserver.FaultThrottle
		}
		return prodserver.FaultNone
	}})
	createTable(t, s, "lim")
	tbl := table(t, s, "", "lim")
	// A server-timestamped cell makes the write non-idempotent: the client
	// does not retry the throttled call.
	many := set("c", bigtable.ServerTime, "v")
	for range prodserver.MaxMutations - 1 {
		many.DeleteCellsInColumn(family, "c")
	}
	requireCode(t, tbl.Apply(context.Background(), "r", many), codes.ResourceExhausted, "throttled")
	many.DeleteCellsInColumn(family, "c")
	requireCode(t, tbl.Apply(context.Background(), "r", many), codes.InvalidArgument, "Too many mutations in one request: 100001")
	require.Equal(t, prodserver.Counts{Refused: 1, Throttled: 1}, s.Counts())
}

func TestThrottlingAnswersResourceExhaustedWithRetryInfo(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{ThrottleRate: 1, RetryDelay: 7 * time.Millisecond})
	ctx := context.Background()
	createTable(t, s, "th")
	raw := btpb.NewBigtableClient(dial(t, s.Addr))
	_, err := raw.MutateRow(ctx, &btpb.MutateRowRequest{TableName: "projects/p/instances/i/tables/th", RowKey: []byte("r"),
		Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_DeleteFromRow_{DeleteFromRow: &btpb.Mutation_DeleteFromRow{}}}}})
	requireCode(t, err, codes.ResourceExhausted, "throttled")
	var info *errdetails.RetryInfo
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			info = ri
		}
	}
	require.NotNil(t, info, "no RetryInfo in %v", status.Convert(err).Details())
	require.Equal(t, 7*time.Millisecond, info.GetRetryDelay().AsDuration())

	// A server-timestamped write is not idempotent: the Go client does not
	// retry it, so the code is the server's.
	tbl := table(t, s, "", "th")
	requireCode(t, tbl.Apply(ctx, "r", set("c", bigtable.ServerTime, "v")), codes.ResourceExhausted, "throttled")
	require.Equal(t, int64(2), s.Counts().Throttled)
}

func TestClientRetriesThrottledReadsAfterRetryInfo(t *testing.T) {
	const delay = 150 * time.Millisecond
	throttledReads := 0
	s := prodserver.New(t, prodserver.Config{RetryDelay: delay, Fault: func(c prodserver.Call) prodserver.Fault {
		if c.Method == "ReadRows" && throttledReads < 2 {
			throttledReads++
			return prodserver.FaultThrottle
		}
		return prodserver.FaultNone
	}})
	createTable(t, s, "rt")
	tbl := table(t, s, "", "rt")
	require.NoError(t, tbl.Apply(context.Background(), "r", set("c", 1000, "v")))
	start := time.Now()
	row, err := tbl.ReadRow(context.Background(), "r")
	require.NoError(t, err)
	require.Len(t, row[family], 1)
	require.Equal(t, int64(2), s.Counts().Throttled)
	// The client waited the delay RetryInfo asked for before each retry
	// (its own backoff starts below it).
	require.GreaterOrEqual(t, time.Since(start), 2*delay)
}

// The same seed throttles the same calls.
func TestThrottlingIsSeeded(t *testing.T) {
	const seed = 42
	t.Logf("seed %d", seed)
	pattern := func() []bool {
		s := prodserver.New(t, prodserver.Config{Seed: seed, ThrottleRate: 0.5})
		createTable(t, s, "sd")
		tbl := table(t, s, "", "sd")
		var out []bool
		for range 32 {
			err := tbl.Apply(context.Background(), "r", set("c", bigtable.ServerTime, "v"))
			out = append(out, status.Code(err) == codes.ResourceExhausted)
		}
		return out
	}
	first := pattern()
	require.Equal(t, first, pattern())
	require.Contains(t, first, true)
	require.Contains(t, first, false)
}

func TestUnavailableAfterTheWriteWasApplied(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{UnavailableRate: 1})
	ctx := context.Background()
	createTable(t, s, "un")
	tbl := table(t, s, "", "un")
	requireCode(t, tbl.Apply(ctx, "r", set("c", bigtable.ServerTime, "v")), codes.Unavailable, "after the write was applied")
	requireCode(t, tbl.Apply(ctx, "r", condMutation()), codes.Unavailable, "after the write was applied")
	row, err := tbl.ReadRow(ctx, "r") // reads are not failed
	require.NoError(t, err)
	got := cells(row)
	require.Contains(t, got, family+":c", "the write was applied")
	require.Contains(t, got, family+":e", "the conditional write's false branch was applied")
	require.Equal(t, int64(2), s.Counts().Unavailable)
}

func TestAppProfilesThroughTheInstanceAdminAPI(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{Profiles: profiles})
	iac, err := bigtable.NewInstanceAdminClient(context.Background(), project, optionConn(t, s.Addr))
	require.NoError(t, err)
	t.Cleanup(func() { _ = iac.Close() })
	ap, err := iac.GetAppProfile(context.Background(), instance, "plain")
	require.NoError(t, err)
	require.Equal(t, prodserver.DefaultCluster, ap.GetSingleClusterRouting().GetClusterId())
	require.False(t, ap.GetSingleClusterRouting().GetAllowTransactionalWrites())
	ap, err = iac.GetAppProfile(context.Background(), instance, "boost")
	require.NoError(t, err)
	require.NotNil(t, ap.GetDataBoostIsolationReadOnly())
	_, err = iac.GetAppProfile(context.Background(), instance, "nosuch")
	requireCode(t, err, codes.NotFound, "nosuch")
}

// Config.Fault decides first: FaultNo exempts a call from the rates.
func TestFaultHookOverridesTheRates(t *testing.T) {
	s := prodserver.New(t, prodserver.Config{ThrottleRate: 1, Fault: func(c prodserver.Call) prodserver.Fault {
		if c.Method == "ReadRows" || c.Method == "MutateRow" && c.Profile == "txn" {
			return prodserver.FaultNo
		}
		return prodserver.FaultNone
	}, Profiles: profiles})
	createTable(t, s, "hook")
	ctx := context.Background()
	require.NoError(t, table(t, s, "txn", "hook").Apply(ctx, "r", set("c", bigtable.ServerTime, "v")))
	requireCode(t, table(t, s, "plain", "hook").Apply(ctx, "r", set("c", bigtable.ServerTime, "v")), codes.ResourceExhausted, "throttled")
	_, err := table(t, s, "plain", "hook").ReadRow(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, int64(1), s.Counts().Throttled)
}
