// Package lifecycle is the pure part of ttlclient's lifecycle operations
// (docs/design.md#lifecycle-conditions): the conditions of a conditional
// Expire (Redis NX, XX, GT, LT) and the timestamp range a stored cell must
// lie in for one to hold, the target timestamp of an absolute expiry
// (ExpireAt) and of Persist, and the per-cell results in the spirit of
// Redis HEXPIRE. It makes no RPC: ttlclient reads the cell, asks this
// package what to do, and sends one CheckAndMutateRow whose predicate
// carries Window, so the server evaluates the condition on the cell it
// finds.
package lifecycle
