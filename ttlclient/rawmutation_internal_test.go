package ttlclient

import (
	"reflect"
	"testing"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		got, e := l.translate(m, nil)
		assert.Nil(t, got, name)
		require.NotNil(t, e, name)
		assert.ErrorIs(t, e.err, ErrMutationUnreadable, name)
	}
	rmw := bigtable.NewReadModifyWrite()
	rules := (*[]*btpb.ReadModifyWriteRule)(rmwOpsPointer(l, rmw))
	*rules = append(*rules, &btpb.ReadModifyWriteRule{FamilyName: "f"})
	_, e := l.translateRMW(rmw)
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
