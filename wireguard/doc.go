// Package wireguard applies bttl's write guardrails (docs/design.md#guardrails)
// to code that still uses a plain *bigtable.Client, as gRPC client
// interceptors:
//
//	guard, err := wireguard.New(map[string]strategy.Schema{"events": schema}, wireguard.WithReadFilter())
//	client, err := bigtable.NewClientWithConfig(ctx, project, instance,
//		bigtable.ClientConfig{DisableSession: true}, guard.ClientOptions()...)
//
// On a guarded table, MutateRow, every entry of MutateRows, both branches of
// CheckAndMutateRow and ReadModifyWriteRow are checked before anything is
// sent: a server timestamp (-1) on a managed family, a timestamp already
// expired (one-second: <= now), a negative timestamp, a sequence timestamp
// that is not seq*1000, ReadModifyWrite/AddToCell/MergeToCell on a managed
// family, or a family the schema does not name is refused with gRPC status
// FailedPrecondition. The message names the rule, table, family, column and
// row; an errdetails.PreconditionFailure detail carries the rule as its
// type for gRPC-level callers (bigtable v1.58.0 rebuilds the status without
// details, so through a *bigtable.Client read the rule from the message:
// "rule <name>:"). A MutateRows request with one bad entry is refused whole: none of
// its entries is written (ApplyBulk returns the refusal as its error).
//
// WithReadFilter also puts the table's TTL filter in front of the filter of
// every ReadRows request and CheckAndMutateRow predicate, so legacy reads
// stop seeing expired cells that GC has not collected yet.
//
// The interceptors never modify the caller's request: a rewritten read is a
// shallow copy (row sets and mutations are shared, not copied), so the
// client's own retries resend the original and get the filter exactly once.
// Checking is a pass over the mutations; nothing is copied.
//
// What is covered, checked on cloud.google.com/go/bigtable v1.58.0:
//   - Every classic data RPC goes through connections dialled with the
//     client's options (the default pool, the Bigtable channel pool and its
//     DirectPath/DirectAccess dialer), so option.WithGRPCDialOption reaches
//     them. (The DirectAccess diagnostic probe dials its own channel but
//     sends only PingAndWarm.)
//   - A pre-dialled connection (option.WithGRPCConn, and
//     BIGTABLE_EMULATOR_HOST, under which the client dials one itself)
//     ignores dial options: put DialOptions on that connection instead.
//   - The session data plane (OpenTable streams carrying their own mutation
//     messages) cannot be inspected. The guard keeps the server's
//     GetClientConfiguration from moving traffic there (session load 0) and
//     refuses session streams; create guarded clients with
//     bigtable.ClientConfig{DisableSession: true}.
//   - Admin RPCs, SampleRowKeys, SQL queries and change streams pass
//     untouched.
package wireguard
