package ttlclient

import (
	"fmt"

	"github.com/bttl/bttl/strategy"
)

// WithUnlistedFamilies makes families the schema does not name pass
// through as p instead of being refused with ErrUnknownFamily: writes to
// them are checked and sent as for a family declared p, and reads return
// every stored cell of them, whenever the family was created. p must be
// strategy.Unmanaged(); Open refuses any other with
// strategy.ErrInvalidPolicy. The read filter then passes unlisted
// families through a complement regex, which the emulators evaluate more
// slowly (docs/design.md#unlisted-families).
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
