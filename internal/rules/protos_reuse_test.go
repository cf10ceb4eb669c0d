package rules

import (
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// The protos of a Mutation's changes are scratch reused from a pool: a
// build after another's Release sees only its own changes (no intent, cell,
// timestamp or qualifier of the released one), and what a build sent
// (SendOps, ToBigtable) does not change when its scratch is reused.
func TestProtosReusedCarryNothingOver(t *testing.T) {
	tbl := newTable(t, ModeClient)
	now := time.UnixMicro(1_700_000_000_000_000)
	first := []Op{
		{Kind: OpSet, Family: "def", Column: "long-qualifier-a", TS: bigtable.ServerTime, Intent: IntentTTL, Arg: int64(time.Minute), Value: []byte("1")},
		{Kind: OpSet, Family: "seq", Column: "b", TS: bigtable.ServerTime, Intent: IntentSequence, Arg: 7, Value: []byte("2")},
		{Kind: OpDeleteRange, Family: "plain", Column: "c", TS: 1000, Arg: 5000},
	}
	second := []Op{
		{Kind: OpSet, Family: "plain", Column: "x", TS: 3000, Value: []byte("3")},
		{Kind: OpAddInt, Family: "plain", Column: "n", TS: 4000, Arg: 9},
	}

	// Each build's protos, stamped and sent, as a fresh (unpooled) build
	// gives them: what every later build must still match.
	build := func(ops []Op) (*OpProtos, []*btpb.Mutation, *bigtable.Mutation) {
		ps := Protos(ops)
		require.Nil(t, tbl.StampOwned(now, ps.Mutations, ps.Intents))
		want := make([]*btpb.Mutation, len(ps.Mutations))
		for i, m := range ps.Mutations {
			want[i] = proto.Clone(m).(*btpb.Mutation)
		}
		return ps, want, SendOps(ops, setTimes(ps.Mutations))
	}
	ps1, want1, sent1 := build(first)
	require.Len(t, ps1.Intents, 3)
	assert.Equal(t, Intent{Kind: IntentTTL, TTL: time.Minute}, ps1.Intents[0])
	assert.Equal(t, Intent{Kind: IntentSequence, Seq: 7}, ps1.Intents[1])
	assert.Equal(t, Intent{}, ps1.Intents[2])
	assert.EqualValues(t, 7000, want1[1].GetSetCell().GetTimestampMicros())
	ps1.Release()

	for round := 0; round < 50; round++ { // the pool may hand back the same scratch, or not
		ps2, want2, _ := build(second)
		assert.Nil(t, ps2.Intents, "round %d: a build without intents got the released build's", round)
		require.Len(t, ps2.Mutations, 2)
		wantSet := set("plain", "x", 3000)
		wantSet.GetSetCell().Value = []byte("3")
		assert.True(t, proto.Equal(want2[0], wantSet), "round %d: %v", round, want2[0])
		assert.Equal(t, "n", string(want2[1].GetAddToCell().GetColumnQualifier().GetRawValue()))
		ps2.Release()

		ps3, want3, _ := build(first)
		for i := range want1 {
			assert.True(t, proto.Equal(want1[i], want3[i]), "round %d change %d: %v, want %v", round, i, want3[i], want1[i])
		}
		ps3.Release()
	}
	// The first build's bigtable.Mutation was built from copies: reusing
	// its scratch changed nothing in it.
	again, _, _ := build(first)
	defer again.Release()
	assert.Equal(t, SendOps(first, setTimes(again.Mutations)), sent1)
}

// An Op keeps one number beside its timestamp: CellIntent reads it as the
// intent its kind says, and nothing for a change without one.
func TestOpCellIntent(t *testing.T) {
	assert.Equal(t, Intent{Kind: IntentTTL, TTL: time.Hour}, (&Op{Intent: IntentTTL, Arg: int64(time.Hour)}).CellIntent())
	assert.Equal(t, Intent{Kind: IntentSequence, Seq: 3}, (&Op{Intent: IntentSequence, Arg: 3}).CellIntent())
	assert.Equal(t, Intent{}, (&Op{Kind: OpDeleteRange, Arg: 5000}).CellIntent(), "a range's end is no intent")
}

// setTimes is each SetCell's timestamp in ms (0 for other kinds), as
// SendOps takes them.
func setTimes(ms []*btpb.Mutation) []bigtable.Timestamp {
	out := make([]bigtable.Timestamp, len(ms))
	for i, m := range ms {
		out[i] = bigtable.Timestamp(m.GetSetCell().GetTimestampMicros())
	}
	return out
}
