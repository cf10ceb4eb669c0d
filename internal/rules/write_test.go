package rules

import (
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/bttl/bttl/strategy"
)

func set(fam, col string, ts bigtable.Timestamp) *btpb.Mutation {
	return &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
		FamilyName: fam, ColumnQualifier: []byte(col), TimestampMicros: int64(ts), Value: []byte("v")}}}
}

func newTable(t *testing.T, mode Mode) *Table {
	t.Helper()
	tbl, err := NewTable("t", strategy.Schema{
		"one":   strategy.OneSecond(),
		"def":   strategy.DefaultExpiry(time.Hour),
		"seq":   strategy.Sequence(2),
		"plain": strategy.Unmanaged(),
		"sv":    strategy.DefaultExpiry(time.Hour, strategy.SingleValue()),
		"wt":    strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime()),
	}, nil, mode, nil)
	require.NoError(t, err)
	return tbl
}

// One rule set, two modes where the docs say the client and the guard
// differ: a server timestamp on a managed family gets the default TTL
// from the client and is refused by the guard; an unmanaged family's
// timestamp is truncated by the client and sent as it is by the guard
// (refused when not a whole millisecond). Everything else is the same refusal, with the same registry row.
func TestModesDifferOnlyWhereTheDocsSay(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000).Add(1500 * time.Nanosecond)
	nowMs := bigtable.Timestamp(now.UnixMilli() * 1000)
	client, guard := newTable(t, ModeClient), newTable(t, ModeGuard)

	out, r := client.Stamp(now, []*btpb.Mutation{set("def", "c", bigtable.ServerTime)}, nil)
	require.Nil(t, r)
	assert.Equal(t, int64(nowMs), out[0].GetSetCell().GetTimestampMicros(), "the default TTL: D from now")
	_, r = guard.Stamp(now, []*btpb.Mutation{set("def", "c", bigtable.ServerTime)}, nil)
	require.NotNil(t, r)
	assert.ErrorIs(t, r, strategy.ErrServerTimestamp)
	assert.Equal(t, "server_timestamp", r.Reason.Metric)

	out, r = client.Stamp(now, []*btpb.Mutation{set("plain", "c", 1234)}, nil)
	require.Nil(t, r)
	assert.Equal(t, int64(1000), out[0].GetSetCell().GetTimestampMicros())
	_, r = guard.Stamp(now, []*btpb.Mutation{set("plain", "c", 1234)}, nil)
	require.NotNil(t, r, "the guard sends it as it is, so a sub-millisecond one is refused")
	assert.ErrorIs(t, r, ErrTimestampGranularity)
	out, r = guard.Stamp(now, []*btpb.Mutation{set("plain", "c", 7000)}, nil)
	require.Nil(t, r)
	assert.Equal(t, int64(7000), out[0].GetSetCell().GetTimestampMicros())

	for _, tbl := range []*Table{client, guard} {
		_, r = tbl.Stamp(now, []*btpb.Mutation{set("one", "c", nowMs-1000)}, nil)
		require.NotNil(t, r)
		assert.Equal(t, "already_expired", r.Reason.Metric, "one event, one reason, in every mode")
		assert.Equal(t, "expired-on-arrival", r.Reason.Rule)
		_, r = tbl.Stamp(now, []*btpb.Mutation{set("nosuch", "c", nowMs)}, nil)
		require.NotNil(t, r)
		assert.Equal(t, "unknown_family", r.Reason.Metric)
	}
}

// A cell's intent (ttlclient's SetTTL, SetVersion) beside its proto.
func TestIntents(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	tbl := newTable(t, ModeClient)
	ms := []*btpb.Mutation{set("one", "a", bigtable.ServerTime), set("seq", "b", bigtable.ServerTime), set("seq", "c", bigtable.ServerTime)}
	in := []Intent{{Kind: IntentTTL, TTL: time.Minute}, {Kind: IntentSequence, Seq: 7}, {Kind: IntentTTL, TTL: time.Minute}}
	_, r := tbl.Stamp(now, ms, in)
	require.NotNil(t, r)
	assert.ErrorIs(t, r, strategy.ErrWrongCellOption, "a TTL on a sequence family")
	assert.Equal(t, 2, r.Index)
	assert.Equal(t, time.Minute, r.TTL)

	out, r := tbl.Stamp(now, ms[:2], in[:2])
	require.Nil(t, r)
	assert.Equal(t, now.Add(time.Minute).UnixMicro(), out[0].GetSetCell().GetTimestampMicros())
	assert.Equal(t, int64(7000), out[1].GetSetCell().GetTimestampMicros())
}

