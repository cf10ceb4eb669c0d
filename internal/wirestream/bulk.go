package wirestream

import (
	"context"
	"io"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/internal/rules"
)

// bulkStream is a MutateRows stream whose entries are checked one by one
// (bttl's client interceptor, for Table.API's ApplyBulk): each entry check
// refuses is left out of the request and answered, as a server answers a
// failed entry, with its own status, so the other rows are written and
// each refused row gets its error at its index. The stream is opened only
// once the request is known, and not at all when every entry is refused.
// The client calls SendMsg, CloseSend, then RecvMsg, on one goroutine.
//
// The client groups rows by their own mutation count, within Bigtable's
// limit per request (MaxRequestMutations); the check may add mutations (a
// single-value family's deletes, write-time companions), so a rewritten
// request over the limit is sent as several, one stream after the other,
// each within it.
type bulkStream struct {
	check    func(*btpb.MutateRowsRequest_Entry) (*btpb.MutateRowsRequest_Entry, *status.Status)
	other    func(any) error
	ctx      context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	cs        grpc.ClientStream // nil until sent, and when nothing is
	parts     []bulkPart        // the requests to send, in turn
	part      int               // the one cs carries
	refused   []*btpb.MutateRowsResponse_Entry
	answered  bool // refused has been received
	sendError error
}

// NewBulk is a MutateRows stream sending, for each entry of its request,
// what check returns, and answering an entry check refuses (a non-nil
// status) with that status; a message that is not a MutateRowsRequest
// fails with other's error.
func NewBulk(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts []grpc.CallOption,
	check func(*btpb.MutateRowsRequest_Entry) (*btpb.MutateRowsRequest_Entry, *status.Status), other func(any) error) grpc.ClientStream {
	return &bulkStream{check: check, other: other, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts}
}

// bulkPart is one request a bulkStream sends, and the client's request
// index of each of its entries.
type bulkPart struct {
	req  *btpb.MutateRowsRequest
	kept []int64
}

// MaxRequestMutations is the most mutations Bigtable takes in one
// MutateRows request ("in total the entries can contain at most 100000
// mutations", google.bigtable.v2.MutateRowsRequest.entries), the client's
// own grouping bound (maxMutations, v1.58.0).
const MaxRequestMutations = 100000

func (s *bulkStream) SendMsg(m any) error {
	r, ok := m.(*btpb.MutateRowsRequest)
	if !ok {
		s.sendError = s.other(m) // refuses what it cannot classify
		return s.sendError
	}
	var entries []*btpb.MutateRowsRequest_Entry
	var kept []int64
	changed := false
	total := 0
	for i, e := range r.GetEntries() {
		out, st := s.check(e)
		if st == nil && len(out.GetMutations()) > MaxRequestMutations {
			// Over the limit alone once the check added to it: the
			// server would refuse the request carrying it, failing the
			// other rows with it. Answered as the server answers it,
			// alone, as the client's own grouping would have it.
			st = status.Newf(codes.InvalidArgument,
				"bttl: the row's %d mutations (with its families' single-value deletes and write-time companions) are over Bigtable's %d per request; nothing of it was sent",
				len(out.GetMutations()), MaxRequestMutations)
		}
		if st != nil {
			s.refused = append(s.refused, &btpb.MutateRowsResponse_Entry{Index: int64(i), Status: st.Proto()})
			changed = true
			continue
		}
		changed = changed || out != e
		total += len(out.GetMutations())
		entries = append(entries, out)
		kept = append(kept, int64(i))
	}
	if len(entries) == 0 {
		return nil
	}
	if !changed {
		s.parts = []bulkPart{{req: r, kept: kept}}
	} else {
		s.parts = splitBulk(r, entries, kept, total)
	}
	return s.open()
}

// splitBulk is the requests carrying entries (of r, whose request indexes
// are kept), each within MaxRequestMutations where an entry alone is.
func splitBulk(r *btpb.MutateRowsRequest, entries []*btpb.MutateRowsRequest_Entry, kept []int64, total int) []bulkPart {
	part := func(from, to int) bulkPart {
		out := rules.ShallowCopy(r)
		out.Entries = entries[from:to:to]
		return bulkPart{req: out, kept: kept[from:to:to]}
	}
	if total <= MaxRequestMutations {
		return []bulkPart{part(0, len(entries))}
	}
	var parts []bulkPart
	from, n := 0, 0
	for i, e := range entries {
		if k := len(e.GetMutations()); n+k > MaxRequestMutations && i > from {
			parts = append(parts, part(from, i))
			from, n = i, 0
		}
		n += len(e.GetMutations())
	}
	return append(parts, part(from, len(entries)))
}

// open opens the stream of the current part and sends its request, closed:
// the client closes the first itself (CloseSend), the stream closes the
// others.
func (s *bulkStream) open() error {
	cs, err := s.streamer(s.ctx, s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		s.sendError = err
		return err
	}
	s.cs = cs
	if err := cs.SendMsg(s.parts[s.part].req); err != nil && (s.part == 0 || err != io.EOF) {
		return err // io.EOF on a later part: RecvMsg gives the stream's status
	}
	if s.part > 0 {
		return cs.CloseSend()
	}
	return nil
}

func (s *bulkStream) CloseSend() error {
	if s.cs == nil {
		return nil
	}
	return s.cs.CloseSend()
}

func (s *bulkStream) RecvMsg(m any) error {
	if s.sendError != nil {
		return s.sendError
	}
	if !s.answered && len(s.refused) > 0 {
		s.answered = true
		if r, ok := m.(*btpb.MutateRowsResponse); ok {
			r.Reset()
			r.Entries = s.refused
			return nil
		}
	}
	if s.cs == nil {
		return io.EOF
	}
	err := s.cs.RecvMsg(m)
	for err == io.EOF && s.part+1 < len(s.parts) {
		s.part++
		if err = s.open(); err != nil {
			return err
		}
		err = s.cs.RecvMsg(m)
	}
	if err != nil {
		return err
	}
	if r, ok := m.(*btpb.MutateRowsResponse); ok {
		kept := s.parts[s.part].kept
		for _, e := range r.GetEntries() {
			if e.GetIndex() >= 0 && e.GetIndex() < int64(len(kept)) {
				e.Index = kept[e.GetIndex()]
			}
		}
	}
	return nil
}

func (s *bulkStream) Header() (metadata.MD, error) {
	if s.cs == nil {
		return metadata.MD{}, nil
	}
	return s.cs.Header()
}

func (s *bulkStream) Trailer() metadata.MD {
	if s.cs == nil {
		return metadata.MD{}
	}
	return s.cs.Trailer()
}

func (s *bulkStream) Context() context.Context {
	if s.cs == nil {
		return s.ctx
	}
	return s.cs.Context()
}
