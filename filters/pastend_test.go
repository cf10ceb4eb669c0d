package filters_test

import (
	"context"
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

// With the read time past the largest timestamp, a one-second family's bound
// saturated at MaxTimestamp and a cell stored there was returned. Now no cell
// of such a family passes, and the expired filter takes all of them; the other
// families keep their bounds (issue 14, finding 10(b)).
func TestTTLPastMaxTimestamp(t *testing.T) {
	ctx := context.Background()
	h := bttestharness.New(t)
	for name, schema := range map[string]strategy.Schema{
		"mixed": {
			"one": strategy.OneSecond(), "onev": strategy.OneSecond(strategy.WithMaxVersions(1)),
			"def": strategy.DefaultExpiry(time.Hour), "seq": strategy.Sequence(2), "plain": strategy.Unmanaged(),
		},
		"age only (split form)": {"one": strategy.OneSecond(), "def": strategy.DefaultExpiry(time.Hour), "plain": strategy.Unmanaged()},
		"one-second only":       {"one": strategy.OneSecond()},
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, h.CreateTable(ctx, "t", schema))
			tbl := h.Raw.Open("t")
			m := bigtable.NewMutation()
			for fam := range schema {
				m.Set(fam, "c", strategy.MaxTimestamp, []byte("v"))
			}
			require.NoError(t, tbl.Apply(ctx, "r", m))
			b, err := filters.New(schema)
			require.NoError(t, err)

			read := func(f bigtable.Filter) []string {
				var fams []string
				require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"r"}, func(r bigtable.Row) bool {
					for fam := range r {
						fams = append(fams, fam)
					}
					return true
				}, bigtable.RowFilter(f)))
				sort.Strings(fams)
				return fams
			}
			var live, expired []string
			for fam, p := range schema {
				if p.Kind() == strategy.KindOneSecond {
					expired = append(expired, fam)
				} else {
					live = append(live, fam)
				}
			}
			sort.Strings(live)
			sort.Strings(expired)
			all := sortedCopy(append(append([]string(nil), live...), expired...))
			assert.Equal(t, all, read(b.TTL(strategy.MaxTimestamp-1)), "just before: all live")
			for _, now := range []bigtable.Timestamp{strategy.MaxTimestamp, strategy.MaxTimestamp + 500, 1<<63 - 1} {
				assert.Equal(t, live, read(b.TTL(now)), "TTL at %d", now)
				assert.Equal(t, expired, read(b.Expired(now)), "Expired at %d", now)
				assert.Equal(t, live, read(b.Compose(now, bigtable.PassAllFilter())), "Compose at %d", now)
			}
		})
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
