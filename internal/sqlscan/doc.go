// Package sqlscan finds the tables a GoogleSQL query reads, so that
// ttlclient.Client.PrepareStatement can refuse, before any RPC, a query
// over managed families (a SQL query sends no row filter, so bttl cannot
// hide expired cells from it; see docs/design.md#sql).
//
// It is pure: a tokenizer (tokens) that skips comments and the contents of
// string literals, and a classifier (Tables) that places every FROM keyword
// of the query and refuses, with an error saying why, what it cannot
// classify (subqueries, joins, unions, pipe syntax, paths, a second
// statement) rather than guess. It knows nothing of tables' schemas: the
// caller decides what a table's families mean.
package sqlscan
