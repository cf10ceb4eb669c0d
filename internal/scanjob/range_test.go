package scanjob

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitKeySpaceIsSortedInsideAndStable(t *testing.T) {
	for _, c := range []struct{ lo, hi string }{{"", ""}, {"row", "rox"}, {"a", ""}, {"ab", "b"}, {"user#", "user$"}} {
		for n := 1; n <= 16; n++ {
			keys := splitKeySpace(c.lo, c.hi, n)
			require.Len(t, keys, n-1)
			prev := c.lo
			for _, k := range keys {
				assert.Greater(t, k, prev, "%q..%q /%d", c.lo, c.hi, n)
				prev = k
			}
			if c.hi != "" && len(keys) > 0 {
				assert.Less(t, keys[len(keys)-1], c.hi)
			}
			assert.Equal(t, keys, splitKeySpace(c.lo, c.hi, n), "a function of its arguments")
		}
	}
	assert.Equal(t, []string{"\x80\x00\x00\x00"}, splitKeySpace("", "", 2))
	assert.Equal(t, []string{"row\x80\x00\x00"}, splitKeySpace("row", "rox", 2), "the common prefix and four bytes")
}

func TestPlanMergesSampleIntervals(t *testing.T) {
	piece := Range{"b", "y"}
	sampled := []string{"a", "c", "d", "d", "e", "f", "g", "z", ""}
	got := plan(piece, sampled, 2)
	assert.Equal(t, []plannedRange{{Range{"b", "e"}, 3}, {Range{"e", "y"}, 3}}, got)
	got = plan(Range{}, nil, 8)
	assert.Equal(t, []plannedRange{{Range{}, 1}}, got, "no sample: one open range")
	got = plan(Range{}, []string{"m"}, 8)
	assert.Equal(t, []plannedRange{{Range{"", "m"}, 1}, {Range{"m", ""}, 1}}, got)
}

func TestRangeJSONKeepsBinaryKeys(t *testing.T) {
	for _, r := range []Range{{"a", "b"}, {"\xff\x00", ""}, {"", "\x80"}} {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		var back Range
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, r, back, "%s", b)
	}
	b, _ := json.Marshal(Range{"a", "\xff"})
	assert.JSONEq(t, `{"start":"a","end":{"base64":"/w=="}}`, string(b))
}

func TestCoalesce(t *testing.T) {
	assert.Equal(t, []Range{{"", "c"}, {"d", ""}}, Coalesce([]Range{{"e", ""}, {"b", "c"}, {"", "b"}, {"d", "e"}}))
	assert.Equal(t, []Range{{"a", ""}}, Coalesce([]Range{{"a", ""}, {"b", "c"}}))
	assert.Nil(t, Coalesce(nil))
}

func TestParseShard(t *testing.T) {
	s, err := ParseShard("1/3")
	require.NoError(t, err)
	assert.Equal(t, Shard{1, 3}, s)
	for _, bad := range []string{"3/3", "-1/2", "1", "a/b", "0/0", "1/2/3"} {
		_, err := ParseShard(bad)
		assert.ErrorIs(t, err, ErrOption, bad)
	}
}
