package wireguard

import (
	"fmt"

	"github.com/bttl/bttl/strategy"
)

// WithUnlistedFamilies makes families a guarded table's schema does not
// name pass as p instead of being refused (rule unknown-family): mutations
// of them are let through as for a family declared p. It holds for the
// tables named (IDs, as schemas' keys), or for every guarded table when
// none is named; New refuses a name it does not guard. p must be
// strategy.Unmanaged(); New refuses any other with
// strategy.ErrInvalidPolicy. The default stays strict. Reads need nothing
// more: the guard's read filter (WithReadFilter) passes every family
// outside the schema through untouched, whenever it was created.
//
// Given more than once, the tables add up (one given with no table makes
// it hold for every guarded table), and a policy New refuses is not
// replaced by a later one.
func WithUnlistedFamilies(p strategy.Policy, tables ...string) Option {
	return func(g *options) {
		first := g.unlisted == nil
		if first || *g.unlisted == strategy.Unmanaged() {
			g.unlisted = &p
		}
		switch {
		case len(tables) == 0:
			g.unlistedTables = nil // every table
		case first:
			g.unlistedTables = make(map[string]bool, len(tables))
		case g.unlistedTables == nil:
			return // every table already
		}
		for _, id := range tables {
			g.unlistedTables[id] = true
		}
	}
}

// checkUnlisted refuses an unlisted-families policy other than Unmanaged,
// and a table named for it that the guard does not guard.
func (g *Guard) checkUnlisted(schemas map[string]strategy.Schema) error {
	if g.unlisted == nil {
		return nil
	}
	if *g.unlisted != strategy.Unmanaged() {
		return fmt.Errorf("%w: wireguard.WithUnlistedFamilies takes strategy.Unmanaged() only, not a %s policy", strategy.ErrInvalidPolicy, g.unlisted.Kind())
	}
	for id := range g.unlistedTables {
		if _, ok := schemas[id]; !ok {
			return fmt.Errorf("%w: wireguard.WithUnlistedFamilies names table %q, which the guard does not guard", strategy.ErrInvalidPolicy, id)
		}
	}
	return nil
}

// unlistedFor is the unlisted-families policy of table id, nil for none.
func (g *Guard) unlistedFor(id string) *strategy.Policy {
	if g.unlistedTables != nil && !g.unlistedTables[id] {
		return nil
	}
	return g.unlisted
}
