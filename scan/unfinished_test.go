package scan_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/scan"
)

// A range whose done returns an error wrapping ErrUnfinished is read to
// its end, its result recorded, and left unfinished: the scan goes on, and
// a rerun with the checkpoint reads that range again, and only it.
func TestUnfinishedRangeIsReadAgain(t *testing.T) {
	tbl := newTable(t)
	keys := load(t, tbl, 200, 1, func(i int) string { return fmt.Sprintf("k%04d", i) })
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	const bad = "k0123"
	run := func() (*scan.Summary, []string) {
		var seen []string
		var mu = make(chan struct{}, 1)
		sum, err := scan.RunRanges(context.Background(), tbl, "t", func(scan.Range) (scan.RowFunc, func() (json.RawMessage, error)) {
			hit := false
			return func(_ context.Context, r bigtable.Row) error {
					mu <- struct{}{}
					seen = append(seen, r.Key())
					<-mu
					hit = hit || r.Key() == bad
					return nil
				}, func() (json.RawMessage, error) {
					if hit {
						return json.RawMessage(`{"left":1}`), fmt.Errorf("%w: 1 left", scan.ErrUnfinished)
					}
					return nil, nil
				}
		}, scan.WithCheckpoint(ckpt, "job"), scan.WithShardKeys(), scan.WithRanges(8), scan.WithWorkers(2))
		require.NoError(t, err)
		return sum, seen
	}
	sum, seen := run()
	assert.Len(t, seen, len(keys), "the scan went on past the unfinished range")
	assert.False(t, sum.Complete())
	var unfinished []scan.RangeResult
	for _, r := range sum.Ranges {
		if !r.Done {
			unfinished = append(unfinished, r)
		}
	}
	require.Len(t, unfinished, 1)
	assert.True(t, unfinished[0].Range.Contains(bad))
	assert.JSONEq(t, `{"left":1}`, string(unfinished[0].Result), "its result is reported")

	_, seen = run()
	require.NotEmpty(t, seen)
	assert.Contains(t, seen, bad, "the rerun reads the unfinished range again")
	for _, k := range seen {
		assert.True(t, unfinished[0].Range.Contains(k), "%s: only the unfinished range is read again", k)
	}
}
