package rules

import (
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
// timestamp is truncated by the client and left to the server by the
// guard. Everything else is the same refusal, with the same registry row.
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
	out, r = guard.Stamp(now, []*btpb.Mutation{set("plain", "c", 1234)}, nil)
	require.Nil(t, r)
	assert.Equal(t, int64(1234), out[0].GetSetCell().GetTimestampMicros())

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
