package changestream

import (
	"encoding/hex"
	"fmt"
	"sort"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
)

// Partition is a change-stream partition: the row range [Start, End). An
// empty End means the end of the table. "The row range covered by this
// partition and is specified by [start_key_closed, end_key_open)"
// (StreamPartition.row_range, google/bigtable/v2/data.proto).
type Partition struct {
	Start, End string
}

// String names the partition for errors and logs.
func (p Partition) String() string { return fmt.Sprintf("[%q,%q)", p.Start, p.End) }

// Key is the partition's stable name in a Store: hex start, '-', hex end.
func (p Partition) Key() string {
	return hex.EncodeToString([]byte(p.Start)) + "-" + hex.EncodeToString([]byte(p.End))
}

// contains reports whether q lies within p.
func (p Partition) contains(q Partition) bool {
	return q.Start >= p.Start && (p.End == "" || (q.End != "" && q.End <= p.End))
}

func (p Partition) proto() *btpb.StreamPartition {
	rr := &btpb.RowRange{StartKey: &btpb.RowRange_StartKeyClosed{StartKeyClosed: []byte(p.Start)}}
	if p.End != "" {
		rr.EndKey = &btpb.RowRange_EndKeyOpen{EndKeyOpen: []byte(p.End)}
	}
	return &btpb.StreamPartition{RowRange: rr}
}

// partitionOf reads a StreamPartition; a range that is not
// [start_key_closed, end_key_open) is refused, as the field doc allows no
// other form.
func partitionOf(sp *btpb.StreamPartition) (Partition, error) {
	if sp == nil || sp.GetRowRange() == nil {
		return Partition{}, nil
	}
	rr := sp.GetRowRange()
	var p Partition
	switch k := rr.StartKey.(type) {
	case nil:
	case *btpb.RowRange_StartKeyClosed:
		p.Start = string(k.StartKeyClosed)
	default:
		return Partition{}, fmt.Errorf("%w: partition start %T", ErrProtocol, k)
	}
	switch k := rr.EndKey.(type) {
	case nil:
	case *btpb.RowRange_EndKeyOpen:
		p.End = string(k.EndKeyOpen)
	default:
		return Partition{}, fmt.Errorf("%w: partition end %T", ErrProtocol, k)
	}
	return p, nil
}

// Token is a position in a partition's stream: "An encoded position in the
// stream to restart reading from" (StreamContinuationToken.token,
// data.proto), for Partition.
type Token struct {
	Partition Partition
	Token     string
}

func (t Token) proto() *btpb.StreamContinuationToken {
	return &btpb.StreamContinuationToken{Partition: t.Partition.proto(), Token: t.Token}
}

// covers reports whether the tokens' partitions tile p exactly: "the union
// of the token partitions must exactly cover the request's partition.
// Otherwise, INVALID_ARGUMENT will be returned"
// (ReadChangeStreamRequest.continuation_tokens, bigtable.proto).
func covers(p Partition, toks []Token) bool {
	if len(toks) == 0 {
		return false
	}
	ts := append([]Token(nil), toks...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Partition.Start < ts[j].Partition.Start })
	at := p.Start
	for i, t := range ts {
		if t.Partition.Start != at {
			return false
		}
		if t.Partition.End == "" {
			return i == len(ts)-1 && p.End == ""
		}
		at = t.Partition.End
	}
	return at == p.End
}
