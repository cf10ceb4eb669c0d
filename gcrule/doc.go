// Package gcrule compares a column family's actual garbage-collection rule,
// as the admin API returns it, with the rule its strategy.Policy needs
// (docs/design.md#verification).
//
// It reads the raw GcRule proto (AdminClient.TableAdminClientV2().GetTable),
// not bigtable.FamilyInfo.FullGCPolicy: the client's proto-to-GCPolicy
// conversion drops the sub-second part of a max age, so a family whose max
// age is 1.5s would look like the 1s a one-second family needs. Rules are
// compared by meaning, exactly: nested unions are flattened (a union of max
// ages collects at the smallest, of max versions at the fewest), an empty
// rule inside a union is ignored, and an intersection anywhere is refused
// because no read filter can reproduce it.
package gcrule
