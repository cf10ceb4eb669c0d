package changestream_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/bttest_harness/changestreams"
	"github.com/bttl/bttl/changestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A seeded random history of writes, splits, merges, dropped streams and
// (in the "kills" and "workers" variants) workers killed and restarted;
// "workers" runs two sharing a BigtableStore. Without kills every change
// arrives exactly once; with them at least once, and at most once more per
// kill. BTTL_SEED replays a seed.
func TestRandomHistory(t *testing.T) {
	for _, v := range []struct {
		name    string
		kills   bool
		workers int
		store   string
	}{{"nokills", false, 1, "memory"}, {"kills", true, 1, "memory"}, {"workers", true, 2, "bigtable"}} {
		kills := v.kills
		t.Run(v.name, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			if s := os.Getenv("BTTL_SEED"); s != "" {
				var err error
				seed, err = strconv.ParseUint(s, 10, 64)
				require.NoError(t, err)
			}
			t.Logf("seed %d (BTTL_SEED=%d replays it)", seed, seed)
			rng := rand.New(rand.NewPCG(seed, 38))
			e := newEnv(t, changestreams.Config{SplitKeys: []string{"m"}}, bigtable.NoGcPolicy())
			store := newStore(t, e, v.store)
			newC := func(i int) *changestream.Consumer {
				c, err := changestream.NewConsumer(e.conn, changestreams.DefaultProject, changestreams.DefaultInstance, "t", store,
					fastOpts(e, changestream.WithCheckpointEvery(1+rng.IntN(3)), changestream.WithWorker(i, v.workers))...)
				require.NoError(t, err)
				return c
			}
			s := newSink()
			stops := make([]func() error, v.workers)
			for i := range stops {
				stops[i] = run(t, newC(i), s.handle)
			}
			writes, nkills := 0, 0
			for step := 0; step < 150; step++ {
				key := string(rune('a' + rng.IntN(26)))
				switch op := rng.IntN(20); {
				case op < 14:
					e.set(t, key+strconv.Itoa(step), int64(step+1), "v")
					writes++
				case op < 16:
					_ = e.srv.Split("t", key) // refused when key is a boundary
				case op < 18:
					_ = e.srv.Merge("t", key) // refused unless two partitions meet at key
				case op < 19:
					e.srv.DropStreams()
				default:
					if kills {
						i := rng.IntN(v.workers)
						require.ErrorIs(t, stops[i](), context.Canceled)
						nkills++
						stops[i] = run(t, newC(i), s.handle)
					}
				}
			}
			waitFor(t, "every write", func() bool { return s.distinct() == writes })
			for _, stop := range stops {
				require.ErrorIs(t, stop(), context.Canceled)
			}
			t.Logf("%d writes, %d kills, partitions at the end %q", writes, nkills, e.srv.Partitions("t"))
			for k, n := range s.dups() {
				if !kills {
					t.Errorf("%s delivered %d times with no kill", k, n)
				}
				assert.LessOrEqual(t, n, 1+nkills, "%s", k)
			}
		})
	}
}