// The rules never write the protos they are given (a caller's request):
// a changed cell is a new proto, an added one a new slice.
func TestStampAndCompleteLeaveTheInputAsItWas(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	tbl := newTable(t, ModeClient)
	ms := []*btpb.Mutation{set("def", "a", bigtable.ServerTime), set("sv", "b", bigtable.ServerTime), set("wt", "c", bigtable.ServerTime)}
	before := make([]*btpb.Mutation, len(ms))
	for i, m := range ms {
		before[i] = proto.Clone(m).(*btpb.Mutation)
	}
	out, r := tbl.Mutations(now, ms, nil)
	require.Nil(t, r)
	for i := range ms {
		assert.True(t, proto.Equal(before[i], ms[i]), "input %d changed", i)
	}
	// def:a; the delete of sv:b's column, sv:b; wt:c and its companion.
	require.Len(t, out, 5)
	assert.NotNil(t, out[1].GetDeleteFromColumn())
	assert.Equal(t, strategy.WriteTimeColumn("c"), string(out[4].GetSetCell().GetColumnQualifier()))
	assert.Equal(t, out[3].GetSetCell().GetTimestampMicros(), out[4].GetSetCell().GetTimestampMicros())
}

// A write to a write-time family's reserved qualifiers: the client refuses
// it in the mutation's order, the guard once every cell has passed.
func TestReservedQualifierOrder(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	ms := []*btpb.Mutation{set("wt", strategy.WriteTimeColumn("c"), bigtable.Timestamp(now.UnixMicro())), set("one", "d", bigtable.ServerTime)}
	_, r := newTable(t, ModeClient).Stamp(now, ms, nil)
	require.NotNil(t, r)
	assert.Equal(t, "reserved_column", r.Reason.Metric)
	_, r = newTable(t, ModeGuard).Mutations(now, ms, nil)
	require.NotNil(t, r)
	assert.Equal(t, "server_timestamp", r.Reason.Metric)
}

func deleteRange(fam, col string, start, end int64) *btpb.Mutation {
	return &btpb.Mutation{Mutation: &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
		FamilyName: fam, ColumnQualifier: []byte(col), TimeRange: &btpb.TimestampRange{StartTimestampMicros: start, EndTimestampMicros: end}}}}
}

