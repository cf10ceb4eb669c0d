package model

import (
	"time"

	"github.com/bttl/bttl/strategy"
)

// FamilyOption is one option column of the composition matrix
// (docs/design.md#composition): options given to every family whose
// strategy takes them. The options' types say which: Age to both age
// families, OneSecond (WithDefaultTTL) to the one-second family only; a
// sequence or unmanaged family takes none, so it keeps its base policy in
// every column. The columns live here, beside the effect the model writes
// again for each option, so that a new option touches the model and not
// the matrix.
type FamilyOption struct {
	Name      string
	Age       []strategy.AgeOption       // options of both age strategies
	OneSecond []strategy.OneSecondOption // options of the one-second strategy alone
}

// Policy is base with the column's options, when base's strategy takes
// them all; ok is false, and the policy base, when it does not (the
// options would not compile there).
func (o FamilyOption) Policy(base strategy.Policy) (p strategy.Policy, ok bool) {
	if len(o.Age) == 0 && len(o.OneSecond) == 0 {
		return base, true
	}
	switch base.Kind() {
	case strategy.KindOneSecond:
		opts := append([]strategy.OneSecondOption(nil), o.OneSecond...)
		for _, a := range o.Age {
			opts = append(opts, a)
		}
		return strategy.OneSecond(opts...), base == strategy.OneSecond()
	case strategy.KindDefaultExpiry:
		if len(o.OneSecond) > 0 {
			return base, false
		}
		return strategy.DefaultExpiry(base.DefaultTTL(), o.Age...), base == strategy.DefaultExpiry(base.DefaultTTL())
	}
	return base, false
}

// OptionColumns is one matrix column per family option, and the pairs
// whose interplay the model re-derives. Every option strategy offers has a
// column (internal/doccheck's TestEveryOptionHasAMatrixColumn). The
// durations suit the matrix's clock moves and TTLs: a max TTL of 2s
// refuses (or clamps) many of the TTLs it draws, an idle TTL of 300ms is
// refreshed by most reads.
var OptionColumns = []FamilyOption{
	{Name: "WriteTime", Age: []strategy.AgeOption{strategy.WithWriteTime()}},
	{Name: "SingleValue", Age: []strategy.AgeOption{strategy.SingleValue()}},
	{Name: "MaxVersions", Age: []strategy.AgeOption{strategy.WithMaxVersions(2)}},
	{Name: "IdleTTL", Age: []strategy.AgeOption{strategy.WithIdleTTL(300*time.Millisecond, 0.5)}},
	{Name: "MaxTTL", Age: []strategy.AgeOption{strategy.WithMaxTTL(2*time.Second, strategy.RefuseLonger)}},
	{Name: "MaxTTL+ClampTTL", Age: []strategy.AgeOption{strategy.WithMaxTTL(2*time.Second, strategy.ClampLonger)}},
	{Name: "DefaultTTL", OneSecond: []strategy.OneSecondOption{strategy.WithDefaultTTL(2 * time.Second)}},
	// A pair: a refresh moves the cell and its write-time companion.
	{Name: "WriteTime+IdleTTL", Age: []strategy.AgeOption{strategy.WithWriteTime(), strategy.WithIdleTTL(300*time.Millisecond, 0.5)}},
}
