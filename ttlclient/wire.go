package ttlclient

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/internal/wirestream"
)

// bttl's client interceptor (docs/design.md#tableapi): the connection a
// bttl client dials carries it, and it rewrites the request protos of the
// calls a Table marks (a context value holding the table), so that a
// caller's *bigtable.Mutation and bigtable.RowFilter get the Table's
// semantics without bttl reading either: the request is public, their
// fields are not. Unmarked calls (Client.Raw's, the table's own internal
// reads) pass untouched. A request the caller owns is never written: a
// changed one is a shallow copy (internal/rules.ShallowCopy).

const (
	service             = "/google.bigtable.v2.Bigtable/"
	methodMutateRow     = service + "MutateRow"
	methodMutateRows    = service + "MutateRows"
	methodCheckAndMut   = service + "CheckAndMutateRow"
	methodRMW           = service + "ReadModifyWriteRow"
	methodReadRows      = service + "ReadRows"
	methodClientConfig  = service + "GetClientConfiguration"
	methodSampleRowKeys = service + "SampleRowKeys"
)

// wireCall marks one call of a Table for the interceptor.
type wireCall struct {
	t      *Table
	writes bool // apply the table's write rules (Table.API's writes)
	reads  bool // put the TTL filter before the request's filter
	probe  bool // Client's interceptor probe: answer without sending
	seen   atomic.Bool
	// refused is the interceptor's refusal, which the table returns
	// typed: the client hands the caller only a status rebuilt from the
	// code and message.
	refused atomic.Pointer[CellError]
	// rowsLimit is the ReadRows request's limit, for a shadow read.
	rowsLimit atomic.Int64
	limitSeen atomic.Bool

	mu   sync.Mutex
	rows []*CellError // the rows of MutateRows requests refused
	// refusedEntry is the refusal of each MutateRows entry refused, by
	// the client's entry (the same on every attempt of the call): a
	// group the client sends again after a stream error gets the same
	// answers, neither counted nor recorded again.
	refusedEntry map[*btpb.MutateRowsRequest_Entry]*CellError

	// writeNow is the instant the call's writes are stamped at, the same
	// on every attempt: the client retries a whole MutateRows group after
	// a stream error, server timestamps included, and a retry stamped
	// later would write a second cell beside the one the server applied.
	writeNow atomic.Pointer[time.Time]
}

// writeTime is the call's write instant: the clock's reading at its first
// write attempt.
func (c *wireCall) writeTime() time.Time {
	if p := c.writeNow.Load(); p != nil {
		return *p
	}
	now := c.t.clock.Now()
	if c.writeNow.CompareAndSwap(nil, &now) {
		return now
	}
	return *c.writeNow.Load()
}

type wireKey struct{}

func callOf(ctx context.Context) *wireCall {
	c, _ := ctx.Value(wireKey{}).(*wireCall)
	return c
}

// mark is ctx carrying c.
func (c *wireCall) mark(ctx context.Context) context.Context {
	return context.WithValue(ctx, wireKey{}, c)
}

// unmarked is ctx without its call's mark: what the interceptor hands on
// once it has rewritten a call, so that a second copy of it on the same
// connection (ClientOptions given to NewClient, which adds them itself)
// passes the rewritten request untouched rather than rewriting it again
// (and refusing the write-time companions the first one added).
func unmarked(ctx context.Context) context.Context {
	return context.WithValue(ctx, wireKey{}, (*wireCall)(nil))
}

// result is what the caller gets for err, the client's error of the call:
// the interceptor's typed refusal when it refused.
func (c *wireCall) result(err error) error {
	if err == nil {
		return nil
	}
	if e := c.refused.Load(); e != nil {
		return e
	}
	return err
}

var errProbe = status.Error(codes.FailedPrecondition, "bttl: interceptor probe (nothing was sent)")

// DialOptions are the gRPC dial options that install bttl's interceptor:
// for a connection of your own passed with option.WithGRPCConn.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unaryInterceptor), grpc.WithChainStreamInterceptor(streamInterceptor)}
}

