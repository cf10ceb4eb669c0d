package ttlclient_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// The instant forms race each other and a writer, on both servers:
// ExpireColumnAt GT to +1h and +2h, ExpireRowAt LT to +1m,
// ReadRowAndExpireAt to +90m, and a write of a new value with a 30m TTL.
// Whatever the order, every move is atomic: each value is stored once
// (moved, never copied, nothing left half-moved), and a value gone from
// storage was deleted by a move that said so: the write is gone only when
// an ExpireRowAt shortening reported ExpireDeleted for a cell (the write,
// sorted below a cell already lifted over it, is an older version there,
// which a shortening shifts into the past: the column forms' documented
// spacing). BTTL_SEED replays a run. Run with -race.
func TestInstantFormsRace(t *testing.T) {
	rounds := 30
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BTTL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("instant forms race: seed %d, %d rounds per server (replay with BTTL_SEED=%d)", seed, rounds, seed)
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		schema := strategy.Schema{
			famOne: strategy.OneSecond(),
			famDef: strategy.DefaultExpiry(defaultD),
			"wt":   strategy.OneSecond(strategy.WithWriteTime()),
		}
		tbl := h.MustTable(t, "instantrace", schema)
		rng := rand.New(rand.NewPCG(seed, 37))
		now := h.Clock.Now()
		for i := 0; i < rounds; i++ {
			row := "r" + strconv.Itoa(i)
			deleted := false
			fam := []string{famOne, famDef, "wt"}[rng.IntN(3)]
			lcSet(t, tbl, row, fam, "c", "v", 10*time.Minute)
			ops := []func(){
				func() {
					_, err := tbl.ExpireColumnAt(ctx, row, fam, "c", now.Add(time.Hour), ttlclient.OnlyIfLater)
					assert.NoError(t, err)
				},
				func() {
					_, err := tbl.ExpireColumnAt(ctx, row, fam, "c", now.Add(2*time.Hour), ttlclient.OnlyIfLater)
					assert.NoError(t, err)
				},
				func() {
					var rs []ttlclient.ExpireCellResult
					_, err := tbl.ExpireRowAt(ctx, row, now.Add(time.Minute), ttlclient.OnlyIfEarlier, ttlclient.ExpireResultsTo(&rs))
					assert.NoError(t, err)
					for _, r := range rs {
						deleted = deleted || r.Result == ttlclient.ExpireDeleted
					}
				},
				func() {
					_, _, err := tbl.ReadRowAndExpireAt(ctx, row, nil, now.Add(90*time.Minute))
					assert.NoError(t, err)
				},
				func() { lcSet(t, tbl, row, fam, "c", "new", 30*time.Minute) },
			}
			rng.Shuffle(len(ops), func(a, b int) { ops[a], ops[b] = ops[b], ops[a] })
			var wg sync.WaitGroup
			for _, op := range ops {
				wg.Add(1)
				go func() {
					defer wg.Done()
					op()
				}()
			}
			wg.Wait()
			stored, err := h.Stored(ctx, "instantrace", row)
			require.NoError(t, err)
			seen := map[string]int{}
			var desc []string
			for _, it := range stored[fam] {
				seen[string(it.Value)]++
				desc = append(desc, string(it.Value)+"@"+time.UnixMicro(int64(it.Timestamp)).Sub(now).String())
			}
			assert.LessOrEqual(t, seen["v"], 1, "round %d %s: moved, never copied: %v", i, fam, desc)
			assert.LessOrEqual(t, seen["new"], 1, "round %d %s: moved, never copied: %v", i, fam, desc)
			if seen["new"] == 0 {
				assert.True(t, deleted, "round %d %s: the write is gone but no move deleted a cell: %v", i, fam, desc)
			}
		}
	})
}
