// Package wiremark marks the context of a request bttl's own client has
// already checked and completed with bttl's one rule set (internal/rules),
// the wire guard's too, so that the guard, on the same connection, passes
// it through unchanged rather than run the same rules a second time
// (docs/design.md#wire-guard): "already checked by this engine, for this
// schema".
//
// ttlclient computes every request it sends (timestamps by the family's
// convention, write-time companions, the TTL filter, or none where an
// internal read must see the stored cells: a lifecycle move, a companion
// read, a purge of hidden versions). A guard on the connection applying its
// own rules a second time would hide what those reads must see and add
// what the writes already carry. Only bttl's packages can import this
// package (it is internal), so no other caller can mark a request.
//
// A mark names the schema the request was computed for: the guard passes
// it only when that schema is its own for the table, since a request
// checked against other rules (a family the guard manages, declared
// unmanaged) is not one the guard would let through.
package wiremark

import (
	"context"

	"github.com/bttl/bttl/strategy"
)

// Mark describes the rules a marked request was computed with.
type Mark struct {
	// Table is the ID of the table, or of the materialized view when View,
	// the request names (an authorized view's table for a request through
	// the authorized view).
	Table string
	View  bool
	// Schema is the schema the client checked the request against, and
	// Unlisted the policy of families it does not name (nil: refused).
	Schema   strategy.Schema
	Unlisted *strategy.Policy
}

type key struct{}

// With returns ctx marked with m.
func With(ctx context.Context, m *Mark) context.Context {
	if Of(ctx) == m {
		return ctx
	}
	return context.WithValue(ctx, key{}, m)
}

// Of is ctx's mark, nil when it has none.
func Of(ctx context.Context) *Mark {
	m, _ := ctx.Value(key{}).(*Mark)
	return m
}

// Follows reports whether a request computed under m obeys a guard's
// schema and unlisted-families policy for m's table: the same policy for
// every family, and no family let through that the guard refuses.
func (m *Mark) Follows(schema strategy.Schema, unlisted *strategy.Policy) bool {
	if len(m.Schema) != len(schema) {
		return false
	}
	for f, p := range schema {
		if q, ok := m.Schema[f]; !ok || q != p {
			return false
		}
	}
	return m.Unlisted == nil || (unlisted != nil && *unlisted == *m.Unlisted)
}