// ClientOptions are the options that install bttl's interceptor on a
// bigtable client: bigtable.NewClient(ctx, project, instance,
// ttlclient.ClientOptions()...), then Wrap. NewClient and
// NewClientWithConfig add them themselves. They are dial options, which
// the client ignores when it is given a connection (option.WithGRPCConn:
// dial it with DialOptions). Under BIGTABLE_EMULATOR_HOST (read when
// ClientOptions is called), where the client dials the emulator itself,
// they are a connection to the emulator carrying the interceptor, which
// the client closes on Close; put them after options of your own.
func ClientOptions() []option.ClientOption {
	if addr := os.Getenv("BIGTABLE_EMULATOR_HOST"); addr != "" {
		target := "passthrough:///" + emulatorScheme.ReplaceAllString(addr, "")
		conn, err := grpc.NewClient(target, append(DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err == nil {
			return []option.ClientOption{option.WithGRPCConn(conn)}
		}
		// Left without the interceptor: the calls that need it are
		// refused (ErrNotDialed), the others work.
	}
	out := make([]option.ClientOption, 0, 2)
	for _, d := range DialOptions() {
		out = append(out, option.WithGRPCDialOption(d))
	}
	return out
}

// emulatorScheme is what the bigtable client strips from
// BIGTABLE_EMULATOR_HOST before dialling it (internal/option, v1.58.0).
var emulatorScheme = regexp.MustCompile("^(http://|https://|passthrough:///)")

func unaryInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c := callOf(ctx)
	if c != nil {
		c.seen.Store(true)
		if c.probe {
			return errProbe
		}
		out, err := c.rewrite(method, req)
		if err != nil {
			return err
		}
		req, ctx = out, unmarked(ctx)
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if method == methodClientConfig {
		if cfg, ok := reply.(*btpb.ClientConfiguration); ok && cfg.GetSessionConfiguration() != nil {
			// Session load 0 keeps every data call on the classic RPCs,
			// which this interceptor sees (the session data plane would
			// carry the requests inside a stream it cannot rewrite).
			cfg.GetSessionConfiguration().SessionLoad = 0
		}
	}
	return err
}

func streamInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	c := callOf(ctx)
	if c == nil {
		return streamer(ctx, desc, cc, method, opts...)
	}
	c.seen.Store(true)
	if c.probe {
		return nil, errProbe
	}
	ctx = unmarked(ctx) // the streams below send only what rewrite returned
	switch method {
	case methodMutateRows:
		if c.writes {
			return &bulkStream{c: c, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts}, nil
		}
	case methodReadRows, methodMutateRow, methodCheckAndMut, methodRMW:
	default:
		return streamer(ctx, desc, cc, method, opts...)
	}
	return wirestream.New(ctx, desc, cc, method, streamer, opts,
		func(m any) (any, error) { return c.rewrite(method, m) },
		func() error { return status.Error(codes.Canceled, wirestream.ErrClosedBeforeSend.Error()) }), nil
}

// rewrite is the request to send for a marked call's req, or the refusal.
func (c *wireCall) rewrite(method string, req any) (any, error) {
	t := c.t
	var now time.Time
	if _, read := req.(*btpb.ReadRowsRequest); read {
		now = t.clock.Now() // a resumed read filters at its own instant
	} else {
		now = c.writeTime()
	}
	switch r := req.(type) {
	case *btpb.MutateRowRequest:
		if !c.writes {
			return req, nil
		}
		ms, err := c.mutations(now, r.GetRowKey(), r.GetMutations())
		if err != nil {
			return nil, err
		}
		if rules.Same(ms, r.GetMutations()) {
			return r, nil
		}
		out := rules.ShallowCopy(r)
		out.Mutations = ms
		return out, nil
	case *btpb.MutateRowsRequest:
		if !c.writes {
			return req, nil
		}
		var entries []*btpb.MutateRowsRequest_Entry
		for i, e := range r.GetEntries() {
			ms, err := c.mutations(now, e.GetRowKey(), e.GetMutations())
			if err != nil {
				return nil, err
			}
			if !rules.Same(ms, e.GetMutations()) {
				if entries == nil {
					entries = append([]*btpb.MutateRowsRequest_Entry(nil), r.GetEntries()...)
				}
				ce := rules.ShallowCopy(e)
				ce.Mutations = ms
				entries[i] = ce
			}
		}
		if entries == nil {
			return r, nil
		}
		out := rules.ShallowCopy(r)
		out.Entries = entries
		return out, nil
	case *btpb.CheckAndMutateRowRequest:
		if !c.writes {
			return req, nil
		}
		row := string(r.GetRowKey())
		if len(r.GetTrueMutations()) == 0 && len(r.GetFalseMutations()) == 0 {
			// Nothing to write whatever the predicate: an empty mutation,
			// or a conditional one nested in another (the client sends
			// the inner one's empty operations as the branch).
			return nil, c.refuse(row, rules.Refuse(ErrEmptyMutation))
		}
		var branches [2][]*btpb.Mutation
		for i, ms := range [][]*btpb.Mutation{r.GetTrueMutations(), r.GetFalseMutations()} {
			out, v := t.rules.Stamp(now, ms, nil)
			if v != nil {
				return nil, c.refuse(row, v)
			}
			branches[i] = out
		}
		for i := range branches {
			out, v := t.rules.Complete(now, branches[i])
			if v != nil {
				return nil, c.refuse(row, v)
			}
			branches[i] = out
		}
		out := rules.ShallowCopy(r)
		out.TrueMutations, out.FalseMutations = branches[0], branches[1]
		out.PredicateFilter = t.rules.Filter(now, r.GetPredicateFilter())
		return out, nil
	case *btpb.ReadModifyWriteRowRequest:
		if !c.writes {
			return req, nil
		}
		if len(r.GetRules()) == 0 {
			return nil, c.refuse(string(r.GetRowKey()), rules.Refuse(ErrEmptyMutation))
		}
		if v := t.rules.ReadModifyWrite(r.GetRules()); v != nil {
			return nil, c.refuse(string(r.GetRowKey()), v)
		}
		return r, nil
	case *btpb.ReadRowsRequest:
		if c.limitSeen.CompareAndSwap(false, true) {
			// The first attempt's: a resumed read asks for what is left.
			c.rowsLimit.Store(r.GetRowsLimit())
		}
		if !c.reads || !t.filters.Managed() {
			return r, nil
		}
		out := rules.ShallowCopy(r)
		out.Filter = t.rules.Filter(now, r.GetFilter())
		return out, nil
	}
	switch method {
	case methodMutateRow, methodMutateRows, methodCheckAndMut, methodRMW, methodReadRows:
		if c.writes || c.reads {
			// A data call whose request is not the generated type the
			// client sends: bttl cannot apply its rules to it.
			return nil, c.refuse("", rules.Refuse(fmt.Errorf("%w: %s request of type %T", rules.ErrUnclassifiable, strings.TrimPrefix(method, service), req)))
		}
	}
	return req, nil // another call made under the mark (the client's own): untouched
}

// mutations applies the table's rules to one row's mutations.
func (c *wireCall) mutations(now time.Time, row []byte, ms []*btpb.Mutation) ([]*btpb.Mutation, error) {
	if len(ms) == 0 {
		return nil, c.refuse(string(row), rules.Refuse(ErrEmptyMutation))
	}
	out, v := c.t.rules.Mutations(now, ms, nil)
	if v != nil {
		return nil, c.refuse(string(row), v)
	}
	return out, nil
}

// refuse records v as the call's typed refusal and returns it.
func (c *wireCall) refuse(row string, v *rules.Refusal) error {
	e := c.t.refusal(row, v)
	c.refused.CompareAndSwap(nil, e)
	return e
}

// wireState is what a client knows of its connection: whether it carries
// bttl's interceptor, learnt once by a probe (Client.checkWire).
type wireState struct {
	mu    sync.Mutex
	known bool
	ok    bool
}

// peek reports whether the connection is known to carry the interceptor.
func (w *wireState) peek() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.known && w.ok
}

