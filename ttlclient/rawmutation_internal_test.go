package ttlclient

import (
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/bttl/bttl/strategy"
)

// The mechanism works on the client version the module builds with.
func TestMutationReaderSelfCheckPasses(t *testing.T) {
	l, err := layout()
	require.NoError(t, err)
	require.NoError(t, rawSelfCheck(l))
}

// The self-check notices a layout that reads the wrong fields.
func TestMutationReaderSelfCheckCatchesWrongLayout(t *testing.T) {
	l, err := findLayout()
	require.NoError(t, err)
	swapped := l
	swapped.mtrue, swapped.mfalse = l.mfalse, l.mtrue
	assert.ErrorIs(t, rawSelfCheck(&swapped), ErrMutationUnreadable)
}

// An operation bttl does not know is refused, never dropped.
func TestMutationReaderRefusesUnknownOps(t *testing.T) {
	l, err := layout()
	require.NoError(t, err)
	for name, pb := range map[string]*btpb.Mutation{
		"no operation": {},
		"AddToCell with a float input": {Mutation: &btpb.Mutation_AddToCell_{AddToCell: &btpb.Mutation_AddToCell{
			FamilyName:      "f",
			ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: []byte("c")}},
			Timestamp:       &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: 1000}},
			Input:           &btpb.Value{Kind: &btpb.Value_FloatValue{FloatValue: 1.5}},
		}}},
		"MergeToCell without a timestamp": {Mutation: &btpb.Mutation_MergeToCell_{MergeToCell: &btpb.Mutation_MergeToCell{
			FamilyName:      "f",
			ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: []byte("c")}},
			Input:           &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: []byte("x")}},
		}}},
	} {
		m := bigtable.NewMutation()
		m.Set("f", "ok", 1000, []byte("v"))
		ops := (*[]*btpb.Mutation)(opsPointer(l, m))
		*ops = append(*ops, pb)
		got, e := l.borrow(m, nil)
		assert.Nil(t, got, name)
		require.NotNil(t, e, name)
		assert.ErrorIs(t, e.err, ErrMutationUnreadable, name)
		tbl := &Table{name: "t", clock: fixedClock(time.Now()), schema: Schema{"f": strategy.Unmanaged()}, layout: l}
		_, err := tbl.BuildAPI("row", m)
		assert.ErrorIs(t, err, ErrMutationUnreadable, name)
	}
	rmw := bigtable.NewReadModifyWrite()
	rules := (*[]*btpb.ReadModifyWriteRule)(rmwOpsPointer(l, rmw))
	*rules = append(*rules, &btpb.ReadModifyWriteRule{FamilyName: "f"})
	_, e := l.readRMW(rmw)
	require.NotNil(t, e)
	assert.ErrorIs(t, e.err, ErrMutationUnreadable)
}

// A method set other than the known one fails closed.
func TestMutationReaderRefusesUnknownMethodSet(t *testing.T) {
	mt := reflect.TypeOf((*bigtable.Mutation)(nil))
	assert.ErrorIs(t, knownMethods(mt, "Set"), ErrMutationUnreadable)
	assert.NoError(t, knownMethods(mt, "AddIntToCell", "DeleteCellsInColumn", "DeleteCellsInFamily", "DeleteRow",
		"DeleteTimestampRange", "MergeBytesToCell", "Set"))
}

// The cells the write path sends are the protos the client's own Set
// builds, for every timestamp and column shape (qualifiers held in the
// record and longer ones), whether a Mutation's own cells are sent in
// place or built anew; without the checked layout it uses Set.
func TestSentCellsAreTheClientsSetCells(t *testing.T) {
	cells := []struct {
		family, column string
		ts             bigtable.Timestamp
		value          []byte
	}{
		{"f", "c", 5000, []byte("v")},
		{"f", "", bigtable.ServerTime, nil},
		{"g", "a longer qualifier \x00\xff", 1234567, []byte{}},
		{"f", "c", 0, []byte("x")},
		{"f", "exactly-16-bytes", 2000, []byte("y")},
		{"f", "seventeen-bytes!!", 3000, []byte("z")},
	}
	m := new(Mutation)
	want := bigtable.NewMutation()
	for _, c := range cells {
		m.Set(c.family, c.column, c.ts, c.value)
		want.Set(c.family, c.column, c.ts, c.value)
	}
	l, err := layout()
	require.NoError(t, err)
	for _, mode := range []string{"in place", "built anew", "without the layout"} {
		sendWith := l
		if mode == "without the layout" {
			sendWith = nil
		}
		s := newSentMutation(sendWith, m, len(m.ops), mode == "in place")
		var o op
		for i := range m.ops {
			require.Nil(t, m.decode(i, &o))
			s.set(i, &o, o.ts)
		}
		got, exp := l.opsOf(s.finish()), l.opsOf(want)
		require.Len(t, got, len(exp))
		for i := range exp {
			assert.True(t, proto.Equal(exp[i], got[i]), "%s, cell %d: got %v, want %v", mode, i, got[i], exp[i])
			assert.Equal(t, mode == "in place", got[i] == m.ops[i], "%s, cell %d: sent as recorded", mode, i)
		}
	}
}

