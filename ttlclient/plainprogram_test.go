package ttlclient_test

// This file is a program written against the plain client, as its package
// documentation describes: it imports only cloud.google.com/go/bigtable and
// takes a bigtable.TableAPI. TestPlainProgramThroughBTTL runs it through
// bttl with only the constructor changed.

import (
	"context"
	"sort"

	"cloud.google.com/go/bigtable"
)

// buildVisit is the helper elsewhere that builds mutations: a visit cell at
// the server's time.
func buildVisit(page string) *bigtable.Mutation {
	m := bigtable.NewMutation()
	m.Set("visits", page, bigtable.ServerTime, []byte("1"))
	return m
}

// recordVisits writes one row per user.
func recordVisits(ctx context.Context, tbl bigtable.TableAPI, users []string, page string) error {
	muts := make([]*bigtable.Mutation, len(users))
	for i := range users {
		muts[i] = buildVisit(page)
	}
	errs, err := tbl.ApplyBulk(ctx, users, muts)
	if err != nil {
		return err
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// pagesOf is the pages a user visited, latest version of each.
func pagesOf(ctx context.Context, tbl bigtable.TableAPI, user string) ([]string, error) {
	r, err := tbl.ReadRow(ctx, user, bigtable.RowFilter(bigtable.LatestNFilter(1)))
	if err != nil {
		return nil, err
	}
	var pages []string
	for _, it := range r["visits"] {
		pages = append(pages, it.Column)
	}
	sort.Strings(pages)
	return pages, nil
}

// activeUsers lists the rows holding a visit.
func activeUsers(ctx context.Context, tbl bigtable.TableAPI) ([]string, error) {
	var users []string
	err := tbl.ReadRows(ctx, bigtable.PrefixRange("user-"), func(r bigtable.Row) bool {
		users = append(users, r.Key())
		return true
	}, bigtable.RowFilter(bigtable.FamilyFilter("^visits$")))
	return users, err
}

// countVisit increments a plain counter.
func countVisit(ctx context.Context, tbl bigtable.TableAPI, user string) error {
	rmw := bigtable.NewReadModifyWrite()
	rmw.Increment("stats", "visits", 1)
	_, err := tbl.ApplyReadModifyWrite(ctx, user, rmw)
	return err
}

// claim takes a lock cell unless one is held, and reports whether it did.
func claim(ctx context.Context, tbl bigtable.TableAPI, row, owner string) (bool, error) {
	take := bigtable.NewMutation()
	take.Set("visits", "lock", bigtable.ServerTime, []byte(owner))
	var held bool
	err := tbl.Apply(ctx, row, bigtable.NewCondMutation(bigtable.ColumnFilter("^lock$"), nil, take), bigtable.GetCondMutationResult(&held))
	return !held, err
}
