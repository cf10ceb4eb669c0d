package ttlclient_test

import (
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

// Building and rewriting a 10-cell mutation costs at most 2 allocations more
// than building the bigtable.Mutation with the same cells.
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
			assert.LessOrEqual(t, lib, raw+2, "build+rewrite of 10 cells: raw %v allocs", raw)
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
// still lands after the TTL filter.
func TestReadOptionsKeepsCallerFilterLast(t *testing.T) {
	tbl := openOffline(t, fourFamilySchema())
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
