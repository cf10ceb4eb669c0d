package wireguard

import (
	"fmt"

	"github.com/bttl/bttl/strategy"
)

// WithUnlistedFamilies makes families a guarded table's schema does not
// name pass as p instead of being refused (rule unknown-family): mutations
// of them are let through as for a family declared p. p must be
// strategy.Unmanaged(); New refuses any other with
// strategy.ErrInvalidPolicy. The default stays strict. Reads need nothing
// more: the guard's read filter (WithReadFilter) passes every family
// outside the schema through untouched, whenever it was created.
func WithUnlistedFamilies(p strategy.Policy) Option {
	return func(g *Guard) { g.unlisted = &p }
}

// checkUnlisted refuses an unlisted-families policy other than Unmanaged.
func (g *Guard) checkUnlisted() error {
	if g.unlisted != nil && *g.unlisted != strategy.Unmanaged() {
		return fmt.Errorf("%w: wireguard.WithUnlistedFamilies takes strategy.Unmanaged() only, not a %s policy", strategy.ErrInvalidPolicy, g.unlisted.Kind())
	}
	return nil
}

// policy is fam's policy: the schema's, else the unlisted families' when
// WithUnlistedFamilies was given; ok is false for a family neither covers.
func (t *table) policy(fam string) (p strategy.Policy, ok bool) {
	if p, ok = t.schema[fam]; ok || t.unlisted == nil {
		return p, ok
	}
	return *t.unlisted, true
}
