// Package ttlclient is a drop-in wrapper around cloud.google.com/go/bigtable
// that gives column families per-cell TTLs. The contract is
// docs/design.md; this is the map.
//
// Switching from the raw client changes a constructor and the mutation type:
//
//	client, err := ttlclient.NewClient(ctx, project, instance)          // was bigtable.NewClient
//	tbl, err := client.Open(ctx, "events", ttlclient.Schema{ // was client.Open("events"); ctx bounds the GC-rule check
//		"clicks": strategy.DefaultExpiry(48 * time.Hour),
//		"meta":   strategy.Unmanaged(),
//	})
//	m := ttlclient.NewMutation()                                        // was bigtable.NewMutation
//	m.SetTTL("clicks", "home", time.Hour, value)                       // or Set, exactly bigtable's
//	err = tbl.Apply(ctx, "user#1", m)
//	row, err := tbl.ReadRow(ctx, "user#1", bigtable.RowFilter(bigtable.LatestNFilter(1)))
//
// Writes: managed-family timestamps are computed from each cell's TTL (or
// sequence number) and the table's clock (WithClock), in whole
// milliseconds, and checked before any RPC. A write that would lose data
// silently (a server timestamp on a one-second family, a cell expired on
// arrival, a TTL out of range, ReadModifyWrite on a managed family, an
// unknown family) is refused with a *CellError wrapping a sentinel error,
// carrying a gRPC status (StatusCode); nothing of that row is sent
// (docs/design.md#guardrails). Messages show row keys quoted and cut, or
// redacted with WithKeyRedaction (docs/design.md#keys-in-messages).
//
// Reads: every ReadRow, ReadRows and check-and-mutate predicate carries the
// schema's TTL filter before the caller's own, so an expired cell is never
// returned nor matched, whatever Bigtable's asynchronous GC has done
// (docs/design.md#read-filters). NewClient dials bttl's interceptor, which
// applies the rules to Table.API's *bigtable.Mutation and to a read's
// bigtable.RowFilter on the wire; a client you Wrap gets it from
// ClientOptions (docs/design.md#tableapi).
//
// Open verifies the table first: with an admin client it reads the
// families' GC rules and fails with gcrule.ErrMismatch when one is not the
// rule its strategy needs; WithoutVerify skips the check and logs that it
// did (docs/design.md#verification).
//
// Views and SQL: Client.OpenAuthorizedView and OpenMaterializedView open
// views (docs/design.md#views); Client.PrepareStatement refuses a query
// over managed families, which SQL cannot filter, unless WithSQLAllowed
// (docs/design.md#sql).
//
// Lifecycle (docs/design.md#lifecycle): Table.Expiry and RemainingTTL tell
// a read cell's expiry without an RPC; Table.Expire and its kin give cells
// a new TTL by moving them atomically; strategy.WithWriteTime records each
// cell's write time, read back with Table.WriteTime; a family with
// strategy.WithIdleTTL keeps a cell alive while it is read, refreshed off
// the caller's path on the client's bounded pool
// (docs/design.md#time-to-idle). WithRecorder reports what the library
// sees, and shadow reads count the expired cells still stored
// (docs/design.md#metrics).
//
// What is not guarded: writes through Client.Raw, Table.Raw or any other
// plain *bigtable.Client. The examples directory has runnable programs for
// each strategy and for time-to-idle.
package ttlclient
