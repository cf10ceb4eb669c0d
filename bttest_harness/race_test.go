package bttestharness_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
)

// Bttest copies a row for ReadRows but shares the family's sorted column names
// with it, and a write adding a column sorts them in place while the read
// iterates its copy unlocked. -race reports it, and the read comes out torn: a
// column that sorts before the others, added meanwhile, pushes the last one
// out of the reader's view. The harness keeps reads and writes of its
// in-process server apart (issue 14, finding 11).
//
// Every read must see the columns written so far: written in descending
// order, they are always the largest names, without gaps or repeats.
func TestInProcessReadsAreNotTornByConcurrentWrites(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "") // the in-process server
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	tbl := h.Raw.Open("t")
	const n = 200
	col := func(i int) string { return fmt.Sprintf("c%04d", i) }

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := n; i > 0; i-- { // each new column sorts before the others
			m := bigtable.NewMutation()
			m.Set("f", col(i), 1000, []byte("v"))
			if !assert.NoError(t, tbl.Apply(ctx, "r", m)) {
				return
			}
		}
	}()
	var reads int
	var mu sync.Mutex
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				row, err := tbl.ReadRow(ctx, "r")
				if !assert.NoError(t, err) {
					return
				}
				got := row["f"]
				for j, c := range got {
					// The k columns written so far: c(n-k+1) .. c(n).
					if !assert.Equal(t, "f:"+col(n-len(got)+1+j), c.Column, "read %d columns: torn", len(got)) {
						return
					}
				}
				mu.Lock()
				reads++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d writes, %d reads", n, reads)
	row, err := tbl.ReadRow(ctx, "r")
	require.NoError(t, err)
	assert.Len(t, row["f"], n)
}