// A timestamp the rules would send that is not a whole millisecond is
// refused (production refuses it, InvalidArgument): a delete range bound
// in both modes, an unmanaged family's SetCell timestamp in the guard
// (the client truncates it, as the Go client's Set does). A server
// timestamp, 0, whole milliseconds and a client-generated timestamp (the
// server truncates it) pass; a managed family's timestamp is truncated.
func TestSubMillisecondTimestampsAreRefused(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	client, guard := newTable(t, ModeClient), newTable(t, ModeGuard)
	for _, tbl := range []*Table{client, guard} {
		for _, m := range []*btpb.Mutation{
			deleteRange("plain", "c", 1500, 0), deleteRange("plain", "c", 1000, 2001), deleteRange("one", "c", 0, 999),
		} {
			_, r := tbl.Stamp(now, []*btpb.Mutation{set("plain", "ok", 1000), m}, nil)
			require.NotNil(t, r, "mode %d: %v", tbl.Mode, m)
			assert.ErrorIs(t, r, ErrTimestampGranularity)
			assert.Equal(t, 1, r.Index)
			assert.Equal(t, "timestamp_granularity", r.Reason.Metric)
			assert.Equal(t, "timestamp-granularity", r.Reason.Rule)
			assert.Equal(t, codes.InvalidArgument, r.Reason.Code)
		}
		for _, m := range []*btpb.Mutation{deleteRange("plain", "c", 0, 0), deleteRange("plain", "c", 1000, 3000), deleteRange("one", "c", 2000, 0)} {
			_, r := tbl.Stamp(now, []*btpb.Mutation{m}, nil)
			assert.Nil(t, r, "mode %d: %v", tbl.Mode, m)
		}
		for _, ts := range []bigtable.Timestamp{bigtable.ServerTime, 0, 2000} {
			_, r := tbl.Stamp(now, []*btpb.Mutation{set("plain", "c", ts)}, nil)
			assert.Nil(t, r, "mode %d: timestamp %d", tbl.Mode, ts)
		}
		out, r := tbl.Stamp(now, []*btpb.Mutation{set("one", "c", bigtable.Timestamp(now.UnixMicro()+60_000_123))}, nil)
		require.Nil(t, r)
		assert.Equal(t, now.UnixMicro()+60_000_000, out[0].GetSetCell().GetTimestampMicros(), "a managed family's is truncated")
	}
	_, r := guard.Stamp(now, []*btpb.Mutation{set("plain", "c", 1234)}, nil)
	require.NotNil(t, r)
	assert.ErrorIs(t, r, ErrTimestampGranularity)
	assert.Contains(t, r.Error(), "1234")
	out, r := client.Stamp(now, []*btpb.Mutation{set("plain", "c", 1234)}, nil)
	require.Nil(t, r)
	assert.Equal(t, int64(1000), out[0].GetSetCell().GetTimestampMicros(), "the client truncates, as bigtable.Mutation.Set does")
	auto := set("plain", "c", 1234)
	auto.TimestampOrigin = btpb.Mutation_CLIENT_AUTO_GENERATED
	_, r = guard.Stamp(now, []*btpb.Mutation{auto}, nil)
	assert.Nil(t, r, "a client-generated timestamp: the server truncates it")

	// A MutateRows request with one such cell is refused whole.
	req := &btpb.MutateRowsRequest{Entries: []*btpb.MutateRowsRequest_Entry{
		{RowKey: []byte("a"), Mutations: []*btpb.Mutation{set("plain", "c", 1000)}},
		{RowKey: []byte("b"), Mutations: []*btpb.Mutation{set("plain", "c", 1001)}},
	}}
	sent, r, i := guard.MutateRows(now, req)
	require.NotNil(t, r)
	assert.Nil(t, sent)
	assert.Equal(t, 1, i)
	assert.ErrorIs(t, r, ErrTimestampGranularity)
}

// A caller's filter with a timestamp range bound not in whole
// milliseconds, at any depth, is refused in ReadRows and in a
// CheckAndMutateRow predicate, whether or not the table has a managed
// family (the TTL filter is chained before it).
func TestSubMillisecondFilterBoundsAreRefused(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	rng := func(s, e int64) *btpb.RowFilter {
		return &btpb.RowFilter{Filter: &btpb.RowFilter_TimestampRangeFilter{TimestampRangeFilter: &btpb.TimestampRange{StartTimestampMicros: s, EndTimestampMicros: e}}}
	}
	pass := &btpb.RowFilter{Filter: &btpb.RowFilter_PassAllFilter{PassAllFilter: true}}
	chain := func(fs ...*btpb.RowFilter) *btpb.RowFilter {
		return &btpb.RowFilter{Filter: &btpb.RowFilter_Chain_{Chain: &btpb.RowFilter_Chain{Filters: fs}}}
	}
	inter := func(fs ...*btpb.RowFilter) *btpb.RowFilter {
		return &btpb.RowFilter{Filter: &btpb.RowFilter_Interleave_{Interleave: &btpb.RowFilter_Interleave{Filters: fs}}}
	}
	cond := func(p, tr, fa *btpb.RowFilter) *btpb.RowFilter {
		return &btpb.RowFilter{Filter: &btpb.RowFilter_Condition_{Condition: &btpb.RowFilter_Condition{PredicateFilter: p, TrueFilter: tr, FalseFilter: fa}}}
	}
	bad := []*btpb.RowFilter{
		rng(1500, 0), rng(0, 2001), chain(pass, rng(1, 2000)), inter(pass, chain(pass, rng(1000, 1999))),
		cond(rng(5, 0), pass, nil), cond(pass, nil, inter(pass, rng(0, 7))), cond(pass, rng(999, 0), nil),
	}
	good := []*btpb.RowFilter{nil, pass, rng(0, 0), rng(1000, 2000), chain(pass, rng(3000, 0)), cond(rng(0, 1000), pass, inter(pass, rng(2000, 4000)))}
	unmanaged, err := NewTable("u", strategy.Schema{"plain": strategy.Unmanaged()}, nil, ModeGuard, nil)
	require.NoError(t, err)
	for _, tbl := range []*Table{newTable(t, ModeClient), newTable(t, ModeGuard), unmanaged} {
		for _, f := range bad {
			_, r := tbl.ReadRows(now, &btpb.ReadRowsRequest{Filter: f})
			require.NotNil(t, r, "%v", f)
			assert.ErrorIs(t, r, ErrTimestampGranularity)
			assert.Equal(t, -1, r.Index)
			_, r = tbl.CheckAndMutateRow(now, &btpb.CheckAndMutateRowRequest{PredicateFilter: f,
				TrueMutations: []*btpb.Mutation{set("plain", "c", 1000)}}, true)
			require.NotNil(t, r, "%v", f)
			assert.ErrorIs(t, r, ErrTimestampGranularity)
		}
		for _, f := range good {
			_, r := tbl.ReadRows(now, &btpb.ReadRowsRequest{Filter: f})
			assert.Nil(t, r, "%v", f)
			_, r = tbl.CheckAndMutateRow(now, &btpb.CheckAndMutateRowRequest{PredicateFilter: f,
				TrueMutations: []*btpb.Mutation{set("plain", "c", 1000)}}, true)
			assert.Nil(t, r, "%v", f)
		}
	}
}

