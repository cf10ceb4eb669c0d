package strategy_test

import (
	"errors"
	"math/rand"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
)

// An ExplicitCheck made once accepts exactly the timestamps an age family
// holds live at its now (IsLive, by the stored millisecond), for each of
// several timestamps in turn, whatever the family, clock and timestamp,
// near the epoch and the largest timestamp included.
func TestExplicitCheckAcceptsWhatIsLive(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	policies := []strategy.Policy{
		strategy.OneSecond(),
		strategy.OneSecond(strategy.WithDefaultTTL(time.Minute)),
		strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger)),
		strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.ClampLonger)),
		strategy.DefaultExpiry(time.Hour),
		strategy.DefaultExpiry(365*24*time.Hour, strategy.WithMaxTTL(400*24*time.Hour, strategy.RefuseLonger)),
		strategy.Sequence(3),
		strategy.Unmanaged(),
	}
	// A timestamp near a point of interest: the clock, the epoch, the
	// largest timestamp, or anywhere.
	near := func(at bigtable.Timestamp) bigtable.Timestamp {
		var d int64
		switch rng.Intn(4) {
		case 0:
			d = rng.Int63n(4000) - 2000
		case 1:
			d = rng.Int63n(8_000_000_000) - 4_000_000_000
		case 2:
			return bigtable.Timestamp(rng.Int63n(int64(strategy.MaxTimestamp)))
		}
		if d > 0 && at > strategy.MaxTimestamp-bigtable.Timestamp(d) {
			return strategy.MaxTimestamp // saturate rather than overflow
		}
		return at + bigtable.Timestamp(d)
	}
	for range 20000 {
		p := policies[rng.Intn(len(policies))]
		var at bigtable.Timestamp
		switch rng.Intn(4) {
		case 0:
			at = bigtable.Timestamp(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC).UnixMicro())
		case 1:
			at = strategy.MaxTimestamp
		case 2:
			at = 0 // the epoch
		default:
			at = bigtable.Timestamp(rng.Int63n(int64(strategy.MaxTimestamp)))
		}
		now := near(at)
		if now < 0 {
			now = -now
		}
		c := strategy.NewExplicitCheck(p, now)
		for range 5 {
			ts := near(now)
			if ts < 0 || (p.Kind() != strategy.KindOneSecond && p.Kind() != strategy.KindDefaultExpiry) {
				continue
			}
			_, err := c.Check(ts)
			require.Equal(t, !p.IsLive(strategy.Millis(ts), now), errors.Is(err, strategy.ErrAlreadyExpired),
				"%s now %d ts %d: %v", p, now, ts, err)
		}
	}
}
