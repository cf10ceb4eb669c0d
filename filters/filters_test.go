package filters_test

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

func TestComplementRegexMatchesExactlyTheOthers(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	const alphabet = "ab.-_1"
	word := func() string {
		n := 1 + rng.Intn(4)
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteByte(alphabet[rng.Intn(len(alphabet))])
		}
		return b.String()
	}
	for round := 0; round < 200; round++ {
		set := map[string]bool{}
		var names []string
		for i := 0; i < 1+rng.Intn(5); i++ {
			w := word()
			if !set[w] {
				set[w] = true
				names = append(names, w)
			}
		}
		re := regexp.MustCompile(filters.ComplementRegex(names))
		for i := 0; i < 200; i++ {
			w := word()
			assert.Equal(t, !set[w], re.MatchString(w), "names %q, candidate %q, regex %s", names, w, re)
		}
		for _, n := range names {
			assert.False(t, re.MatchString(n), "names %q matched member %q", names, n)
			assert.True(t, re.MatchString(n+"x"), "names %q missed %q", names, n+"x")
		}
	}
}

func TestFamilyRegexQuotes(t *testing.T) {
	re := regexp.MustCompile(filters.FamilyRegex("a.b-c"))
	assert.True(t, re.MatchString("a.b-c"))
	assert.False(t, re.MatchString("axb-c"))
	assert.False(t, re.MatchString("a.b-cd"))
}

func TestComposeNeverBuildsSingleElementChains(t *testing.T) {
	b, err := filters.New(strategy.Schema{"plain": strategy.Unmanaged()})
	require.NoError(t, err)
	assert.False(t, b.Managed())
	assert.Nil(t, b.Compose(1000, nil))
	user := bigtable.LatestNFilter(1)
	assert.Equal(t, user, b.Compose(1000, user), "no managed family: the caller's filter alone")

	b, err = filters.New(strategy.Schema{"s": strategy.Sequence(2)})
	require.NoError(t, err)
	assert.Equal(t, b.TTL(1000), b.Compose(1000, nil))
	assert.Equal(t, "(("+bigtable.ColumnRangeFilter("s", "", "").String()+" | col(*,2)) + col("+filters.ComplementRegex([]string{"s"})+":))", b.TTL(1000).String())
}

func TestTTLFilterBoundsAndCache(t *testing.T) {
	b, err := filters.New(strategy.Schema{
		"one": strategy.OneSecond(),
		"def": strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2)),
		"seq": strategy.Sequence(3),
	})
	require.NoError(t, err)
	now := bigtable.Timestamp(1_700_000_000_123_456)
	f := b.TTL(now)
	s := f.String()
	assert.Contains(t, s, bigtable.ColumnRangeFilter("def", "", "").String()+" | "+bigtable.TimestampRangeFilterMicros(1_700_000_000_124_000-3_600_000_000, 0).String()+" | col(*,2)")
	assert.Contains(t, s, bigtable.ColumnRangeFilter("one", "", "").String()+" | "+bigtable.TimestampRangeFilterMicros(1_700_000_000_124_000, 0).String())
	assert.Contains(t, s, bigtable.ColumnRangeFilter("seq", "", "").String()+" | col(*,3)")
	// Same millisecond: the same filter value is reused.
	assert.Equal(t, f, b.TTL(now+500))
	assert.NotEqual(t, s, b.TTL(now+1000).String())

	expired := b.Expired(now).String()
	assert.Contains(t, expired, bigtable.TimestampRangeFilterMicros(0, 1_700_000_000_124_000).String())
	assert.Contains(t, expired, "strip_value()")
	assert.NotContains(t, expired, "seq")
}