// checkWire reports whether the client's connection carries bttl's
// interceptor: nil when it does, else ErrNotDialed naming what to use.
// The first call probes: a SampleRowKeys on the table, marked as a probe
// and with its context already cancelled, which the interceptor answers
// and which, without it, gRPC fails before sending anything.
func (t *Table) checkWire(ctx context.Context, what string) error {
	w := t.wireState
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.known {
		// The probe's context is cancelled before the call: gRPC runs the
		// interceptors first and, without them, fails the call on the
		// cancelled context before anything is sent. So the probe sends
		// nothing either way.
		c := &wireCall{t: t, probe: true}
		pctx, cancel := context.WithCancel(c.mark(context.WithoutCancel(ctx)))
		cancel()
		_, _ = t.raw.SampleRowKeys(pctx)
		w.known, w.ok = true, c.seen.Load()
	}
	if w.ok {
		return nil
	}
	if what == "" {
		return ErrNotDialed // a question, not a refusal
	}
	t.obs.refused("", ErrNotDialed)
	if r, ok := t.rec.(CompatibilityRecorder); ok {
		r.IncompatibleClient("interceptor")
	}
	return &codedError{fmt.Errorf("%w: %s needs it; create the client with ttlclient.NewClient or ttlclient.NewClientWithConfig, "+
		"or dial the bigtable client with ttlclient.ClientOptions() (ttlclient.DialOptions() for a connection of your own) and Wrap it", ErrNotDialed, what)}
}

// CompatibilityRecorder is implemented by a TableRecorder that counts a
// table's calls refused because its client's connection does not carry
// bttl's interceptor (package metrics' does, as
// bttl_client_incompatible_total{check="interceptor"}).
type CompatibilityRecorder interface {
	IncompatibleClient(check string)
}

