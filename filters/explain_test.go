package filters_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// Explain's Returned cells are exactly what the read filter returns, for
// random schemas (write times, version limits, unmanaged and unlisted
// families), random stored cells (companions and reserved qualifiers
// included) and random read times; every other cell carries the reason
// that hides it.
func TestExplainAgreesWithTheReadFilter(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d (the rng of this test)", seed)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	defer h.Close()

	policies := []strategy.Policy{
		strategy.OneSecond(), strategy.OneSecond(strategy.WithMaxVersions(2)),
		strategy.OneSecond(strategy.WithWriteTime()), strategy.OneSecond(strategy.WithWriteTime(), strategy.WithMaxVersions(1)),
		strategy.DefaultExpiry(time.Hour), strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime()),
		strategy.DefaultExpiry(10*time.Minute, strategy.WithMaxVersions(1)),
		strategy.OneSecond(strategy.WithIdleTTL(30*time.Minute, strategy.DefaultIdleDebounce)),
		strategy.Sequence(1), strategy.Sequence(3), strategy.Unmanaged(),
	}
	names := []string{"a", "b", "c", "d"}
	base := bigtable.Time(h.Clock.Now())
	base -= base % 1000
	seen := map[filters.Visibility]int{}
	for round := 0; round < 20; round++ {
		table := fmt.Sprintf("t%d", round)
		schema := strategy.Schema{}
		for _, n := range names[:3] { // "d" is never in the schema
			schema[n] = policies[rng.Intn(len(policies))]
		}
		require.NoError(t, h.Admin.CreateTable(ctx, table))
		for _, n := range names {
			require.NoError(t, h.Admin.CreateColumnFamily(ctx, table, n))
		}
		b, err := filters.New(schema, filters.WithFamilies(names))
		require.NoError(t, err)
		raw := h.Raw.Open(table)
		for r := 0; r < 3; r++ {
			m := bigtable.NewMutation()
			for c := 0; c < 30; c++ {
				fam := names[rng.Intn(len(names))]
				col := fmt.Sprintf("c%d", rng.Intn(4))
				ts := base + bigtable.Timestamp(rng.Int63n(4*3600_000)-2*3600_000)*1000
				if rng.Intn(10) == 0 {
					ts = bigtable.Timestamp(rng.Int63n(5)+1) * 1000 // sequence numbers
				}
				m.Set(fam, col, ts, []byte("v"))
				switch rng.Intn(6) {
				case 0: // its companion, a valid one
					m.Set(fam, strategy.WriteTimeColumn(col), ts, strategy.WriteTimeValue(base))
				case 1: // a broken companion
					m.Set(fam, strategy.WriteTimeColumn(col), ts, []byte("garbage"))
				case 2: // a reserved qualifier that is no companion
					m.Set(fam, "\xff\xffother", ts, []byte("x"))
				}
			}
			require.NoError(t, raw.Apply(ctx, fmt.Sprintf("r%d", r), m))
		}
		for k := 0; k < 4; k++ {
			now := base + bigtable.Timestamp(rng.Int63n(3*3600_000_000)-3600_000_000)
			var want, got []string
			err := raw.ReadRows(ctx, bigtable.InfiniteRange(""), func(row bigtable.Row) bool {
				for _, c := range filters.Explain(schema, row, now) {
					seen[c.Visibility]++
					if c.Visibility == filters.Returned {
						got = append(got, fmt.Sprintf("%s/%s:%q@%d", row.Key(), c.Family, c.Column, c.Timestamp))
					} else {
						assert.NotEmpty(t, c.Reason, "a hidden cell says why: %+v", c)
					}
				}
				return true
			})
			require.NoError(t, err)
			err = raw.ReadRows(ctx, bigtable.InfiniteRange(""), func(row bigtable.Row) bool {
				for fam, items := range row {
					for _, it := range items {
						want = append(want, fmt.Sprintf("%s/%s:%q@%d", row.Key(), fam, it.Column[len(fam)+1:], it.Timestamp))
					}
				}
				return true
			}, bigtable.RowFilter(b.TTL(now)))
			require.NoError(t, err)
			sort.Strings(want)
			sort.Strings(got)
			require.Equal(t, want, got, "round %d, schema %v, now %d", round, schema, now)
		}
	}
	for _, v := range []filters.Visibility{filters.Returned, filters.Expired, filters.ExcessVersion, filters.Companion, filters.Reserved} {
		assert.Positive(t, seen[v], "visibility %s never came up", v)
	}
}

