package wirestream

import (
	"context"
	"io"
	"math"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/bttl/bttl/internal/rules"
)

// bulkStream is a MutateRows stream whose entries are checked one by one
// (bttl's client interceptor, for Table.API's ApplyBulk): each entry check
// refuses is left out of the request and answered, as a server answers a
// failed entry, with its own status, so the other rows are written and
// each refused row gets its error at its index. The stream is opened only
// once the request is known, and not at all when every entry is refused
// (a request without entries is sent: the server answers it).
// The client calls SendMsg, CloseSend, then RecvMsg, on one goroutine.
//
// The client groups rows by their own mutation count, within Bigtable's
// limit per request (rules.MaxRequestMutations); the check may add mutations (a
// single-value family's deletes, write-time companions), so a rewritten
// request over the limit is sent as several, one stream after the other,
// each within it.
type bulkStream struct {
	whole    func(any) (*btpb.MutateRowsRequest, error)
	check    func(*btpb.MutateRowsRequest_Entry) (*btpb.MutateRowsRequest_Entry, *status.Status)
	other    func(any) error
	ctx      context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	// settledCh is closed once SendMsg (or a CloseSend before it) has
	// settled the stream: first is then its first part's stream (nil
	// when nothing was sent), or sendError its refusal. Header waits for
	// it, as the lazy stream's does, so that an interceptor before this
	// one calling Header from another goroutine gets the outcome.
	settledCh chan struct{}
	first     grpc.ClientStream
	closed    func() error // the outcome of a CloseSend before any request (whole mode)

	// partsCtx is the context of every part of a request sent as several,
	// its Context: done once the last part has ended (cancel), not when
	// the first has, so that the stream is in flight until its last
	// answer.
	partsCtx context.Context
	cancel   context.CancelFunc

	cs        grpc.ClientStream // nil until sent, and when nothing is
	parts     []bulkPart        // the requests to send, in turn
	part      int               // the one cs carries
	refused   []*btpb.MutateRowsResponse_Entry
	answered  bool // refused has been received
	sendError error
	recvError error // a later part's failure to open or send, on the receiving goroutine
}

// NewBulk is a MutateRows stream sending, for each entry of its request,
// what check returns, and answering an entry check refuses (a non-nil
// status) with that status; a message that is not a MutateRowsRequest
// fails with other's error.
func NewBulk(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts []grpc.CallOption,
	check func(*btpb.MutateRowsRequest_Entry) (*btpb.MutateRowsRequest_Entry, *status.Status), other func(any) error) grpc.ClientStream {
	return &bulkStream{check: check, other: other, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts, settledCh: make(chan struct{})}
}

// NewBulkWhole is a MutateRows stream sending the request whole returns
// for the caller's message (the wire guard's check: one refused entry
// refuses the request, nothing is sent), as several requests when the
// rewritten one is over Bigtable's limit (rules.MaxRequestMutations) while
// the caller's was not.
func NewBulkWhole(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts []grpc.CallOption,
	whole func(any) (*btpb.MutateRowsRequest, error), closed func() error) grpc.ClientStream {
	return &bulkStream{whole: whole, closed: closed, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts, settledCh: make(chan struct{})}
}

// settle marks the stream settled, once, on the sending goroutine.
func (s *bulkStream) settle() {
	select {
	case <-s.settledCh:
	default:
		close(s.settledCh)
	}
}

func (s *bulkStream) settled() bool {
	select {
	case <-s.settledCh:
		return true
	default:
		return false
	}
}

// bulkPart is one request a bulkStream sends, and the client's request
// index of each of its entries.
type bulkPart struct {
	req  *btpb.MutateRowsRequest
	kept []int64
}

