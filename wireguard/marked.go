package wireguard

import (
	"context"
	"fmt"

	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/internal/wiremark"
)

// passesMarked reports whether a call is a data request bttl's own client
// (ttlclient) sent through this connection: it has passed ttlclient's
// checks for its table's schema and carries everything the guard would add
// (write-time companions, single-value deletes, the TTL filter), or,
// for ttlclient's internal reads and moves, must see and change the stored
// cells exactly (a companion, a version the TTL filter hides). The guard
// sends it unchanged: no filter, no companion, no rewrite. Only bttl's
// packages can mark a context (internal/wiremark), so a plain client's
// requests are always checked. SQL and session calls are not data
// requests ttlclient marks: they stay refused.
//
// A marked request is passed only when the schema it was computed for is
// the guard's for its table (wiremark.Mark.Follows): one computed for
// other rules is refused (RuleSchemaMismatch), since ttlclient's checks
// were not the guard's and the guard cannot redo them without hiding what
// ttlclient's internal reads must see. A mark naming something the guard
// does not guard gets the guard's usual treatment.
func (g *Guard) passesMarked(ctx context.Context, method string) (bool, error) {
	switch method {
	case methodMutateRow, methodMutateRows, methodCheckAndMut, methodRMW, methodReadRows:
	default:
		return false, nil
	}
	m := wiremark.Of(ctx)
	if m == nil {
		return false, nil
	}
	t := g.tables[m.Table]
	if m.View {
		t = g.views[m.Table]
	}
	if t == nil {
		return false, nil
	}
	if !m.Follows(t.Schema, t.Unlisted) {
		err := refusal(method, rules.ErrSchemaMismatch, t.id, fmt.Sprintf(
			"the request was computed by bttl's client for a schema of %q other than the guard's; open the table with the guard's schema", t.id))
		err.(*guardRefusal).table = t.id
		return false, err
	}
	return true, nil
}
