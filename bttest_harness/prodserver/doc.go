// Package prodserver is a production-rules Bigtable server for tests: a
// test double of documented behaviour of Cloud Bigtable that the emulators
// (bttest, cbtemulator) do not have. It serves the Bigtable data API in
// front of one backend server per cluster (in-process bttest, or any
// emulator at an address, such as cbtemulator), forwards each call through
// the backend's generated gRPC client, and enforces, with its own
// server-side logic, each rule citing its source in a comment:
//
//   - app profiles by ID (a request's app_profile_id; none is the
//     "default" profile): single-cluster with or without transactional
//     writes, multi-cluster, Data Boost; an unknown profile is refused;
//     CheckAndMutateRow and ReadModifyWriteRow need a single-cluster profile
//     that allows transactional writes (FAILED_PRECONDITION "Single-row
//     transactions are not allowed by this app profile" otherwise); a Data
//     Boost profile refuses every write and reads a replica that the
//     replicator feeds DataBoostLag late;
//   - millisecond granularity: a timestamp not a multiple of 1000
//     microseconds (a SetCell's, an AddToCell's or MergeToCell's, a
//     delete range or filter bound) is refused (INVALID_ARGUMENT
//     "Timestamp granularity mismatch. ..."), a client-generated one
//     truncated;
//   - size limits: MaxMutations per request (Config.MaxMutations lowers
//     it for a test), MaxRowKeyBytes per row key, MaxFilterBytes per
//     filter;
//   - faults: RESOURCE_EXHAUSTED with a google.rpc.RetryInfo detail at
//     Config.ThrottleRate, UNAVAILABLE after a backend applied a write at
//     Config.UnavailableRate, both drawn from streams seeded by Config.Seed,
//     or chosen per call by Config.Fault;
//   - a replicated instance: with two or more Config.Clusters, each write
//     accepted on one cluster is applied to the others Config.Lag later by
//     an asynchronous replicator, with every server-decided value resolved
//     first (server timestamps, the branch a CheckAndMutateRow took, the
//     cells a ReadModifyWriteRow produced), so every cluster holds the same
//     cells. Single-cluster profiles go to their cluster, multi-cluster
//     ones to a seeded choice (RouteMultiCluster pins it).
//
// Tests never sleep for replication: with Config.Clock set (a manual
// clock), nothing replicates on its own, ReplicateDue applies what the
// clock says is due and Flush applies everything; with the real clock a
// background replicator applies writes as they fall due, and Flush still
// applies the rest at once. The table admin API fans table, column family
// and GC rule changes out to every backend, so bigtable.AdminClient on
// Server.Addr creates a table on every cluster; its consistency token
// reports the replicator. The instance admin API shows the clusters and
// the profiles (GetAppProfile, ListAppProfiles).
//
// What the double does not model (conflicting writes on two clusters,
// failover, latency, quotas by rate) is listed in docs/emulators.md,
// section "The production-rules server".
//
// The package imports neither bttl's client nor the harness: a server
// double does not depend on the code it tests.
package prodserver
