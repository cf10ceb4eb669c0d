// Package wireguard applies bttl's write guardrails (docs/design.md#guardrails)
// to code that still uses a plain *bigtable.Client, as gRPC client
// interceptors:
//
//	guard, err := wireguard.New(map[string]strategy.Schema{"events": schema}, wireguard.WithReadFilter())
//	client, err := bigtable.NewClientWithConfig(ctx, project, instance,
//		bigtable.ClientConfig{DisableSession: true}, guard.ClientOptions()...)
//
// Which requests are guarded. New takes table IDs, as Client.Open does,
// not full names: a request is checked against a schema when its
// table_name is projects/{project}/instances/{instance}/tables/{ID}, or
// its authorized_view_name is
// projects/{project}/instances/{instance}/tables/{ID}/authorizedViews/{view},
// in any project and instance the client reaches. Names are parsed
// exactly, segment by segment, so a project or instance whose ID happens
// to be "tables" is just an ID. A request naming an authorized view is
// checked and filtered as its table (the view's schema is the table's).
// Materialized views are instance-level
// (projects/{project}/instances/{instance}/materializedViews/{view}) and
// their names do not say which table they read: WithMaterializedView
// declares a view's families and policies by view ID.
//
// On a guarded table, MutateRow, every entry of MutateRows, both branches of
// CheckAndMutateRow and ReadModifyWriteRow are checked before anything is
// sent: a server timestamp (-1) on a managed family, a timestamp already
// expired (one-second: <= now), a negative timestamp, a sequence timestamp
// that is not seq*1000, ReadModifyWrite/AddToCell/MergeToCell on a managed
// family, or a family the schema does not name (unless WithUnlistedFamilies
// lets such families pass as unmanaged) is refused with gRPC status
// FailedPrecondition. The message names the rule, table, family, column and
// row; an errdetails.PreconditionFailure detail carries the rule as its
// type for gRPC-level callers (bigtable v1.58.0 rebuilds the status without
// details, so through a *bigtable.Client read the rule from the message:
// "rule <name>:"). A MutateRows request with one bad entry is refused whole: none of
// its entries is written (ApplyBulk returns the refusal as its error).
//
// What bttl's client adds, the guard adds (docs/design.md#wire-guard): in a
// strategy.SingleValue family a delete of the whole column right before
// each SetCell, so the last write wins whatever the TTLs; in a family with
// strategy.WithWriteTime a companion holding the guard's clock right after
// each SetCell, and the same delete of the companion right after each
// column delete. The guard stores no companion it did not compute: any
// write to a write-time family's reserved qualifiers (from 0xFF 0xFF on) is
// refused (RuleReservedColumn), a companion sent beside its cell included.
//
// WithReadFilter also puts the table's TTL filter in front of the filter of
// every ReadRows request and CheckAndMutateRow predicate, so legacy reads
// stop seeing expired cells that GC has not collected yet. A ReadRows of a
// materialized view gets the filter of the schema WithMaterializedView
// declared for it, and is refused (RuleUndeclaredMaterializedView) when
// none was declared; declare an empty schema for a view with no managed
// data. A continuous materialized view aggregates cells until GC really
// removes them, so its aggregates include expired cells no filter can
// take out.
//
// Both paths. gRPC runs the unary interceptor for every conn.Invoke and
// the stream interceptor for every conn.NewStream, whatever the method
// name, and servers accept either form, so both interceptors match
// guarded methods by name and apply the same checks: MutateRows invoked
// as a unary call, or MutateRow sent on a stream, is checked (and a read
// filtered) exactly as in its normal form, and refused with nothing sent.
// Session and (unless allowed) SQL methods are refused on both paths.
//
// Fail closed. A request on a guarded method (the four writes; ReadRows
// with WithReadFilter), on either path, that the guard cannot classify is refused with
// FailedPrecondition, rule RuleUnclassifiable, and a message saying why:
// a resource name that is not exactly one of the forms above, no name,
// two names for different resources (a table and another table's
// authorized view), fields or a mutation kind newer than the guard's
// protos at any depth (an unknown field inside a SetCell too), or a
// message that is not a protocol buffer or does not decode as the
// method's request. A protocol buffer message of another Go
// type (a dynamicpb.Message, say) is decoded from its wire form into the
// generated type, checked, and that decoded request is what is sent.
//
// Keys in refusals. A refusal's message and PreconditionFailure detail
// show the row key and column quoted and cut to 64 bytes, or, with
// WithKeyRedaction, only their lengths and keyed tags, as ttlclient does
// (docs/design.md#keys-in-messages).
//
// SQL. PrepareQuery and ExecuteQuery send SQL text the guard cannot
// filter, and a query may read any table of the instance: while the guard
// guards any managed family they are refused (RuleSQL), with or without
// WithReadFilter, unless WithSQLAllowed is given.
//
// Streams. Streams of checked methods (MutateRows, with WithReadFilter
// ReadRows, and unary methods sent on a stream) are opened only by a SendMsg whose request passed the guard, so whatever the
// caller or an interceptor installed before the guard does first
// (Context, Header, Trailer, RecvMsg on another goroutine, CloseSend), a
// refusal reaches every later call as FailedPrecondition and nothing
// reaches the server.
//
// The interceptors never modify the caller's request: a rewritten request
// (a filtered read, a write given single-value deletes or companions) is a
// shallow copy (row sets and mutations are shared, not copied), so the
// client's own retries resend the original and get the filter, deletes and
// companions exactly once. Checking a request that needs nothing added is
// a pass over the mutations; nothing is copied.
//
// What is covered, checked on cloud.google.com/go/bigtable v1.58.0:
//   - Every classic data RPC goes through connections dialled with the
//     client's options (the default pool, the Bigtable channel pool and its
//     DirectPath/DirectAccess dialer), so option.WithGRPCDialOption reaches
//     them. (The DirectAccess diagnostic probe dials its own channel but
//     sends only PingAndWarm.)
//   - Under BIGTABLE_EMULATOR_HOST the client dials the emulator itself and
//     ignores dial options: ClientOptions then return a connection to the
//     emulator carrying the guard (option.WithGRPCConn), which replaces
//     the client's own. A connection you dial yourself (option.WithGRPCConn)
//     ignores dial options too: put DialOptions on it. Guard.Verify tells
//     whether a client's requests go through the guard.
//   - The session data plane (OpenTable streams carrying their own mutation
//     messages) cannot be inspected. The guard keeps the server's
//     GetClientConfiguration from moving traffic there (session load 0) and
//     refuses session streams; create guarded clients with
//     bigtable.ClientConfig{DisableSession: true}.
//   - Admin RPCs, SampleRowKeys (row keys only, no cells) and change
//     streams pass untouched, as do reads without WithReadFilter.
package wireguard