// bulkStream is a MutateRows stream of a Table.API call: each entry the
// table's rules refuse is left out of the request and answered, as a
// server answers a failed entry, with its own status (the refusal's code
// and message), so the other rows are written and each refused row gets
// its error at its index, as Table.ApplyBulk does. The stream is opened
// only once the request is known, and not at all when every entry is
// refused. The client calls SendMsg, CloseSend, then RecvMsg, on one
// goroutine.
//
// The client groups rows by their own mutation count, within Bigtable's
// limit per request (maxRequestMutations); the rules may add mutations (a
// single-value family's deletes, write-time companions), so a rewritten
// request over the limit is sent as several, one stream after the other,
// each within it.
type bulkStream struct {
	c        *wireCall
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

// bulkPart is one request a bulkStream sends, and the client's request
// index of each of its entries.
type bulkPart struct {
	req  *btpb.MutateRowsRequest
	kept []int64
}

// maxRequestMutations is the most mutations Bigtable takes in one
// MutateRows request ("in total the entries can contain at most 100000
// mutations", google.bigtable.v2.MutateRowsRequest.entries), the client's
// own grouping bound (maxMutations, v1.58.0).
const maxRequestMutations = 100000

func (s *bulkStream) SendMsg(m any) error {
	r, ok := m.(*btpb.MutateRowsRequest)
	if !ok {
		_, err := s.c.rewrite(s.method, m) // refuses what it cannot classify
		s.sendError = err
		return err
	}
	now := s.c.writeTime()
	var entries []*btpb.MutateRowsRequest_Entry
	var kept []int64
	changed := false
	total := 0
	for i, e := range r.GetEntries() {
		ce := s.c.entryRefused(e)
		var ms []*btpb.Mutation
		if ce == nil {
			var err error
			if ms, err = s.c.mutations(now, e.GetRowKey(), e.GetMutations()); err != nil {
				ce, _ = err.(*CellError)
				s.c.bulkRefused(e, ce)
			}
		}
		if ce != nil {
			s.refused = append(s.refused, &btpb.MutateRowsResponse_Entry{Index: int64(i), Status: ce.GRPCStatus().Proto()})
			changed = true
			continue
		}
		if len(ms) > maxRequestMutations {
			// Over the limit alone once the rules added to it: the
			// server would refuse the request carrying it, failing the
			// other rows with it. Answered as the server answers it,
			// alone, as the client's own grouping would have it.
			s.refused = append(s.refused, &btpb.MutateRowsResponse_Entry{Index: int64(i), Status: status.Newf(codes.InvalidArgument,
				"bttl: the row's %d mutations (with its families' single-value deletes and write-time companions) are over Bigtable's %d per request; nothing of it was sent",
				len(ms), maxRequestMutations).Proto()})
			changed = true
			continue
		}
		if !rules.Same(ms, e.GetMutations()) {
			ce := rules.ShallowCopy(e)
			ce.Mutations = ms
			e, changed = ce, true
		}
		total += len(ms)
		entries = append(entries, e)
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
// are kept), each within maxRequestMutations where an entry alone is.
func splitBulk(r *btpb.MutateRowsRequest, entries []*btpb.MutateRowsRequest_Entry, kept []int64, total int) []bulkPart {
	part := func(from, to int) bulkPart {
		out := rules.ShallowCopy(r)
		out.Entries = entries[from:to:to]
		return bulkPart{req: out, kept: kept[from:to:to]}
	}
	if total <= maxRequestMutations {
		return []bulkPart{part(0, len(entries))}
	}
	var parts []bulkPart
	from, n := 0, 0
	for i, e := range entries {
		if k := len(e.GetMutations()); n+k > maxRequestMutations && i > from {
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

// bulkRefused records the refusal of entry, a row of a MutateRows
// request.
func (c *wireCall) bulkRefused(entry *btpb.MutateRowsRequest_Entry, e *CellError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows = append(c.rows, e)
	if c.refusedEntry == nil {
		c.refusedEntry = map[*btpb.MutateRowsRequest_Entry]*CellError{}
	}
	c.refusedEntry[entry] = e
}

// entryRefused is the refusal of entry by an earlier attempt of the call,
// nil when it was not refused.
func (c *wireCall) entryRefused(entry *btpb.MutateRowsRequest_Entry) *CellError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refusedEntry[entry]
}

// bulkResults puts the typed refusal of each row the interceptor refused
// in place of the status the client made of it: the error at a row's
// index is replaced only by a refusal of the same row with the same
// message.
func (c *wireCall) bulkResults(rowKeys []string, errs []error) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rows) == 0 {
		return errs
	}
	used := make([]bool, len(c.rows))
	for i, err := range errs {
		if err == nil {
			continue
		}
		msg := status.Convert(err).Message()
		for j, e := range c.rows {
			if !used[j] && e.Row == rowKeys[i] && e.Error() == msg {
				errs[i], used[j] = e, true
				break
			}
		}
	}
	return errs
}
