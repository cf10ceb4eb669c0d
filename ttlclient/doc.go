// Package ttlclient is a drop-in wrapper around cloud.google.com/go/bigtable
// that gives column families per-cell TTLs.
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
// NewClient dials bttl's interceptor, which gives Table.API's
// *bigtable.Mutation and a read's bigtable.RowFilter the table's rules on
// the wire (bttl reads neither); a client you Wrap gets it from
// ClientOptions (docs/design.md#tableapi).
//
// Writes: managed-family timestamps are computed from each cell's TTL (or
// sequence number) and the table's clock, truncated to the millisecond, and
// checked before any RPC. A write that would lose data silently (a server
// timestamp on a one-second family, a cell expired on arrival, a TTL or
// sequence number out of range, ReadModifyWrite on a managed family, an
// unknown family) is refused with a *CellError wrapping a sentinel error;
// nothing of that row is sent. A refusal carries a gRPC status
// (InvalidArgument or FailedPrecondition, StatusCode), so status.Code sees
// it as it sees a server's error. WithUnlistedFamilies lets families the
// schema does not name through as unmanaged instead of refusing them. A
// refusal's message shows the row key and column quoted and cut to 64
// bytes, or, with WithKeyRedaction, only their lengths and keyed tags; its
// fields keep the full values (docs/design.md#keys-in-messages).
//
// Open verifies the table first: with an admin client (NewClient creates
// one; give Wrap WithAdminClient) it reads the families' exact GC rules and
// fails with gcrule.ErrMismatch (a *gcrule.MismatchError per family: table, family,
// expected and actual rule) when a family is missing or its rule is not the
// one its strategy needs. WithoutVerify skips the check and logs that it
// did (WithLogger); Client.Verify runs it on its own.
//
// Reads: every ReadRow, ReadRows and check-and-mutate predicate carries the
// schema's TTL filter before the caller's own, so an expired cell is never
// returned nor matched, whatever Bigtable's asynchronous GC has done. The
// filter is built for the families Open read from the table: no regex, one
// branch per distinct rule, and the rule alone when one covers every
// family. A family created after Open is not read until the table is
// opened again (under the bare rule, it is filtered by that rule); see
// Client.Open. A filter over the size Bigtable serves fails Open with
// filters.ErrFilterTooLarge.
// The server reads an expired cell before the filter hides it, so the
// statistics of bigtable.WithFullReadStats count it as seen: CellsSeenCount
// and RowsSeenCount include the cells and rows the TTL filter hid, and
// their excess over the returned counts measures that filter's work as
// well as the caller's.
//
// Time: every timestamp written and every filter bound comes from the
// table's Clock (WithClock; the system clock by default), in whole
// milliseconds. The server's GC runs on its own clock: skew between the two
// shifts when a cell disappears from reads relative to when GC may collect
// it, so keep TTLs well above the clock error.
//
// Views and SQL: Client.OpenAuthorizedView opens an authorized view as its
// table (same schema, same rewrites, guardrails and filter; requests name
// the view), Client.OpenMaterializedView a read-only view whose managed
// families the caller declares, and Table.API and MaterializedView.API give
// the bigtable.TableAPI the plain client's OpenTable, OpenAuthorizedView and
// OpenMaterializedView return. SQL carries no row filter:
// Client.PrepareStatement refuses a query over a table with managed
// families (ErrUnfilteredSQL) unless WithSQLAllowed says to accept expired
// cells. See docs/design.md#views and docs/design.md#sql.
//
// Lifecycle (docs/design.md#lifecycle): Table.Expiry and RemainingTTL tell
// a read cell's expiry without an RPC; Table.Expire, ExpireColumn and
// ExpireRow give cells a new TTL by moving them atomically (a predicate
// pins the exact cell, so a concurrent write is never overwritten and an
// expired cell never revived); strategy.WithMaxTTL caps TTLs;
// strategy.WithWriteTime records each cell's real write time in a hidden
// companion cell that expires with it, read back with Table.WriteTime.
//
// Time-to-idle: a family with strategy.WithIdleTTL keeps a cell alive while
// it is read. A read that returns a cell close enough to its expiry (below
// the idle TTL less a debounce, a fraction of the idle TTL) queues a
// refresh that moves the cell atomically to expire an idle TTL later, only
// while it is still that very cell and its column's newest. Refreshes run
// on the client's goroutines (WithIdleRefreshConcurrency), from a bounded
// queue (WithIdleRefreshQueue) whose overflow is dropped and counted
// (IdleRecorder; package metrics' bttl_idle_refreshes_total); they never
// change a read's result, error or latency. Client.Close stops them;
// Client.FlushIdleRefreshes waits for them.
//
// What is not guarded: writes through Client.Raw, Table.Raw or any other
// plain *bigtable.Client. The examples directory has runnable programs for
// each strategy (go run ./examples/clickevents, onesecond, sequence,
// migrate) and for time-to-idle (sessions).
package ttlclient
