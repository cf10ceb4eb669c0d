package sessionserver

import (
	"testing"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// bttest sends every value whole and never resets a row: these shapes of
// ReadRowsResponse.CellChunk, which a real server may send, are checked
// here.
func TestMergeRowChunkShapes(t *testing.T) {
	fam := func(s string) *wrapperspb.StringValue { return wrapperspb.String(s) }
	qual := func(s string) *wrapperspb.BytesValue { return wrapperspb.Bytes([]byte(s)) }
	type chunk = btpb.ReadRowsResponse_CellChunk
	commit := &btpb.ReadRowsResponse_CellChunk_CommitRow{CommitRow: true}
	reset := &btpb.ReadRowsResponse_CellChunk_ResetRow{ResetRow: true}

	got, err := mergeRow([]*chunk{
		{RowKey: []byte("r"), FamilyName: fam("a"), Qualifier: qual("x"), TimestampMicros: 2000, Value: []byte("he"), ValueSize: 5},
		{Value: []byte("ll"), ValueSize: 5},
		{Value: []byte("o")},
		{TimestampMicros: 1000, Value: []byte("old"), Labels: []string{"l"}},
		{Qualifier: qual("y"), Value: []byte("y")},
		{FamilyName: fam("b"), Qualifier: qual("z"), Value: []byte("z"), RowStatus: commit},
	})
	require.NoError(t, err)
	want := &btpb.Row{Key: []byte("r"), Families: []*btpb.Family{
		{Name: "a", Columns: []*btpb.Column{
			{Qualifier: []byte("x"), Cells: []*btpb.Cell{
				{TimestampMicros: 2000, Value: []byte("hello")},
				{TimestampMicros: 1000, Value: []byte("old"), Labels: []string{"l"}},
			}},
			{Qualifier: []byte("y"), Cells: []*btpb.Cell{{Value: []byte("y")}}},
		}},
		{Name: "b", Columns: []*btpb.Column{{Qualifier: []byte("z"), Cells: []*btpb.Cell{{Value: []byte("z")}}}}},
	}}
	require.True(t, proto.Equal(want, got), "got %v", got)

	got, err = mergeRow([]*chunk{
		{RowKey: []byte("r"), FamilyName: fam("a"), Qualifier: qual("x"), Value: []byte("dropped")},
		{RowStatus: reset},
		{RowKey: []byte("r"), FamilyName: fam("a"), Qualifier: qual("x"), Value: []byte("kept"), RowStatus: commit},
	})
	require.NoError(t, err)
	require.Equal(t, "kept", string(got.GetFamilies()[0].GetColumns()[0].GetCells()[0].GetValue()))
	require.Len(t, got.GetFamilies()[0].GetColumns()[0].GetCells(), 1)

	got, err = mergeRow(nil)
	require.NoError(t, err)
	require.Nil(t, got, "no chunks: no row")

	for name, bad := range map[string][]*chunk{
		"no row key":        {{FamilyName: fam("a"), Qualifier: qual("x"), RowStatus: commit}},
		"no column":         {{RowKey: []byte("r"), FamilyName: fam("a"), RowStatus: commit}},
		"second row":        {{RowKey: []byte("r"), FamilyName: fam("a"), Qualifier: qual("x"), RowStatus: commit}, {RowKey: []byte("s"), FamilyName: fam("a"), Qualifier: qual("x"), RowStatus: commit}},
		"new key in a row":  {{RowKey: []byte("r"), FamilyName: fam("a"), Qualifier: qual("x")}, {RowKey: []byte("s"), Qualifier: qual("y"), RowStatus: commit}},
		"not committed":     {{RowKey: []byte("r"), FamilyName: fam("a"), Qualifier: qual("x")}},
		"commit in a value": {{RowKey: []byte("r"), FamilyName: fam("a"), Qualifier: qual("x"), Value: []byte("a"), ValueSize: 2, RowStatus: commit}},
	} {
		_, err := mergeRow(bad)
		require.Error(t, err, name)
	}
}
