package strategy_test

import (
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"

	"github.com/bttl/bttl/strategy"
)

// behaviourPolicies is one policy per strategy and option, and some
// combinations.
func behaviourPolicies() []strategy.Policy {
	return []strategy.Policy{
		strategy.Unmanaged(),
		strategy.Sequence(4),
		strategy.OneSecond(),
		strategy.OneSecond(strategy.WithDefaultTTL(time.Hour), strategy.WithMaxVersions(2), strategy.WithWriteTime()),
		strategy.DefaultExpiry(90 * time.Minute),
		strategy.DefaultExpiry(time.Hour, strategy.SingleValue(), strategy.WithIdleTTL(10*time.Minute, 0.5)),
		strategy.DefaultExpiry(time.Hour, strategy.WithMaxTTL(2*time.Hour, strategy.ClampLonger)),
		strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger)),
	}
}

// TestBehaviourAgreesWithTheRules checks each behaviour answer against the
// rule it summarises, computed by the policy's other methods: the version
// limit is the GC rule's, the expiry offset is Expiry's, the TTL cap is
// CapTTL's, the reserved columns are write-time companions' range.
func TestBehaviourAgreesWithTheRules(t *testing.T) {
	for _, p := range behaviourPolicies() {
		t.Run(p.String(), func(t *testing.T) {
			var want int
			switch r := p.GCPolicy().(type) {
			case bigtable.MaxVersionsGCPolicy:
				want = int(r)
			case bigtable.UnionGCPolicy:
				for _, c := range r.Children {
					if n, ok := c.(bigtable.MaxVersionsGCPolicy); ok {
						want = int(n)
					}
				}
			}
			assert.Equal(t, want, p.VersionLimit(), "the GC rule's max versions")

			if p.MaxAge() > 0 {
				ts := bigtable.Timestamp(1_700_000_000_000_000)
				assert.Equal(t, p.Expiry(ts), ts+bigtable.Timestamp(p.ExpiryOffset()/time.Microsecond))
			} else {
				assert.Zero(t, p.ExpiryOffset())
			}

			limit, clamps := p.TTLCap()
			long := 1000 * time.Hour
			got, err := p.CapTTL(long)
			switch {
			case limit == 0:
				assert.NoError(t, err)
				assert.Equal(t, long, got)
			case clamps:
				assert.NoError(t, err)
				assert.Equal(t, limit, got)
			default:
				assert.ErrorIs(t, err, strategy.ErrTTLTooLong)
			}

			for _, col := range []string{"", "a", "\xff", "\xff\xff", strategy.WriteTimeColumn("a"), "\xff\xfe"} {
				assert.Equal(t, p.HasWriteTime() && strings.HasPrefix(col, strategy.ReservedQualifierStart), p.Reserved(col), "%q", col)
			}
			assert.Equal(t, p.HasWriteTime(), p.HasCompanions())
			assert.Equal(t, p.IsSingleValue(), p.ReplacesColumn())
			assert.Equal(t, p.IdleTTL() > 0, p.RefreshesOnRead())
		})
	}
}
