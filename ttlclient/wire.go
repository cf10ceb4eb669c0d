package ttlclient

import (
	"context"

	"github.com/bttl/bttl/internal/wiremark"
)

// wire marks ctx for a request this table computed (checked writes with
// their companions, reads with the TTL filter, and the internal reads and
// moves of lifecycle operations that must see the stored cells), so that
// bttl's wire guard on the same connection passes it through unchanged
// rather than filter it a second time (hiding the companions and versions
// an internal read must see) or rewrite it (docs/design.md#wire-guard).
// The mark carries the table's schema: a guard with another schema for
// the table refuses the request. Requests made with Client.Raw or
// Table.Raw are not marked.
func (t *Table) wire(ctx context.Context) context.Context { return wiremark.With(ctx, t.mark) }
