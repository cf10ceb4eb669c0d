package scanjob_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	scan "github.com/bttl/bttl/internal/scanjob"
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

// RunResumedRanges hands a range read again the result an earlier run
// recorded for it, and nil to a range read for the first time: a result
// counting events (cells moved) can carry the earlier attempts' over.
func TestResumedRangeGetsItsRecordedResult(t *testing.T) {
	tbl := newTable(t)
	load(t, tbl, 100, 1, func(i int) string { return fmt.Sprintf("k%04d", i) })
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	const bad = "k0042"
	run := func() map[string]string {
		priors := map[string]string{}
		var mu = make(chan struct{}, 1)
		_, err := scan.RunResumedRanges(context.Background(), tbl, "t", func(rg scan.Range, prior json.RawMessage) (scan.RowFunc, func() (json.RawMessage, error)) {
			mu <- struct{}{}
			priors[rg.String()] = string(prior)
			<-mu
			hit := false
			return func(_ context.Context, r bigtable.Row) error {
					hit = hit || r.Key() == bad
					return nil
				}, func() (json.RawMessage, error) {
					if hit {
						n := 1
						if len(prior) > 0 {
							require.NoError(t, json.Unmarshal(prior, &n))
							n++
						}
						return json.RawMessage(fmt.Sprint(n)), fmt.Errorf("%w: attempt %d", scan.ErrUnfinished, n)
					}
					return nil, nil
				}
		}, scan.WithCheckpoint(ckpt, "job"), scan.WithShardKeys(), scan.WithRanges(4))
		require.NoError(t, err)
		return priors
	}
	for _, p := range run() {
		assert.Empty(t, p, "a first run: nothing recorded")
	}
	second := run()
	require.Len(t, second, 1, "only the unfinished range is read again")
	for _, p := range second {
		assert.Equal(t, "1", p, "the first run's result")
	}
	for _, p := range run() {
		assert.Equal(t, "2", p, "the second run's, which carried the first's over")
	}
}
