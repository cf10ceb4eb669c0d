// Package wiremark marks the context of a request bttl's own client has
// already checked and completed, so that bttl's wire guard, on the same
// connection, passes it through unchanged (docs/design.md#wire-guard).
//
// ttlclient computes every request it sends (timestamps by the family's
// convention, write-time companions, the TTL filter, or none where an
// internal read must see the stored cells: a lifecycle move, a companion
// read, a purge of hidden versions). A guard on the connection applying its
// own rules a second time would hide what those reads must see and add
// what the writes already carry. Only bttl's packages can import this
// package (it is internal), so no other caller can mark a request.
package wiremark

import "context"

type key struct{}

// Mark returns ctx marked as carrying a request ttlclient computed.
func Mark(ctx context.Context) context.Context {
	if Marked(ctx) {
		return ctx
	}
	return context.WithValue(ctx, key{}, true)
}

// Marked reports whether ctx was marked by Mark.
func Marked(ctx context.Context) bool {
	v, _ := ctx.Value(key{}).(bool)
	return v
}
