// Package lifecycle runs ttlclient's lifecycle operations
// (docs/design.md#lifecycle-conditions): Expire, ExpireAt, Persist,
// ExpireColumn, ExpireRow, SetKeepTTL, the get-and-expire reads, Expiry,
// RemainingTTL, WriteTime and MaxWriteTime, the pinned cell move they and
// time-to-idle build on (Ops.MoveCell), and the purge of the versions a
// max-versions family hides; and time-to-idle (Idle: the look at each row
// a read returns, the refreshes queued on the client's pool). ttlclient's Table supplies an Ops (its
// policies, clock and read filter, a raw read and a CheckAndMutateRow sent
// through its transactional profile, its refusals); its exported methods,
// and their documentation, stay in ttlclient.
//
// The pure part makes no RPC: the conditions of a conditional Expire
// (Redis NX, XX, GT, LT) and the timestamp range a stored cell must lie
// in for one to hold (Window, which joins the predicate of the
// CheckAndMutateRow, so the server evaluates the condition on the cell it
// finds), the target timestamp of an absolute expiry (ExpireAt) and of
// Persist, and the per-cell results in the spirit of Redis HEXPIRE.
package lifecycle
