package wireguard

import (
	"context"

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
func passesMarked(ctx context.Context, method string) bool {
	switch method {
	case methodMutateRow, methodMutateRows, methodCheckAndMut, methodRMW, methodReadRows:
		return wiremark.Marked(ctx)
	}
	return false
}
