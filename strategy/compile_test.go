package strategy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/internal/typecheck"
)

// The options are typed by the strategies that take them, so what the
// docs forbid does not compile (docs/design.md#composition): each snippet
// is type-checked against the compiled package.
func TestOptionsThatContradictDoNotCompile(t *testing.T) {
	refused := map[string]string{
		// Sequence takes no option: its only parameter is n.
		"sequence max versions": `strategy.Sequence(3, strategy.WithMaxVersions(5))`,
		"sequence write time":   `strategy.Sequence(3, strategy.WithWriteTime())`,
		// DefaultExpiry's d is its default TTL.
		"default TTL beside D": `strategy.DefaultExpiry(48*time.Hour, strategy.WithDefaultTTL(time.Hour))`,
		// The clamp is WithMaxTTL's second argument, the debounce
		// WithIdleTTL's: neither can be given alone.
		"cap without its clamp choice": `strategy.OneSecond(strategy.WithMaxTTL(time.Hour))`,
		"idle TTL without debounce":    `strategy.OneSecond(strategy.WithIdleTTL(time.Hour))`,
		// Unmanaged takes nothing.
		"unmanaged option": `strategy.Unmanaged(strategy.SingleValue())`,
	}
	accepted := map[string]string{
		"sequence":          `strategy.Sequence(3)`,
		"default expiry":    `strategy.DefaultExpiry(48*time.Hour, strategy.WithMaxVersions(5), strategy.WithMaxTTL(72*time.Hour, strategy.ClampLonger))`,
		"one-second":        `strategy.OneSecond(strategy.WithDefaultTTL(time.Hour), strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce))`,
		"age option shared": `strategy.OneSecond(strategy.AgeOption(strategy.SingleValue()))`,
	}
	c, err := typecheck.New("time", "github.com/bttl/bttl/strategy")
	require.NoError(t, err)
	for name, expr := range accepted {
		// Also proves the packages resolve: a refusal below is the type
		// checker's, not a missing import.
		require.NoError(t, c.Expr(expr), name)
	}
	for name, expr := range refused {
		err := c.Expr(expr)
		if assert.Error(t, err, "%s: %s compiles", name, expr) {
			t.Logf("%s: %v", name, err)
		}
	}
}
