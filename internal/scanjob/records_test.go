package scanjob_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// The checkpoint table's rows expire: its family collects cells older
// than scan.RecordTTL (and keeps one version); a table made before they
// expired (one version, no age) is given the rule at the next checkpoint.
func TestCheckpointRowsExpire(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	want := bigtable.UnionPolicy(bigtable.MaxVersionsPolicy(1), bigtable.MaxAgePolicy(scan.RecordTTL)).String()
	rule := func(table string) string {
		info, err := h.Admin.TableInfo(ctx, table)
		require.NoError(t, err)
		require.Len(t, info.FamilyInfos, 1)
		return info.FamilyInfos[0].FullGCPolicy.String()
	}
	_, err := scan.NewBigtableStore(ctx, h.Raw, h.Admin, "fresh", "k")
	require.NoError(t, err)
	assert.Equal(t, want, rule("fresh"))

	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "legacy",
		ColumnFamilies: map[string]bigtable.Family{"ck": {GCPolicy: bigtable.MaxVersionsPolicy(1)}}}))
	_, err = scan.NewBigtableStore(ctx, h.Raw, h.Admin, "legacy", "k")
	require.NoError(t, err)
	assert.Equal(t, want, rule("legacy"), "a table made before rows expired gets the rule")

	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "own",
		ColumnFamilies: map[string]bigtable.Family{"ck": {GCPolicy: bigtable.MaxVersionsPolicy(3)}}}))
	_, err = scan.NewBigtableStore(ctx, h.Raw, h.Admin, "own", "k")
	require.NoError(t, err)
	assert.Equal(t, bigtable.MaxVersionsPolicy(3).String(), rule("own"), "a rule bttl did not write is left alone")
}

// ListBigtableRecords shows each row with its record, owner and last
// write; RemoveBigtableRecord removes a row only while no run claimed or
// wrote it since it was listed; ParseCheckpoint reads a checkpoint's
// record.
func TestListAndRemoveRecords(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tbl := h.Raw.Open("t")
	load(t, tbl, 100, 1, func(i int) string { return fmt.Sprintf("row%03d", i) })
	before := time.Now().Add(-time.Second)
	for i := 0; i < 2; i++ {
		_, err := scan.Run(ctx, tbl, "t", func(context.Context, bigtable.Row) error { return nil },
			scan.WithShard(i, 2), scan.WithRanges(3), scan.WithCheckpoint("bigtable://ck", map[string]string{"job": "a"}), scan.WithBigtableCheckpoints(h.Raw, h.Admin))
		require.NoError(t, err)
	}
	recs, err := scan.ListBigtableRecords(ctx, h.Raw, "ck", "t#")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	for i, r := range recs {
		assert.Regexp(t, fmt.Sprintf(`^t#[0-9a-f]{16}#%d/2$`, i), r.Key)
		assert.Regexp(t, `^\d+:`, r.Owner)
		assert.True(t, r.Written.After(before), "written %v", r.Written)
		info, err := scan.ParseCheckpoint(r.Record)
		require.NoError(t, err)
		assert.Equal(t, "t", info.Table)
		assert.Equal(t, scan.Shard{Index: i, Count: 2}, info.Shard)
		assert.Equal(t, info.Ranges, info.Done)
		assert.JSONEq(t, `{"job":"a"}`, string(info.Job))
		assert.False(t, info.Updated.IsZero())
	}
	_, err = scan.ParseCheckpoint([]byte(`{"audit":1}`))
	assert.ErrorIs(t, err, scan.ErrCheckpoint)

	// A run claims shard 0's row after the listing: its removal is refused.
	st, err := scan.NewBigtableStore(ctx, h.Raw, h.Admin, "ck", recs[0].Key)
	require.NoError(t, err)
	_, err = st.Open(ctx)
	require.NoError(t, err)
	ok, err := scan.RemoveBigtableRecord(ctx, h.Raw, "ck", recs[0])
	require.NoError(t, err)
	assert.False(t, ok, "a row claimed since the listing is left")
	ok, err = scan.RemoveBigtableRecord(ctx, h.Raw, "ck", recs[1])
	require.NoError(t, err)
	assert.True(t, ok)
	left, err := scan.ListBigtableRecords(ctx, h.Raw, "ck", "")
	require.NoError(t, err)
	require.Len(t, left, 1)
	assert.Equal(t, recs[0].Key, left[0].Key)
}

// WithResumeCheck: a resumed scan reads again each finished range the
// check says no longer holds, and only those.
func TestResumeCheckReadsUndoneRangesAgain(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tbl := h.Raw.Open("t")
	load(t, tbl, 60, 1, func(i int) string { return fmt.Sprintf("row%03d", i) })
	ckpt := t.TempDir() + "/ck"
	run := func(check func(context.Context, scan.Range, json.RawMessage) (bool, error)) *scan.Summary {
		opts := []scan.Option{scan.WithRanges(4), scan.WithCheckpoint(ckpt, "job")}
		if check != nil {
			opts = append(opts, scan.WithResumeCheck(check))
		}
		sum, err := scan.RunRanges(ctx, tbl, "t", func(rg scan.Range) (scan.RowFunc, func() (json.RawMessage, error)) {
			return func(context.Context, bigtable.Row) error { return nil },
				func() (json.RawMessage, error) { return json.Marshal(rg.Start) }
		}, opts...)
		require.NoError(t, err)
		return sum
	}
	first := run(nil)
	require.True(t, first.Complete())
	require.Greater(t, len(first.Ranges), 1)
	undo := first.Ranges[1].Range
	var asked int
	sum := run(func(_ context.Context, rg scan.Range, res json.RawMessage) (bool, error) {
		asked++
		var start string
		require.NoError(t, json.Unmarshal(res, &start))
		assert.Equal(t, rg.Start, start, "the check is given the range's recorded result")
		return rg != undo, nil
	})
	assert.Equal(t, len(first.Ranges), asked)
	assert.Equal(t, 1, sum.Undone)
	assert.True(t, sum.Complete())
	for _, r := range sum.Ranges {
		assert.Equal(t, r.Range != undo, r.Resumed, "%s", r.Range)
	}
	assert.Positive(t, sum.Rows, "the undone range was read again")
}