func (s *bulkStream) SendMsg(m any) error {
	if s.settled() {
		if s.whole != nil {
			if _, err := s.whole(m); err != nil {
				return err // the message's own refusal first, as the lazy stream's
			}
		}
		if s.sendError != nil {
			return s.sendError
		}
		return status.Error(codes.Internal, "bttl: a second request on a MutateRows stream, which carries one")
	}
	defer s.settle()
	check := s.check
	changed := false
	r, ok := m.(*btpb.MutateRowsRequest)
	caller := 0 // the caller's own mutations
	for _, e := range r.GetEntries() {
		caller += len(e.GetMutations())
	}
	switch {
	case s.whole != nil:
		out, err := s.whole(m) // decodes a request of another Go type, or refuses it
		if err != nil {
			s.sendError = err
			return err
		}
		if !ok {
			caller = decodedMutations(m)
		}
		changed = !ok || out != r
		r = out
		check = func(e *btpb.MutateRowsRequest_Entry) (*btpb.MutateRowsRequest_Entry, *status.Status) { return e, nil }
	case !ok:
		s.sendError = s.other(m) // refuses what it cannot classify
		return s.sendError
	}
	if len(r.GetEntries()) == 0 {
		// Nothing to check: the server answers it (InvalidArgument, "at
		// least one entry must be specified"), not this stream.
		s.parts = []bulkPart{{req: r}}
		return s.open()
	}
	var entries []*btpb.MutateRowsRequest_Entry
	var kept []int64
	total := 0
	for i, e := range r.GetEntries() {
		out, st := check(e) // a row over the limit once checked is refused by it (rules.Table.Complete)
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
	limit := rules.RequestLimit()
	if caller > limit {
		// Over the limit as the caller sent it: the server's to refuse,
		// whole, not the rules' to split.
		limit = math.MaxInt
	}
	if !changed {
		s.parts = []bulkPart{{req: r, kept: kept}}
	} else {
		s.parts = splitBulk(r, entries, kept, total, limit)
	}
	if len(s.parts) > 1 {
		s.partsCtx, s.cancel = context.WithCancel(s.ctx)
	}
	return s.open()
}

// decodedMutations is the number of mutations of m, a MutateRowsRequest of
// another Go type the check accepted (so it decodes through its wire
// form); 0 when it does not.
func decodedMutations(m any) int {
	pm, ok := protoOf(m)
	if !ok {
		return 0
	}
	b, err := proto.Marshal(pm)
	var r btpb.MutateRowsRequest
	if err != nil || proto.Unmarshal(b, &r) != nil {
		return 0
	}
	n := 0
	for _, e := range r.GetEntries() {
		n += len(e.GetMutations())
	}
	return n
}

// protoOf is m as a protocol buffer message of either API generation.
func protoOf(m any) (proto.Message, bool) {
	switch x := m.(type) {
	case proto.Message:
		return x, true
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(x), true
	}
	return nil, false
}

// splitBulk is the requests carrying entries (of r, whose request indexes
// are kept), each within limit mutations where an entry alone is.
func splitBulk(r *btpb.MutateRowsRequest, entries []*btpb.MutateRowsRequest_Entry, kept []int64, total, limit int) []bulkPart {
	part := func(from, to int) bulkPart {
		out := rules.ShallowCopy(r)
		out.Entries = entries[from:to:to]
		return bulkPart{req: out, kept: kept[from:to:to]}
	}
	if total <= limit {
		return []bulkPart{part(0, len(entries))}
	}
	var parts []bulkPart
	from, n := 0, 0
	for i, e := range entries {
		if k := len(e.GetMutations()); n+k > limit && i > from {
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
	ctx := s.ctx
	if s.partsCtx != nil {
		ctx = s.partsCtx
	}
	cs, err := s.streamer(ctx, s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		if s.cancel != nil {
			s.cancel()
		}
		if s.part == 0 {
			s.sendError = err // on the sending goroutine; a later part's is recv's
		}
		return err
	}
	s.cs = cs
	if s.part == 0 {
		s.first = cs
	}
	if err := cs.SendMsg(s.parts[s.part].req); err != nil && (s.part == 0 || err != io.EOF) {
		return err // io.EOF on a later part: RecvMsg gives the stream's status
	}
	if s.part > 0 {
		return cs.CloseSend()
	}
	return nil
}

func (s *bulkStream) CloseSend() error {
	if !s.settled() {
		// No request was sent, so there is no stream to close: the
		// receiving side learns that nothing was sent.
		if s.closed != nil {
			s.sendError = s.closed()
		}
		s.settle()
		return nil
	}
	if s.cs == nil {
		return nil
	}
	return s.cs.CloseSend()
}

// wait blocks until the stream is settled or the caller's context ends.
func (s *bulkStream) wait() error {
	select {
	case <-s.settledCh:
		return nil
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

func (s *bulkStream) RecvMsg(m any) error {
	if err := s.wait(); err != nil {
		return err
	}
	if s.sendError != nil {
		return s.sendError
	}
	if r, ok := m.(*btpb.MutateRowsResponse); ok {
		return s.recv(r)
	}
	// A response of another Go type (the guard checks requests of any
	// protocol buffer type, wireguard.decode): received as the generated
	// type, so that its indexes are the caller's, then copied into m
	// through the wire form.
	pm, ok := protoOf(m)
	if !ok {
		return status.Errorf(codes.Internal, "bttl: a MutateRows response of type %T, not a protocol buffer message", m)
	}
	var r btpb.MutateRowsResponse
	if err := s.recv(&r); err != nil {
		return err
	}
	b, err := proto.Marshal(&r)
	if err != nil {
		return status.Errorf(codes.Internal, "bttl: a MutateRows response does not encode: %v", err)
	}
	proto.Reset(pm)
	if err := proto.Unmarshal(b, pm); err != nil {
		return status.Errorf(codes.Internal, "bttl: a MutateRows response does not decode as %T: %v", m, err)
	}
	return nil
}

// recv receives the next response into r: the refused entries first, then
// each part's answers, their indexes the caller's request's.
func (s *bulkStream) recv(r *btpb.MutateRowsResponse) error {
	if !s.answered && len(s.refused) > 0 {
		s.answered = true
		r.Reset()
		r.Entries = s.refused
		return nil
	}
	if s.cs == nil {
		return io.EOF
	}
	if s.recvError != nil {
		return s.recvError
	}
	err := s.cs.RecvMsg(r)
	for err == io.EOF && s.part+1 < len(s.parts) {
		s.part++
		if err = s.open(); err != nil {
			s.recvError = err // a later part that could not be sent ends the stream
			break
		}
		err = s.cs.RecvMsg(r)
	}
	if err != nil {
		if s.cancel != nil {
			s.cancel() // the stream has ended: its last part, or a failed one
		}
		return err
	}
	kept := s.parts[s.part].kept
	for _, e := range r.GetEntries() {
		if e.GetIndex() >= 0 && e.GetIndex() < int64(len(kept)) {
			e.Index = kept[e.GetIndex()]
		}
	}
	return nil
}

// Header waits for the stream to be settled: the refusal, or the first
// part's header (an empty one when nothing was sent).
func (s *bulkStream) Header() (metadata.MD, error) {
	if err := s.wait(); err != nil {
		return nil, err
	}
	if s.sendError != nil {
		return nil, s.sendError
	}
	if s.first == nil {
		return metadata.MD{}, nil
	}
	return s.first.Header()
}

// Trailer is valid only once RecvMsg has returned an error, on the
// receiving goroutine; before a stream is open there is none.
func (s *bulkStream) Trailer() metadata.MD {
	if !s.settled() || s.cs == nil {
		return nil
	}
	return s.cs.Trailer()
}

func (s *bulkStream) Context() context.Context {
	switch {
	case !s.settled() || s.first == nil:
		return s.ctx
	case s.partsCtx != nil:
		return s.partsCtx
	}
	return s.first.Context()
}
