package ttlclient_test

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Allocation counts are deterministic, unlike timings: these tests guard the
// pure hot paths against regressions in CI.

// A Mutation is a plain list of changes; bttl's rules stamp them directly
// (rules.Table.StampOps, the timestamps on the stack) and the
// bigtable.Mutation sent is built with the client's own methods, one call
// per change, with no private memory read or written. A 10-cell build
// costs what the client's own build does (46: four per cell and five for
// growing the ops slice) plus the Mutation itself (its struct with room
// for 8 changes, and the change list grown once: 2): at most raw + 2
// (issue 34).
func TestMutationBuildAllocs(t *testing.T) {
	for _, s := range benchStrategies() {
		t.Run(s.name, func(t *testing.T) {
			tbl := openOffline(t, strategy.Schema{benchFam: s.policy})
			now := time.Now()
			raw := testing.AllocsPerRun(100, func() {
				ts := s.rawTS(now)
				m := bigtable.NewMutation()
				for _, c := range benchColumns {
					m.Set(benchFam, c, ts, benchValue)
				}
				benchSinkMut = m
			})
			lib := testing.AllocsPerRun(100, func() {
				bm, err := tbl.Build("row", ttlMutation(s))
				if err != nil {
					panic(err)
				}
				benchSinkMut = bm
			})
			t.Logf("raw %.0f allocs, ttlclient %.0f", raw, lib)
			bound := raw + 2
			assert.LessOrEqual(t, lib, bound, "build+rewrite of 10 cells: raw %v allocs", raw)
		})
	}
}

// The managed families' branches select a family by exact name (a column
// range, not a regex): a family whose name a regex would confuse with a
// managed one ("a.b" against "axb") is left untouched, and the managed one
// is still filtered.
func TestFamilySelectionIsExactName(t *testing.T) {
	e := newEnv(t, strategy.Schema{
		"a.b": strategy.OneSecond(),
		"axb": strategy.Unmanaged(),
	})
	m := ttlclient.NewMutation()
	m.SetTTL("a.b", "short", time.Minute, []byte("1"))
	m.SetTTL("a.b", "long", time.Hour, []byte("2"))
	m.Set("axb", "old", 1000, []byte("3")) // a timestamp far in the past
	e.apply(t, "row", m)
	e.h.Clock.Advance(2 * time.Minute)
	got := e.read(t, "row")
	require.Len(t, got, 2, "got %v", got)
	assert.Contains(t, got[0]+got[1], "a.b:long@")
	assert.Contains(t, got[0]+got[1], "axb:old@1000=3")
}

// A read must return exactly the live cells of the managed families and
// every cell of the others (named unmanaged, or not in the schema at all),
// for random timestamps around the bounds and random read times, in both
// forms of the filter: with the table's families read at Open (regex-free),
// and WithoutVerify, where the filter is split at the latest live-from bound
// so that live cells need no family regex, and where the family outside the
// schema is created after Open and must still be read untouched.
func TestSplitFilterKeepsExactlyTheLiveCells(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	schema := strategy.Schema{
		"one":   strategy.OneSecond(),
		"def":   strategy.DefaultExpiry(time.Hour),
		"short": strategy.DefaultExpiry(10 * time.Minute),
		"plain": strategy.Unmanaged(),
	}
	for _, verified := range []bool{true, false} {
		t.Run(fmt.Sprintf("verified=%v", verified), func(t *testing.T) {
			h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
			require.NoError(t, err)
			defer h.Close()
			e := &env{h: h, ctx: context.Background()}
			require.NoError(t, h.CreateTable(e.ctx, "t", schema))
			if verified {
				require.NoError(t, h.Admin.CreateColumnFamily(e.ctx, "t", "extra")) // not in the schema, known at Open
				e.tbl, err = h.Client.Open(context.Background(), "t", schema)
			} else {
				e.tbl, err = h.Client.Open(context.Background(), "t", schema, ttlclient.WithoutVerify(), ttlclient.WithLogger(quietLogger()))
				require.NoError(t, err)
				err = h.Admin.CreateColumnFamily(e.ctx, "t", "extra") // not in the schema, created after Open
			}
			require.NoError(t, err)
			checkLiveCells(t, e, schema, rng)
		})
	}
}

func checkLiveCells(t *testing.T, e *env, schema strategy.Schema, rng *rand.Rand) {
	start := e.h.Clock.Now()
	base := bigtable.Time(start)
	fams := []string{"one", "def", "short", "plain", "extra"}
	// Raw writes: any timestamp, from 2h before now to 2h after, in ms.
	for r := 0; r < 5; r++ {
		m := bigtable.NewMutation()
		for c := 0; c < 40; c++ {
			ts := base + bigtable.Timestamp(rng.Int63n(4*3600_000)-2*3600_000)*1000
			m.Set(fams[rng.Intn(len(fams))], fmt.Sprintf("c%d", c), ts, []byte("v"))
		}
		require.NoError(t, e.tbl.Raw().Apply(e.ctx, fmt.Sprintf("r%d", r), m))
	}
	for round := 0; round < 8; round++ {
		e.h.Clock.Set(start.Add(time.Duration(rng.Int63n(int64(90 * time.Minute)))))
		now := e.now()
		require.NotNil(t, e.tbl.Filters().TTL(now))
		for r := 0; r < 5; r++ {
			row := fmt.Sprintf("r%d", r)
			got := e.read(t, row)
			stored, err := e.h.Stored(e.ctx, e.tbl.Name(), row)
			require.NoError(t, err)
			var want []string
			for fam, items := range stored {
				p, named := schema[fam]
				for _, it := range items {
					if !named || !p.Managed() || p.IsLive(it.Timestamp, now) {
						want = append(want, cellString(it))
					}
				}
			}
			sort.Strings(want)
			assert.Equal(t, want, got, "row %s at now %d, filter %s", row, now, e.tbl.Filters().TTL(now))
		}
	}
}