// An aggregate's timestamp (AddToCell, MergeToCell) the guard sends as
// it is: "must be a raw_timestamp_micros that matches the table's
// granularity" (google.bigtable.v2.Mutation.AddToCell.timestamp), so a
// sub-millisecond one is refused as a SetCell's is, unless the client
// generated it (the server truncates it). bttl's client sends it through
// the Go client's AddIntToCell and MergeBytesToCell, which truncate it,
// as its Set does.
func TestSubMillisecondAggregateTimestampsAreRefusedByTheGuard(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	add := func(ts int64) *btpb.Mutation {
		return &btpb.Mutation{Mutation: &btpb.Mutation_AddToCell_{AddToCell: &btpb.Mutation_AddToCell{FamilyName: "plain",
			ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: []byte("n")}},
			Timestamp:       &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: ts}},
			Input:           &btpb.Value{Kind: &btpb.Value_IntValue{IntValue: 1}}}}}
	}
	merge := func(ts int64) *btpb.Mutation {
		return &btpb.Mutation{Mutation: &btpb.Mutation_MergeToCell_{MergeToCell: &btpb.Mutation_MergeToCell{FamilyName: "plain",
			ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: []byte("n")}},
			Timestamp:       &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: ts}},
			Input:           &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: []byte("x")}}}}}
	}
	client, guard := newTable(t, ModeClient), newTable(t, ModeGuard)
	for _, mk := range []func(int64) *btpb.Mutation{add, merge} {
		_, r := guard.Stamp(now, []*btpb.Mutation{set("plain", "ok", 1000), mk(1500)}, nil)
		require.NotNil(t, r, "%v", mk(1500))
		assert.ErrorIs(t, r, ErrTimestampGranularity)
		assert.Equal(t, 1, r.Index)
		assert.Equal(t, "plain", r.Family)
		assert.Contains(t, r.Error(), "1500")
		for _, ts := range []int64{0, 2000} {
			_, r = guard.Stamp(now, []*btpb.Mutation{mk(ts)}, nil)
			assert.Nil(t, r, "timestamp %d", ts)
		}
		auto := mk(1500)
		auto.TimestampOrigin = btpb.Mutation_CLIENT_AUTO_GENERATED
		_, r = guard.Stamp(now, []*btpb.Mutation{auto}, nil)
		assert.Nil(t, r, "a client-generated timestamp: the server truncates it")
		_, r = client.Stamp(now, []*btpb.Mutation{mk(1500)}, nil)
		assert.Nil(t, r, "the client sends it through the Go client's builders, which truncate it")

		req := &btpb.MutateRowsRequest{Entries: []*btpb.MutateRowsRequest_Entry{
			{RowKey: []byte("a"), Mutations: []*btpb.Mutation{mk(1000)}},
			{RowKey: []byte("b"), Mutations: []*btpb.Mutation{mk(1001)}},
		}}
		sent, r, i := guard.MutateRows(now, req)
		require.NotNil(t, r)
		assert.Nil(t, sent)
		assert.Equal(t, 1, i)
		assert.ErrorIs(t, r, ErrTimestampGranularity)
	}
}
