package gcrule_test

import (
	"testing"
	"time"

	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

func family(r *adminpb.GcRule) *adminpb.ColumnFamily { return &adminpb.ColumnFamily{GcRule: r} }

// TestExpectedIsThePolicysRule: the rule each strategy and option needs,
// written out, is what Expected derives from the policy's GCPolicy, and
// Check accepts exactly it.
func TestExpectedIsThePolicysRule(t *testing.T) {
	for _, c := range []struct {
		p    strategy.Policy
		want *adminpb.GcRule
	}{
		{strategy.OneSecond(), maxAge(time.Second)},
		{strategy.OneSecond(strategy.WithDefaultTTL(time.Hour), strategy.WithWriteTime(), strategy.SingleValue()), maxAge(time.Second)},
		{strategy.DefaultExpiry(1500 * time.Millisecond), maxAge(1500 * time.Millisecond)},
		{strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2)), union(maxAge(time.Hour), maxVersions(2))},
		{strategy.OneSecond(strategy.WithMaxVersions(1), strategy.WithMaxTTL(time.Hour, strategy.ClampLonger)), union(maxAge(time.Second), maxVersions(1))},
		{strategy.Sequence(3), maxVersions(3)},
	} {
		t.Run(c.p.String(), func(t *testing.T) {
			got := gcrule.Expected(c.p)
			require.NotNil(t, got)
			assert.Equal(t, gcrule.Describe(c.want), gcrule.Describe(got))
			assert.Equal(t, gcrule.Describe(c.want), gcrule.ExpectedString(c.p))
			assert.Nil(t, gcrule.Check("t", "f", c.p, family(c.want)))
		})
	}
	assert.Nil(t, gcrule.Expected(strategy.Unmanaged()))
	assert.Nil(t, gcrule.Check("t", "f", strategy.Unmanaged(), family(maxAge(time.Minute))))
}

// TestCheckNamesHowTheRuleDiffers: each kind of mismatch, on the policies
// it applies to.
func TestCheckNamesHowTheRuleDiffers(t *testing.T) {
	def := strategy.DefaultExpiry(time.Hour)
	defN := strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2))
	seq := strategy.Sequence(3)
	inter := &adminpb.GcRule{Rule: &adminpb.GcRule_Intersection_{Intersection: &adminpb.GcRule_Intersection{
		Rules: []*adminpb.GcRule{maxAge(time.Hour), maxVersions(2)}}}}
	for _, c := range []struct {
		name   string
		p      strategy.Policy
		actual *adminpb.ColumnFamily
		want   gcrule.Kind
	}{
		{"missing", def, nil, gcrule.MissingFamily},
		{"no rule", def, family(nil), gcrule.NoRule},
		{"other age", def, family(maxAge(2 * time.Hour)), gcrule.WrongMaxAge},
		{"no age", defN, family(maxVersions(2)), gcrule.WrongMaxAge},
		{"versions where none", def, family(union(maxAge(time.Hour), maxVersions(2))), gcrule.WrongMaxVersions},
		{"no versions", defN, family(maxAge(time.Hour)), gcrule.WrongMaxVersions},
		{"other versions", defN, family(union(maxAge(time.Hour), maxVersions(3))), gcrule.WrongMaxVersions},
		{"sequence other versions", seq, family(maxVersions(2)), gcrule.WrongMaxVersions},
		{"sequence with age", seq, family(union(maxAge(time.Hour), maxVersions(3))), gcrule.AgeRuleOnSequence},
		{"intersection", defN, family(inter), gcrule.IntersectionRule},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := gcrule.Check("t", "f", c.p, c.actual)
			require.NotNil(t, e)
			assert.Equal(t, c.want, e.Kind)
			assert.ErrorIs(t, e, gcrule.ErrMismatch)
		})
	}
}