// A report survives its JSON form exactly: a companion's qualifier is not
// UTF-8, times are RFC 3339.
func TestCellReportJSONRoundTrip(t *testing.T) {
	now := bigtable.Time(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	schema := strategy.Schema{"s": strategy.OneSecond(strategy.WithWriteTime(), strategy.WithMaxVersions(1)), "q": strategy.Sequence(2)}
	row := bigtable.Row{
		"s": {
			{Column: "s:tok", Timestamp: now + 3600_000_000, Value: []byte("new")},
			{Column: "s:tok", Timestamp: now + 1800_000_000, Value: []byte("old")},
			{Column: "s:tok", Timestamp: now - 1000, Value: []byte("gone")},
			{Column: "s:" + strategy.WriteTimeColumn("tok"), Timestamp: now + 3600_000_000, Value: strategy.WriteTimeValue(now - 5000_000)},
		},
		"q":     {{Column: "q:rev", Timestamp: now, Value: []byte("cbt")}, {Column: "q:rev", Timestamp: 7000, Value: []byte("seven")}},
		"other": {{Column: "other:x", Timestamp: 5, Value: []byte("u")}},
	}
	reports := filters.Explain(schema, row, now)
	require.Len(t, reports, 7)
	got := map[string]filters.Visibility{}
	for _, r := range reports {
		got[fmt.Sprintf("%s/%s", r.Family, r.Value)] = r.Visibility
	}
	assert.Equal(t, map[string]filters.Visibility{
		"other/u": filters.Returned, "q/cbt": filters.Returned, "q/seven": filters.Returned,
		"s/new": filters.Returned, "s/old": filters.ExcessVersion, "s/gone": filters.ExcessVersion, // beyond N first, as audit counts it
		"s/" + string(strategy.WriteTimeValue(now-5000_000)): filters.Companion,
	}, got)
	for _, r := range reports {
		if r.Family == "s" && string(r.Value) == "new" {
			assert.Equal(t, time.UnixMicro(int64(now-5000_000)).UTC(), r.WriteTime, "write time from the companion")
			assert.Equal(t, time.Hour, r.Remaining)
		}
		if r.Family == "q" && string(r.Value) == "cbt" {
			assert.Contains(t, r.Reason, "real timestamp", "a real timestamp in a sequence family is pointed out")
		}
		if r.Family == "other" {
			assert.False(t, r.Listed)
		}
	}
	data, err := json.Marshal(reports)
	require.NoError(t, err)
	var back []filters.CellReport
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, reports, back)
}

// A cell expiring more than ~292 years out had a negative remaining TTL (the
// microseconds overflowed a time.Duration), and its report could not be
// written as JSON (an expiry past year 9999) (issue 35 item 7).
func TestExplainFarFutureExpiry(t *testing.T) {
	now := bigtable.Time(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	far := bigtable.Timestamp(time.Date(12000, 2, 29, 0, 0, 0, 0, time.UTC).UnixMicro()) // bigtable.Time overflows past 2262
	for _, ts := range []bigtable.Timestamp{far, bigtable.Timestamp(math.MaxInt64 / 1000 * 1000)} {
		row := bigtable.Row{"s": {{Column: "s:c", Timestamp: ts, Value: []byte("v")}}}
		c := filters.Explain(strategy.Schema{"s": strategy.OneSecond()}, row, now)[0]
		assert.Equal(t, filters.Returned, c.Visibility)
		assert.Equal(t, time.Duration(math.MaxInt64), c.Remaining, "saturated, not negative")
		assert.Contains(t, c.Reason, "left)")
		assert.NotContains(t, c.Reason, "(-")
		b, err := json.Marshal(c)
		require.NoError(t, err)
		var back filters.CellReport
		require.NoError(t, json.Unmarshal(b, &back), string(b))
		assert.True(t, c.Expiry.Equal(back.Expiry), "%s: %s", b, back.Expiry)
		assert.Equal(t, c.Remaining, back.Remaining)
	}
}

// A read refreshes the newest cell of a column only
// (docs/design.md#time-to-idle); Explain said older versions were refreshed
// too (issue 35 item 7).
func TestExplainIdleRefreshNewestOnly(t *testing.T) {
	now := bigtable.Time(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	p := strategy.OneSecond(strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce))
	row := bigtable.Row{"s": {
		{Column: "s:c", Timestamp: now + 60_000_000, Value: []byte("new")},
		{Column: "s:c", Timestamp: now + 30_000_000, Value: []byte("old")},
	}}
	cells := filters.Explain(strategy.Schema{"s": p}, row, now)
	require.Len(t, cells, 2)
	require.Equal(t, filters.Returned, cells[1].Visibility)
	assert.Contains(t, cells[0].Reason, "a read refreshes it (time-to-idle)")
	assert.NotContains(t, cells[1].Reason, "refreshes", "an older version is never refreshed")
}
