package changestreams

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/bigtable"

	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/internal/keytext"
)

// RunGC collects table's garbage at the clock's now: it deletes, on the
// backend, every cell its family's GC rule deletes and records the
// deletions as GARBAGE_COLLECTION changes ("A system-initiated mutation as
// part of garbage collection", DataChange.Type), one change per row, each
// cell a DeleteFromColumn over its own timestamp's millisecond. It returns
// how many cells it deleted. The rules, from GcRule in
// google/bigtable/admin/v2/table.proto:
//
//   - max_num_versions: "Delete all cells in a column except the most
//     recent N."
//   - max_age: "Delete cells in a column older than the given age": a cell
//     whose timestamp lies before now minus the age (bttest's cutoff too);
//   - intersection: "Delete cells that would be deleted by every nested
//     rule."
//   - union: "Delete cells that would be deleted by any nested rule."
//
// Writes wait while it runs, so the log orders the deletions after every
// write the deletion saw.
func (s *Server) RunGC(ctx context.Context, tableID string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := s.fullName(tableID)
	t := s.tableLocked(name)
	now := s.clock.Now()
	type col struct {
		fam, qual string
		ts        []int64 // newest first, as Bigtable returns a column's cells
	}
	type row struct {
		key  []byte
		cols []*col
	}
	var rows []*row
	err := s.client.Open(tableID).ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		rw := &row{key: []byte(r.Key())}
		for fam, items := range r {
			var c *col
			for _, it := range items {
				qual := strings.TrimPrefix(it.Column, fam+":")
				if c == nil || c.qual != qual {
					c = &col{fam: fam, qual: qual}
					rw.cols = append(rw.cols, c)
				}
				c.ts = append(c.ts, int64(it.Timestamp))
			}
		}
		rows = append(rows, rw)
		return true
	})
	if err != nil {
		return 0, err
	}
	cutoff := now.UnixMicro()
	deleted := 0
	for _, r := range rows {
		var muts []*btpb.Mutation
		for _, c := range r.cols {
			rule := t.rules[c.fam]
			if rule == nil {
				continue
			}
			for i, ts := range c.ts {
				if !collects(rule, i, ts, cutoff) {
					continue
				}
				end := ts + 1
				if ts%1000 == 0 {
					end = ts + 1000
				}
				muts = append(muts, &btpb.Mutation{Mutation: &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
					FamilyName: c.fam, ColumnQualifier: []byte(c.qual),
					TimeRange: &btpb.TimestampRange{StartTimestampMicros: ts, EndTimestampMicros: end},
				}}})
			}
		}
		if len(muts) == 0 {
			continue
		}
		if _, err := s.data.MutateRow(ctx, &btpb.MutateRowRequest{TableName: name, RowKey: r.key, Mutations: muts}); err != nil {
			return deleted, fmt.Errorf("changestreams: GC of row %s: %w", keytext.Quote(string(r.key)), err)
		}
		deleted += len(muts)
		s.appendLocked(t, r.key, true, now, muts)
		if err := s.dropIfEmptyLocked(ctx, name, r.key, muts); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// collects reports whether rule deletes the cell at index i (newest first)
// with timestamp ts, at now (cutoff, in microseconds).
func collects(rule *btapb.GcRule, i int, ts, cutoff int64) bool {
	switch r := rule.Rule.(type) {
	case *btapb.GcRule_MaxNumVersions:
		return i >= int(r.MaxNumVersions)
	case *btapb.GcRule_MaxAge:
		return ts < cutoff-r.MaxAge.AsDuration().Microseconds()
	case *btapb.GcRule_Intersection_:
		if len(r.Intersection.Rules) == 0 {
			return false
		}
		for _, sub := range r.Intersection.Rules {
			if !collects(sub, i, ts, cutoff) {
				return false
			}
		}
		return true
	case *btapb.GcRule_Union_:
		for _, sub := range r.Union.Rules {
			if collects(sub, i, ts, cutoff) {
				return true
			}
		}
	}
	return false
}
