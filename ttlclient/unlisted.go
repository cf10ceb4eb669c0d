package ttlclient

import (
	"fmt"

	"github.com/bttl/bttl/strategy"
)

// WithUnlistedFamilies makes families the schema does not name pass
// through as p instead of being refused with ErrUnknownFamily: writes to
// them are checked and sent as for a family declared p, and reads return
// every stored cell of them, as the raw client would, whenever the family
// was created. p must be strategy.Unmanaged(), the one policy that needs
// neither a GC rule nor a filter per family; Open refuses any other with
// strategy.ErrInvalidPolicy. The default stays strict: without this option a write
// to a family the schema does not name is refused.
//
// With the option, Open builds the read filter without the list of the
// table's families it read while verifying (see Open): a filter selecting
// families by name would return nothing of a family created after Open,
// which writes would then reach and reads miss. The filter instead applies
// each managed family's bound and passes every other family through a
// complement regex, which the emulators evaluate more slowly.
func WithUnlistedFamilies(p strategy.Policy) Option {
	return bothOption(func(cfg *config) { cfg.unlisted = &p })
}

// checkUnlisted refuses an unlisted-families policy other than Unmanaged.
func checkUnlisted(p *strategy.Policy) error {
	if p != nil && *p != strategy.Unmanaged() {
		return fmt.Errorf("%w: WithUnlistedFamilies takes strategy.Unmanaged() only, not a %s policy", strategy.ErrInvalidPolicy, p.Kind())
	}
	return nil
}
