package model_test

import (
	"testing"
	"time"

	bt "cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/model"
)

// The model's expiry instants agree with the live rule and the library's
// strategy.Policy.ExpiryTime; Expired lists exactly the stored cells past
// theirs; GC removes what the families' GC rules delete, companions
// included, and nothing else.
func TestExpiryExpiredAndGC(t *testing.T) {
	s := strategy.Schema{
		"one": strategy.OneSecond(),
		"def": strategy.DefaultExpiry(time.Minute),
		"wt":  strategy.DefaultExpiry(time.Minute, strategy.WithWriteTime()),
		"seq": strategy.Sequence(2),
	}
	m := model.New(s)
	require.NoError(t, m.Apply("r", nowTime, []model.Op{
		{Kind: model.SetTTL, Family: "one", Column: "c", TTL: 2 * time.Second},
		{Kind: model.SetTTL, Family: "def", Column: "c", TTL: 10 * time.Second},
		{Kind: model.SetTTL, Family: "wt", Column: "c", TTL: 5 * time.Second},
		{Kind: model.SetSeq, Family: "seq", Column: "c", Seq: 1},
		{Kind: model.SetSeq, Family: "seq", Column: "c", Seq: 2},
		{Kind: model.SetSeq, Family: "seq", Column: "c", Seq: 3},
	}))
	for _, c := range m.Stored("r") {
		exp, ok := m.Expiry(c.Family, c.TS)
		if c.Family == "seq" {
			require.False(t, ok)
			continue
		}
		require.True(t, ok)
		require.Equal(t, s[c.Family].ExpiryTime(bt.Timestamp(c.TS)).UnixMicro(), exp, "%v", c)
		require.Len(t, m.Read("r", exp-1, model.ColumnRange(c.Family, "c", "c\x00")), 1, "%v live just before its instant", c)
		require.Empty(t, m.Read("r", exp, model.ColumnRange(c.Family, "c", "c\x00")), "%v dead at its instant", c)
	}
	at := func(d time.Duration) int64 { return now + int64(d/time.Microsecond) }
	require.Empty(t, m.Expired(at(time.Second)))
	fams := func(cs []model.Cell) (out []string) {
		for _, c := range cs {
			out = append(out, c.Family+":"+c.Column)
		}
		return out
	}
	require.Equal(t, []string{"one:c"}, fams(m.Expired(at(2*time.Second+time.Millisecond))))
	require.Equal(t, []string{"one:c", "wt:c"}, fams(m.Expired(at(6*time.Second))))
	// GC at +6s: the one-second cell is a second past its instant (max age
	// 1s); a default-expiry cell goes once its instant passed (max age D),
	// with its companion; the sequence keeps its 2 newest.
	require.Equal(t, []string{"one:c", "seq:c", "wt:c", "wt:" + model.CompanionPrefix + "c"}, fams(m.GC(at(6*time.Second))))
	require.Empty(t, m.Expired(at(6*time.Second)))
	require.Equal(t, []string{"def:c"}, fams(m.Expired(at(10*time.Second))))
	def := m.Expired(at(10 * time.Second))[0]
	exp, _ := m.Expiry("def", def.TS)
	require.Empty(t, m.GC(exp), "not at its instant: max age is ts < now - D")
	require.Equal(t, []string{"def:c"}, fams(m.GC(exp+1)))
	require.Empty(t, m.GC(at(time.Minute)), "a second run removes nothing")
	require.Empty(t, m.Expired(at(time.Minute)))
}
