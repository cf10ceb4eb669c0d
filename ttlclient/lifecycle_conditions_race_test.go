package ttlclient_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Conditional Expires race each other and a writer, on both servers: a
// session refresh (GT 1h), a "remember me" (GT 2h), a logout (LT 1m) and a
// new value written with a 30m TTL. Whatever the order, the write is
// never lost and every stored cell has the TTL it was written with or
// the target of an Expire that reported ExpireSet: no move happens that
// its caller was not told of, so none acted on a stale condition. (A
// write with a shorter TTL than a cell already stored sorts below it:
// that is the TTL-as-timestamp order, not a move hiding it; on a
// max-versions family such a write is a dead version, which a shortening
// Expire deletes before it moves a cell below it.) BTTL_COND_RACE_ROUNDS (default 100, 30 with -short)
// rounds per server; BTTL_SEED replays one.
func TestConditionalExpiresRace(t *testing.T) {
	rounds := 100
	if testing.Short() {
		rounds = 30
	}
	if s := os.Getenv("BTTL_COND_RACE_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		rounds = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BTTL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("conditional expire race: seed %d, %d rounds per server (replay with BTTL_SEED=%d)", seed, rounds, seed)
	seamServers(t, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		schema := strategy.Schema{
			famOne: strategy.OneSecond(),
			famDef: strategy.DefaultExpiry(defaultD),
			"mv":   strategy.DefaultExpiry(defaultD, strategy.WithMaxVersions(1)),
			"wt":   strategy.OneSecond(strategy.WithWriteTime()),
		}
		tbl := h.MustTable(t, "condrace", schema)
		rng := rand.New(rand.NewPCG(seed, 37))
		for i := 0; i < rounds; i++ {
			row := "r" + strconv.Itoa(i)
			fam := []string{famOne, famDef, "wt", "mv"}[rng.IntN(4)]
			lcSet(t, tbl, row, fam, "c", "v", 10*time.Minute)
			type op struct {
				ttl  time.Duration
				cond ttlclient.ExpireCondition
			}
			ops := []op{{time.Hour, ttlclient.OnlyIfLater}, {2 * time.Hour, ttlclient.OnlyIfLater}, {time.Minute, ttlclient.OnlyIfEarlier}}
			rng.Shuffle(len(ops), func(a, b int) { ops[a], ops[b] = ops[b], ops[a] })
			write := rng.IntN(2) == 0
			results := make([]ttlclient.ExpireResult, len(ops))
			var wg sync.WaitGroup
			for j, o := range ops {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := tbl.Expire(ctx, row, fam, "c", o.ttl, o.cond, ttlclient.ExpireResultTo(&results[j]))
					assert.NoError(t, err)
				}()
			}
			if write {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m := ttlclient.NewMutation()
					m.SetTTL(fam, "c", 30*time.Minute, []byte("new"))
					assert.NoError(t, tbl.Apply(ctx, row, m))
				}()
			}
			wg.Wait()
			_, ok := lcCell(t, tbl, row, fam, "c")
			require.True(t, ok, "round %d: a live cell remains", i)
			stored, err := h.Stored(ctx, "condrace", row)
			require.NoError(t, err)
			// Every stored cell has the TTL it was written with or the
			// target of an Expire that reported it set: no move happened
			// that was not reported, so none passed on a stale condition.
			asked := map[string]map[time.Duration]bool{
				"v":   {10 * time.Minute: true},
				"new": {30 * time.Minute: true},
			}
			for j, o := range ops {
				if results[j] == ttlclient.ExpireSet {
					asked["v"][o.ttl], asked["new"][o.ttl] = true, true
				}
			}
			var found bool
			real := 0
			for _, s := range stored[fam] {
				if strings.HasPrefix(s.Column, fam+":"+strategy.WriteTimePrefix) {
					continue
				}
				real++
				left, err := tbl.RemainingTTL(s)
				require.NoError(t, err)
				assert.True(t, asked[string(s.Value)][left], "round %d: %q has %s, which no reported move gave it", i, s.Value, left)
				found = found || string(s.Value) == "new"
			}
			shortened := false
			for j, o := range ops {
				// A shortening Expire whose condition held purges the dead
				// versions first, whether its move then applies or not.
				shortened = shortened || (o.cond == ttlclient.OnlyIfEarlier && (results[j] == ttlclient.ExpireSet || results[j] == ttlclient.ExpireChanged))
			}
			if fam == "mv" && write && !found {
				// A write sorting below a longer-lived cell is a hidden
				// version there (GC's max-versions rule collects it); a
				// shortening Expire deletes such versions before its move,
				// so they are not revived under the moved cell.
				assert.True(t, shortened, "round %d: the write is gone without a shortening Expire", i)
			} else {
				assert.Equal(t, write, found, "round %d: the write is stored exactly when it was made", i)
			}
			assert.LessOrEqual(t, real, 2, "round %d: no cell duplicated", i)
			if t.Failed() {
				t.Logf("round %d: %s ops %v results %v write %v stored %v", i, fam, ops, results, write, cells(stored))
				return
			}
		}
	})
}

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