// The TableAPI path sends the caller's own operations where the rewrite
// leaves them as they are (explicit timestamps, deletes, unmanaged cells),
// builds a new cell where it assigns the timestamp (ServerTime on a
// managed family), and never writes to the caller's operations.
func TestTableAPISharesUnchangedOperations(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tbl := &Table{name: "t", clock: fixedClock(now), schema: Schema{
		"def":   strategy.DefaultExpiry(time.Hour),
		"plain": strategy.Unmanaged(),
	}, layout: checkedLayout(t)}
	explicit := bigtable.Time(now.Add(-time.Minute)).TruncateToMilliseconds()
	src := bigtable.NewMutation()
	src.Set("def", "a", explicit, []byte("1"))
	src.Set("def", "b", bigtable.ServerTime, []byte("2"))
	src.Set("plain", "c", 7000, []byte("3"))
	src.DeleteCellsInColumn("plain", "d")
	src.DeleteTimestampRange("def", "e", 1000, 2000)
	l, err := layout()
	require.NoError(t, err)
	before := make([]*btpb.Mutation, 0, 5)
	for _, pb := range l.opsOf(src) {
		before = append(before, proto.Clone(pb).(*btpb.Mutation))
	}
	sent, err := tbl.BuildAPI("row", src)
	require.NoError(t, err)
	in, out := l.opsOf(src), l.opsOf(sent)
	require.Len(t, out, len(in))
	for _, i := range []int{0, 2, 3, 4} {
		assert.Same(t, in[i], out[i], "operation %d is sent as the caller's", i)
	}
	assert.NotSame(t, in[1], out[1], "a cell whose timestamp the library assigns is a new one")
	assigned, err := strategy.DefaultExpiry(time.Hour).DefaultTimestamp(now)
	require.NoError(t, err)
	assert.Equal(t, int64(assigned), out[1].GetSetCell().GetTimestampMicros())
	for i := range before {
		assert.True(t, proto.Equal(before[i], in[i]), "caller's operation %d unchanged", i)
	}
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// A *bigtable.Mutation the rewrite leaves as it is, every operation, is
// sent itself; one cell to rewrite makes a new one, and the caller's is
// left as it was.
func TestTableAPISendsAnUnchangedMutationItself(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tbl := &Table{name: "t", clock: fixedClock(now), schema: Schema{
		"def":   strategy.DefaultExpiry(time.Hour),
		"plain": strategy.Unmanaged(),
	}, layout: checkedLayout(t)}
	src := bigtable.NewMutation()
	src.Set("def", "a", bigtable.Time(now.Add(-time.Minute)), []byte("1"))
	src.Set("plain", "c", 7000, []byte("3"))
	src.DeleteCellsInColumn("plain", "d")
	sent, err := tbl.BuildAPI("row", src)
	require.NoError(t, err)
	assert.Same(t, src, sent)

	src.Set("def", "b", bigtable.ServerTime, []byte("2"))
	sent, err = tbl.BuildAPI("row", src)
	require.NoError(t, err)
	assert.NotSame(t, src, sent)
	l, err := layout()
	require.NoError(t, err)
	assert.Len(t, l.opsOf(sent), 4)
	assert.Equal(t, int64(bigtable.ServerTime), l.opsOf(src)[3].GetSetCell().GetTimestampMicros())
}

// checkedLayout is the layout a client made now would keep.
func checkedLayout(t *testing.T) *rawLayout {
	t.Helper()
	l, err := layout()
	require.NoError(t, err)
	return l
}
