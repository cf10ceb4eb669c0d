package prodserver

import (
	"fmt"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The size limits the double enforces. Each cites its source.
const (
	// MaxMutations is the most mutations one request may carry: per row for
	// MutateRow ("Must contain at least one entry and at most 100000",
	// MutateRowRequest.mutations in google/bigtable/v2/bigtable.proto; the
	// Writes page, https://cloud.google.com/bigtable/docs/writes: "up to
	// 100,000 mutations for that row"), in total over a MutateRows'
	// entries ("in total the entries can contain at most 100000
	// mutations"), per branch of a CheckAndMutateRow (true_mutations and
	// false_mutations: "at most 100000" each) and for a
	// ReadModifyWriteRow's rules ("there can be at most 100000 rules").
	MaxMutations = 100000
	// MaxRowKeyBytes is the longest row key: "May contain any non-empty byte
	// string up to 4KiB in length" (Row.key, google/bigtable/v2/data.proto)
	// and "Row keys: 4 KB per row key" (Quotas and limits, "Limits on data
	// size", https://cloud.google.com/bigtable/quotas#limits-data-size).
	MaxRowKeyBytes = 4 << 10
	// MaxFilterBytes is the largest row filter, as serialized: "Filters: 20
	// KB per filter" (Quotas and limits, "Limits on data size").
	MaxFilterBytes = 20 << 10
	// microsPerMilli: production tables keep millisecond granularity. Table
	// .granularity in google/bigtable/admin/v2/table.proto: "Timestamps not
	// matching the granularity will be rejected. If unspecified at creation
	// time, the value will be set to MILLIS"; the Writes page: "Timestamps
	// ... must be microsecond values with at most millisecond precision. A
	// timestamp with microsecond precision, such as 3023483279876543, is
	// rejected."
	microsPerMilli = 1000
)

// granularityError is production's refusal of a timestamp that is not a
// whole millisecond, as clients have reported it: "INVALID_ARGUMENT: Error
// in Mutation list : Error in element #0 : Timestamp granularity mismatch.
// Expected a multiple of 1000 (millisecond granularity), but got
// 32685506681." (https://github.com/brianfrankcooper/YCSB/issues/733); a
// TimestampRangeFilter's the same without the prefix
// (https://github.com/googleapis/google-cloud-python/issues/4932).
func granularityError(prefix string, ts int64) error {
	return status.Errorf(codes.InvalidArgument, "%sTimestamp granularity mismatch. Expected a multiple of 1000 (millisecond granularity), but got %d.", prefix, ts)
}

func mutationPrefix(i int) string {
	return fmt.Sprintf("Error in Mutation list : Error in element #%d : ", i)
}

// The limits' refusals: INVALID_ARGUMENT, production's code for a request
// the server will not take as written; the messages are the double's.
func tooManyMutations(n, limit int) error {
	return status.Errorf(codes.InvalidArgument, "Too many mutations in one request: %d, at most %d are allowed", n, limit)
}

// maxMutations is the limit the double enforces: MaxMutations unless
// Config.MaxMutations lowers it.
func (s *Server) maxMutations() int {
	if n := s.cfg.MaxMutations; n > 0 && n < MaxMutations {
		return n
	}
	return MaxMutations
}

func checkRowKey(key []byte) error {
	if len(key) > MaxRowKeyBytes {
		return status.Errorf(codes.InvalidArgument, "Row key is too long: %d bytes, at most %d are allowed", len(key), MaxRowKeyBytes)
	}
	return nil
}

// checkFilter refuses a filter larger than MaxFilterBytes or holding a
// timestamp range that is not in whole milliseconds.
func checkFilter(f *btpb.RowFilter) error {
	if f == nil {
		return nil
	}
	if n := proto.Size(f); n > MaxFilterBytes {
		return status.Errorf(codes.InvalidArgument, "Filter is too large: %d bytes, at most %d are allowed", n, MaxFilterBytes)
	}
	return checkFilterTimestamps(f)
}

func checkFilterTimestamps(f *btpb.RowFilter) error {
	switch x := f.GetFilter().(type) {
	case *btpb.RowFilter_TimestampRangeFilter:
		for _, ts := range []int64{x.TimestampRangeFilter.GetStartTimestampMicros(), x.TimestampRangeFilter.GetEndTimestampMicros()} {
			if ts%microsPerMilli != 0 {
				return granularityError("", ts)
			}
		}
	case *btpb.RowFilter_Chain_:
		for _, sub := range x.Chain.GetFilters() {
			if err := checkFilterTimestamps(sub); err != nil {
				return err
			}
		}
	case *btpb.RowFilter_Interleave_:
		for _, sub := range x.Interleave.GetFilters() {
			if err := checkFilterTimestamps(sub); err != nil {
				return err
			}
		}
	case *btpb.RowFilter_Condition_:
		for _, sub := range []*btpb.RowFilter{x.Condition.GetPredicateFilter(), x.Condition.GetTrueFilter(), x.Condition.GetFalseFilter()} {
			if sub == nil {
				continue
			}
			if err := checkFilterTimestamps(sub); err != nil {
				return err
			}
		}
	}
	return nil
}

// prepareMutations checks one row's mutations for millisecond granularity
// and resolves what the server decides, so that the cell the backend
// stores and the cell the replicator copies are the same:
//   - a SetCell at -1 (server time) gets nowMicros, a whole millisecond;
//   - a client-auto-generated timestamp is truncated to the millisecond,
//     as Mutation.TimestampOrigin says the server does ("The server will
//     truncate the timestamp's precision to match the table's
//     granularity"); any other timestamp not in whole milliseconds is
//     refused ("The server will reject the mutation if the timestamp's
//     precision does not match the table's granularity", USER_SPECIFIED).
//
// It rewrites muts in place.
func prepareMutations(muts []*btpb.Mutation, nowMicros int64) error {
	for i, m := range muts {
		switch x := m.GetMutation().(type) {
		case *btpb.Mutation_SetCell_:
			sc := x.SetCell
			switch {
			case sc.TimestampMicros == -1:
				sc.TimestampMicros = nowMicros
			case m.GetTimestampOrigin() == btpb.Mutation_CLIENT_AUTO_GENERATED:
				sc.TimestampMicros -= sc.TimestampMicros % microsPerMilli
			case sc.TimestampMicros%microsPerMilli != 0:
				return granularityError(mutationPrefix(i), sc.TimestampMicros)
			}
		case *btpb.Mutation_DeleteFromColumn_:
			r := x.DeleteFromColumn.GetTimeRange()
			for _, ts := range []int64{r.GetStartTimestampMicros(), r.GetEndTimestampMicros()} {
				if ts%microsPerMilli != 0 {
					return granularityError(mutationPrefix(i), ts)
				}
			}
		case *btpb.Mutation_AddToCell_, *btpb.Mutation_MergeToCell_:
			// "must be a raw_timestamp_micros that matches the table's
			// granularity" (Mutation.AddToCell.timestamp, MergeToCell's).
			ts := m.GetAddToCell().GetTimestamp()
			if m.GetMergeToCell() != nil {
				ts = m.GetMergeToCell().GetTimestamp()
			}
			micros := ts.GetRawTimestampMicros()
			switch {
			case m.GetTimestampOrigin() == btpb.Mutation_CLIENT_AUTO_GENERATED && ts != nil:
				ts.Kind = &btpb.Value_RawTimestampMicros{RawTimestampMicros: micros - micros%microsPerMilli}
			case micros%microsPerMilli != 0:
				return granularityError(mutationPrefix(i), micros)
			}
		}
	}
	return nil
}
