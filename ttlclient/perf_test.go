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

// Building and rewriting a 10-cell mutation costs 14 allocations (the
// library's Mutation and its operation slice, grown once, a record per
// cell that is also the cell sent, and the sent bigtable.Mutation), where
// building the bigtable.Mutation with the same cells costs 46: four per
// cell and five for growing the ops slice.
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
			assert.LessOrEqual(t, lib, raw, "build+rewrite of 10 cells: raw %v allocs", raw)
			assert.LessOrEqual(t, lib, 14.0, "build+rewrite of 10 cells")
		})
	}
}

// Sizing the sent mutation's ops reads bigtable.Mutation's layout; on a
// client version whose layout bttl cannot read, the build is the same
// mutation, only grown by appending.
func TestMutationBuildWithoutRawLayout(t *testing.T) {
	for _, s := range benchStrategies() {
		t.Run(s.name, func(t *testing.T) {
			clock := bttestharness.NewManualClock(time.Now())
			tbl := openOffline(t, strategy.Schema{benchFam: s.policy}, ttlclient.WithClock(clock))
			sized, err := tbl.Build("row", ttlMutation(s))
			require.NoError(t, err)
			restore := ttlclient.BreakMutationReader()
			defer restore()
			// A client made now fails the check: its tables build without
			// the layout.
			broken := openOffline(t, strategy.Schema{benchFam: s.policy}, ttlclient.WithClock(clock), ttlclient.WithLogger(quietLogger()))
			grown, err := broken.Build("row", ttlMutation(s))
			require.NoError(t, err)
			assert.Equal(t, grown, sized)
		})
	}
}

// A read's filter costs at most one allocation per managed family while the
// clock stays in one millisecond (the filter and its option are reused), and
// the rebuild for a new millisecond stays bounded.
func TestReadFilterAllocs(t *testing.T) {
	schema := fourFamilySchema()
	managed := 0
	for _, p := range schema {
		if p.Managed() {
			managed++
		}
	}
	clock := bttestharness.NewManualClock(time.Now())
	tbl := openOffline(t, schema, ttlclient.WithClock(clock))
	read := func() {
		opts, err := tbl.ReadOptions()
		if err != nil || len(opts) != 1 {
			panic(err)
		}
		benchSinkOpt = opts[0]
	}
	same := testing.AllocsPerRun(100, read)
	assert.LessOrEqual(t, same, float64(managed), "read in the same millisecond")
	assert.LessOrEqual(t, same, 1.0, "only the returned slice")

	// Every read in a new millisecond: one array, a range and a chain per
	// age family, the interleave, the option and the caches.
	age := 2
	moving := testing.AllocsPerRun(100, func() {
		clock.Advance(time.Millisecond)
		read()
	})
	assert.LessOrEqual(t, moving, float64(6+2*age), "read in a new millisecond")

	// A caller's filter adds its chain: one allocation for the filters and
	// slice, one for the chain, one for the option.
	user := bigtable.RowFilter(bigtable.LatestNFilter(1))
	limit := bigtable.LimitRows(10)
	withUser := testing.AllocsPerRun(100, func() {
		opts, err := tbl.ReadOptions(user, limit)
		if err != nil || len(opts) != 2 {
			panic(err)
		}
		benchSinkOpt = opts[1]
	})
	t.Logf("allocs per read: same millisecond %.0f, new millisecond %.0f, with a caller's filter %.0f", same, moving, withUser)
	assert.LessOrEqual(t, withUser, float64(managed), "read with a caller's filter")
}

// The caller's RowFilter is read in place, without reflect's copy, and
// still lands after the TTL filter. The clock is fixed so that the read and
// the expected filter see the same millisecond.
func TestReadOptionsKeepsCallerFilterLast(t *testing.T) {
	clock := bttestharness.NewManualClock(time.Now())
	tbl := openOffline(t, fourFamilySchema(), ttlclient.WithClock(clock))
	user := bigtable.LatestNFilter(2)
	limit := bigtable.LimitRows(3)
	opts, err := tbl.ReadOptions(bigtable.RowFilter(bigtable.PassAllFilter()), limit, bigtable.RowFilter(user))
	require.NoError(t, err)
	require.Len(t, opts, 2)
	assert.Equal(t, limit, opts[0])
	want := bigtable.RowFilter(bigtable.ChainFilters(tbl.Filters().TTL(tbl.Now()), user))
	assert.Equal(t, want, opts[1])
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
	m.Set("a.b", "short", ttlclient.Auto, []byte("1"), ttlclient.WithTTL(time.Minute))
	m.Set("a.b", "long", ttlclient.Auto, []byte("2"), ttlclient.WithTTL(time.Hour))
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
