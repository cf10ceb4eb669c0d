package gcrule_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// TestCheckOnRulesReadBackFromServers: the rule each policy needs, set by
// the client from Policy.GCPolicy and read back from bttest and from
// cbtemulator (what Verify compares), matches; and the rules of the
// other policies are each told apart with the kind of mismatch they are.
func TestCheckOnRulesReadBackFromServers(t *testing.T) {
	policies := []strategy.Policy{
		strategy.OneSecond(),
		strategy.OneSecond(strategy.WithMaxVersions(1), strategy.WithMaxTTL(time.Hour, strategy.ClampLonger)),
		strategy.DefaultExpiry(1500 * time.Millisecond),
		strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2)),
		strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime()),
		strategy.Sequence(3),
		strategy.Sequence(1),
	}
	servers := map[string]func(t *testing.T) *bttestharness.Harness{
		"bttest": func(t *testing.T) *bttestharness.Harness { return bttestharness.New(t) },
		"cbtemulator": func(t *testing.T) *bttestharness.Harness {
			if _, err := bttestharness.FindEmulator(); err != nil {
				t.Skip(err)
			}
			h, _ := bttestharness.NewOnEmulator(t, bttestharness.Config{})
			return h
		},
	}
	for name, start := range servers {
		t.Run(name, func(t *testing.T) {
			h := start(t)
			ctx := context.Background()
			fams := map[string]bigtable.Family{}
			for i, p := range policies {
				fams[fmt.Sprint("f", i)] = bigtable.Family{GCPolicy: p.GCPolicy()}
			}
			require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: fams}))
			admin := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance)
			got, err := admin.Families(ctx, "t")
			require.NoError(t, err)
			for i, p := range policies {
				for j, q := range policies {
					actual := got[fmt.Sprint("f", j)]
					require.NotNil(t, actual)
					e := gcrule.Check("t", "f", p, actual)
					if gcrule.ExpectedString(p) == gcrule.ExpectedString(q) {
						assert.Nil(t, e, "%s on the rule of %s (%s)", p, q, gcrule.Describe(actual.GetGcRule()))
						continue
					}
					if !assert.NotNil(t, e, "%s on the rule of %s", p, q) {
						continue
					}
					assert.Equal(t, wantKind(p, q), e.Kind, "%s on the rule of %s (%s)", p, q, gcrule.Describe(actual.GetGcRule()))
				}
				assert.Equal(t, gcrule.ExpectedString(p), gcrule.Describe(got[fmt.Sprint("f", i)].GetGcRule()), "%s", p)
			}
		})
	}
}

// wantKind is the mismatch a family of policy p holding q's rule is, from
// what each rule has, written out by hand.
func wantKind(p, q strategy.Policy) gcrule.Kind {
	pAge, qAge := p.Kind() != strategy.KindSequence, q.Kind() != strategy.KindSequence
	switch {
	case !pAge && qAge:
		return gcrule.AgeRuleOnSequence
	case pAge && (!qAge || p.MaxAge() != q.MaxAge()):
		return gcrule.WrongMaxAge
	}
	return gcrule.WrongMaxVersions
}
