package ttlclient_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// steppingClock reads one millisecond later at every call, so that every
// Apply computes timestamps no other Apply does.
type steppingClock struct {
	base time.Time
	n    atomic.Int64
}

func (c *steppingClock) Now() time.Time {
	return c.base.Add(time.Duration(c.n.Add(1)) * time.Millisecond)
}

// A Mutation's cells are sent with their timestamps written in place on
// its first Apply; the same Mutation applied by many goroutines at once,
// and several times in one ApplyBulk, must still write each row with the
// timestamps of its own Apply, never a mix of two. Without the claim
// (Mutation.spent) the race detector (the README's test command runs with
// -race) reports the cells written while another RPC reads them; the data
// checks below catch it when the interleaving mixes two Applies'
// timestamps.
// Each row's two cells come from one clock reading: the one-second cell
// expires at now+1h, the default-expiry cell (D = 1h) is stamped
// now+30m-1h, so the two differ by exactly 90 minutes in every row.
func TestOneMutationAppliedConcurrently(t *testing.T) {
	clock := &steppingClock{base: time.Now()}
	e := newEnv(t, mixedSchema(), ttlclient.WithClock(clock))
	m := ttlclient.NewMutation()
	m.Set(famOne, "c", ttlclient.Auto, []byte("v"), ttlclient.WithTTL(time.Hour))
	m.Set(famDef, "d", ttlclient.Auto, []byte("v"), ttlclient.WithTTL(30*time.Minute))

	const goroutines, rounds, bulkSlots = 8, 6, 3
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*rounds)
	var rows []string
	for g := range goroutines {
		for r := range rounds {
			if r%2 == 0 {
				rows = append(rows, fmt.Sprintf("g%d-r%d", g, r))
			} else {
				for k := range bulkSlots {
					rows = append(rows, fmt.Sprintf("g%d-r%d-%d", g, r, k))
				}
			}
		}
		wg.Go(func() {
			for r := range rounds {
				if r%2 == 0 {
					errs <- e.tbl.Apply(e.ctx, fmt.Sprintf("g%d-r%d", g, r), m)
					continue
				}
				keys := make([]string, bulkSlots)
				muts := make([]*ttlclient.Mutation, bulkSlots)
				for k := range keys {
					keys[k], muts[k] = fmt.Sprintf("g%d-r%d-%d", g, r, k), m
				}
				rowErrs, err := e.tbl.ApplyBulk(e.ctx, keys, muts)
				assert.Nil(t, rowErrs)
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	const apart = bigtable.Timestamp(90 * time.Minute / time.Microsecond)
	seen := map[bigtable.Timestamp]int{}
	for _, row := range rows {
		one := e.storedTimestamp(t, row, famOne, "c")
		def := e.storedTimestamp(t, row, famDef, "d")
		assert.Equal(t, apart, one-def, "row %s: both cells from one Apply's clock reading", row)
		seen[one]++
	}
	// Every Apply read the clock once (ApplyBulk once for all its slots),
	// and no two read the same millisecond.
	assert.Len(t, seen, goroutines*rounds)
	for ts, n := range seen {
		assert.Contains(t, []int{1, bulkSlots}, n, "rows written at %d", ts)
	}
}

// A Mutation applied again is written with the timestamps of the new Apply,
// and the cells written before keep theirs; one changed between Applies is
// written with its new cells (TestMutationRecordsSentOnce: which cells are
// sent in place).
func TestMutationAppliedAgain(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := ttlclient.NewMutation()
	m.Set(famOne, "c", ttlclient.Auto, []byte("v"), ttlclient.WithTTL(time.Hour))
	e.apply(t, "first", m)
	first := e.storedTimestamp(t, "first", famOne, "c")

	e.h.Clock.Advance(time.Minute)
	e.apply(t, "second", m)
	second := e.storedTimestamp(t, "second", famOne, "c")
	assert.Equal(t, first+bigtable.Timestamp(time.Minute/time.Microsecond), second)
	assert.Equal(t, first, e.storedTimestamp(t, "first", famOne, "c"), "the first row keeps its cell")

	m.Set("nosuch", "c", ttlclient.Auto, []byte("v"))
	require.ErrorIs(t, e.tbl.Apply(e.ctx, "refused", m), ttlclient.ErrUnknownFamily)
	assert.Empty(t, e.stored(t, "refused"))

	m2 := ttlclient.NewMutation()
	m2.Set(famOne, "c", ttlclient.Auto, []byte("v"), ttlclient.WithTTL(time.Hour))
	e.apply(t, "third", m2)
	m2.Set(famDef, "d", ttlclient.Auto, []byte("w"))
	e.h.Clock.Advance(time.Minute)
	e.apply(t, "fourth", m2)
	assert.Equal(t, second+bigtable.Timestamp(time.Minute/time.Microsecond), e.storedTimestamp(t, "fourth", famOne, "c"))
	assert.Equal(t, bigtable.Time(e.h.Clock.Now()).TruncateToMilliseconds(), e.storedTimestamp(t, "fourth", famDef, "d"))
}

// The pure build makes one allocation per cell and at most four per
// mutation: the Mutation (none when it stays on the caller's stack), its
// operation slice (grown once past eight), each cell's record, which is
// the cell sent, and the bigtable.Mutation sent.
func TestMutationRecordAllocs(t *testing.T) {
	tbl := openOffline(t, strategy.Schema{benchFam: strategy.OneSecond()})
	for _, cells := range []int{1, 8, 10, 16} {
		allocs := testing.AllocsPerRun(100, func() {
			m := ttlclient.NewMutation()
			for _, c := range benchColumns[:min(cells, len(benchColumns))] {
				m.Set(benchFam, c, ttlclient.Auto, benchValue, ttlclient.WithTTL(time.Hour))
			}
			for range cells - len(benchColumns) {
				m.Set(benchFam, "extra", ttlclient.Auto, benchValue, ttlclient.WithTTL(time.Hour))
			}
			bm, err := tbl.Build("row", m)
			if err != nil {
				panic(err)
			}
			benchSinkMut = bm
		})
		grown := 0
		if cells > 8 {
			grown = 1
		}
		assert.LessOrEqual(t, allocs, float64(cells+3+grown), "%d cells", cells)
		assert.GreaterOrEqual(t, allocs, float64(cells+2+grown), "%d cells", cells)
	}
}
