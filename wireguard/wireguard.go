package wireguard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// Rule names, as they appear in a refusal's message and in its
// errdetails.PreconditionFailure violation type.
const (
	RuleServerTimestamp         = "server-timestamp"          // SetCell with timestamp -1 on a managed family
	RuleExpiredOnArrival        = "expired-on-arrival"        // one-second family: timestamp <= now; default expiry: older than D
	RuleBeforeEpoch             = "before-epoch"              // a negative timestamp
	RuleInvalidSequence         = "invalid-sequence"          // sequence family: not seq*1000 with seq >= 1
	RuleServerAssignedTimestamp = "server-assigned-timestamp" // ReadModifyWrite, AddToCell, MergeToCell on a managed family
	RuleUnknownFamily           = "unknown-family"            // a family the table's schema does not name
	RuleSessionDataPlane        = "session-data-plane"        // a session stream the guard cannot inspect
)

// Full method names of the Bigtable data service.
const (
	service            = "/google.bigtable.v2.Bigtable/"
	methodMutateRow    = service + "MutateRow"
	methodMutateRows   = service + "MutateRows"
	methodCheckAndMut  = service + "CheckAndMutateRow"
	methodRMW          = service + "ReadModifyWriteRow"
	methodReadRows     = service + "ReadRows"
	methodClientConfig = service + "GetClientConfiguration"
	methodOpenPrefix   = service + "Open" // OpenTable, OpenAuthorizedView, OpenMaterializedView
)

// Clock tells the time the guard checks timestamps against.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures a Guard.
type Option func(*Guard)

// WithClock sets the clock (default: the system clock).
func WithClock(c Clock) Option {
	return func(g *Guard) {
		if c != nil {
			g.clock = c
		}
	}
}

// WithReadFilter makes the guard put each table's TTL filter in front of
// the filter of every ReadRows request and CheckAndMutateRow predicate on
// a guarded table, so legacy reads stop seeing expired cells.
func WithReadFilter() Option { return func(g *Guard) { g.readFilter = true } }

// Guard holds the schemas of the tables it guards and makes the gRPC client
// interceptors. It is safe for concurrent use.
type Guard struct {
	tables     map[string]*table
	clock      Clock
	readFilter bool
}

type table struct {
	id      string
	schema  strategy.Schema
	filters *filters.Builder
}

// New guards the tables named by schemas' keys (table IDs, as in
// Client.Open; a request for that table ID in any instance is checked).
func New(schemas map[string]strategy.Schema, opts ...Option) (*Guard, error) {
	g := &Guard{tables: make(map[string]*table, len(schemas)), clock: systemClock{}}
	for _, o := range opts {
		o(g)
	}
	for id, s := range schemas {
		if id == "" || strings.Contains(id, "/") {
			return nil, fmt.Errorf("%w: table ID %q", strategy.ErrInvalidPolicy, id)
		}
		fb, err := filters.New(s)
		if err != nil {
			return nil, fmt.Errorf("wireguard: table %q: %w", id, err)
		}
		own := make(strategy.Schema, len(s))
		for f, p := range s {
			own[f] = p
		}
		g.tables[id] = &table{id: id, schema: own, filters: fb}
	}
	return g, nil
}

// ClientOptions are the options that install the guard on a client:
// bigtable.NewClient(ctx, project, instance, guard.ClientOptions()...).
// They are dial options, which the client ignores when it is given an
// already dialed connection (option.WithGRPCConn, or BIGTABLE_EMULATOR_HOST):
// then pass DialOptions to grpc.NewClient yourself.
func (g *Guard) ClientOptions() []option.ClientOption {
	out := make([]option.ClientOption, 0, 2)
	for _, d := range g.DialOptions() {
		out = append(out, option.WithGRPCDialOption(d))
	}
	return out
}

// DialOptions are the gRPC dial options installing both interceptors.
func (g *Guard) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(g.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(g.StreamClientInterceptor()),
	}
}

func (g *Guard) now() bigtable.Timestamp { return bigtable.Timestamp(g.clock.Now().UnixMicro()) }

// lookup finds the guarded table a request names (table or authorized view).
func (g *Guard) lookup(tableName, viewName string) *table {
	name := tableName
	if name == "" {
		name = viewName
	}
	i := strings.Index(name, "/tables/")
	if i < 0 {
		return nil
	}
	id := name[i+len("/tables/"):]
	if j := strings.IndexByte(id, '/'); j >= 0 {
		id = id[:j]
	}
	return g.tables[id]
}

// UnaryClientInterceptor checks MutateRow, CheckAndMutateRow (both
// branches) and ReadModifyWriteRow before they are sent, and with
// WithReadFilter puts the TTL filter in CheckAndMutateRow predicates. It
// keeps GetClientConfiguration from moving traffic to the session data
// plane, which it cannot inspect. Other calls pass untouched.
func (g *Guard) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		switch r := req.(type) {
		case *btpb.MutateRowRequest:
			if t := g.lookup(r.GetTableName(), r.GetAuthorizedViewName()); t != nil {
				if v := t.checkMutations(g.now(), r.GetMutations()); v != nil {
					return v.status(method, r.GetRowKey(), -1)
				}
			}
		case *btpb.CheckAndMutateRowRequest:
			if t := g.lookup(r.GetTableName(), r.GetAuthorizedViewName()); t != nil {
				now := g.now()
				for _, ms := range [][]*btpb.Mutation{r.GetTrueMutations(), r.GetFalseMutations()} {
					if v := t.checkMutations(now, ms); v != nil {
						return v.status(method, r.GetRowKey(), -1)
					}
				}
				if g.readFilter && t.filters.Managed() {
					// A shallow copy: the caller's request is left as it
					// is, so a retry sends the same predicate once more,
					// and row keys and mutations are shared, not copied.
					c := shallowCopy(r)
					c.PredicateFilter = filters.ChainProto(t.filters.TTLProto(now), r.GetPredicateFilter())
					req = c
				}
			}
		case *btpb.ReadModifyWriteRowRequest:
			if t := g.lookup(r.GetTableName(), r.GetAuthorizedViewName()); t != nil {
				for _, rule := range r.GetRules() {
					if v := t.checkRMW(rule); v != nil {
						return v.status(method, r.GetRowKey(), -1)
					}
				}
			}
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if method == methodClientConfig && len(g.tables) > 0 {
			if cfg, ok := reply.(*btpb.ClientConfiguration); ok && cfg.GetSessionConfiguration() != nil {
				// Session load 0 keeps every data call on the classic
				// RPCs this guard sees.
				cfg.GetSessionConfiguration().SessionLoad = 0
			}
		}
		return err
	}
}

// StreamClientInterceptor checks every entry of a MutateRows request
// before the stream is opened, refusing the whole request if one entry
// violates a rule (nothing of it is sent); with WithReadFilter it puts the
// TTL filter in front of ReadRows filters. Session streams (OpenTable and
// its kin) are refused: the guard cannot inspect them.
func (g *Guard) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		switch {
		case len(g.tables) == 0:
		case method == methodMutateRows || (method == methodReadRows && g.readFilter):
			// Open the stream only once the request is known, so a
			// refused one never reaches the server.
			return &lazyStream{g: g, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts}, nil
		case strings.HasPrefix(method, methodOpenPrefix):
			return nil, (&violation{rule: RuleSessionDataPlane, table: "*",
				err: errors.New("the session data plane bypasses the bttl wire guard; create the client with bigtable.ClientConfig{DisableSession: true}")}).status(method, nil, -1)
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
}

// lazyStream opens the real stream at the first SendMsg, after checking or
// rewriting the request.
type lazyStream struct {
	g        *Guard
	ctx      context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	once sync.Once
	cs   grpc.ClientStream
	err  error
}

func (s *lazyStream) open() (grpc.ClientStream, error) {
	s.once.Do(func() { s.cs, s.err = s.streamer(s.ctx, s.desc, s.cc, s.method, s.opts...) })
	return s.cs, s.err
}

func (s *lazyStream) SendMsg(m any) error {
	switch r := m.(type) {
	case *btpb.MutateRowsRequest:
		if t := s.g.lookup(r.GetTableName(), r.GetAuthorizedViewName()); t != nil {
			now := s.g.now()
			for i, e := range r.GetEntries() {
				if v := t.checkMutations(now, e.GetMutations()); v != nil {
					s.fail(v.status(s.method, e.GetRowKey(), i))
					return s.err
				}
			}
		}
	case *btpb.ReadRowsRequest:
		if t := s.g.lookup(r.GetTableName(), r.GetAuthorizedViewName()); t != nil && t.filters.Managed() {
			c := shallowCopy(r)
			c.Filter = filters.ChainProto(t.filters.TTLProto(s.g.now()), r.GetFilter())
			m = c
		}
	}
	cs, err := s.open()
	if err != nil {
		return err
	}
	return cs.SendMsg(m)
}

// fail records a refusal as the stream's outcome without opening it.
func (s *lazyStream) fail(err error) {
	s.once.Do(func() { s.err = err })
}

func (s *lazyStream) RecvMsg(m any) error {
	cs, err := s.open()
	if err != nil {
		return err
	}
	return cs.RecvMsg(m)
}

func (s *lazyStream) CloseSend() error {
	cs, err := s.open()
	if err != nil {
		return err
	}
	return cs.CloseSend()
}

func (s *lazyStream) Header() (metadata.MD, error) {
	cs, err := s.open()
	if err != nil {
		return nil, err
	}
	return cs.Header()
}

func (s *lazyStream) Trailer() metadata.MD {
	cs, err := s.open()
	if err != nil {
		return nil
	}
	return cs.Trailer()
}

func (s *lazyStream) Context() context.Context {
	if cs, err := s.open(); err == nil {
		return cs.Context()
	}
	return s.ctx
}

// shallowCopy returns a new message with m's fields; message-typed fields
// (row sets, mutations) are shared, not copied.
func shallowCopy[M proto.Message](m M) M {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	if u := src.GetUnknown(); len(u) > 0 {
		dst.SetUnknown(u)
	}
	return dst.Interface().(M)
}

// violation is one refused mutation.
type violation struct {
	rule, table, family, column string
	err                         error
}

func (t *table) violation(rule, family string, column []byte, err error) *violation {
	return &violation{rule: rule, table: t.id, family: family, column: string(column), err: err}
}

// checkMutations applies docs/design.md#guardrails to a row's mutations.
func (t *table) checkMutations(now bigtable.Timestamp, ms []*btpb.Mutation) *violation {
	for _, m := range ms {
		var fam string
		var col []byte
		switch x := m.GetMutation().(type) {
		case *btpb.Mutation_SetCell_:
			fam, col = x.SetCell.GetFamilyName(), x.SetCell.GetColumnQualifier()
			p, ok := t.schema[fam]
			if !ok {
				return t.violation(RuleUnknownFamily, fam, col, errUnknownFamily)
			}
			if !p.Managed() {
				continue
			}
			ts := bigtable.Timestamp(x.SetCell.GetTimestampMicros())
			if ts == bigtable.ServerTime {
				return t.violation(RuleServerTimestamp, fam, col, fmt.Errorf("%w: a %s family", strategy.ErrServerTimestamp, p.Kind()))
			}
			if _, err := p.CheckExplicit(now, ts); err != nil {
				return t.violation(ruleOf(err), fam, col, fmt.Errorf("%w (now %d)", err, now))
			}
			continue
		case *btpb.Mutation_AddToCell_:
			fam, col = x.AddToCell.GetFamilyName(), x.AddToCell.GetColumnQualifier().GetRawValue()
			if v := t.checkServerAssigned(fam, col, "AddToCell"); v != nil {
				return v
			}
			continue
		case *btpb.Mutation_MergeToCell_:
			fam, col = x.MergeToCell.GetFamilyName(), x.MergeToCell.GetColumnQualifier().GetRawValue()
			if v := t.checkServerAssigned(fam, col, "MergeToCell"); v != nil {
				return v
			}
			continue
		case *btpb.Mutation_DeleteFromColumn_:
			fam, col = x.DeleteFromColumn.GetFamilyName(), x.DeleteFromColumn.GetColumnQualifier()
		case *btpb.Mutation_DeleteFromFamily_:
			fam = x.DeleteFromFamily.GetFamilyName()
		default:
			continue // DeleteFromRow names no family
		}
		if _, ok := t.schema[fam]; !ok {
			return t.violation(RuleUnknownFamily, fam, col, errUnknownFamily)
		}
	}
	return nil
}

func (t *table) checkServerAssigned(fam string, col []byte, op string) *violation {
	p, ok := t.schema[fam]
	if !ok {
		return t.violation(RuleUnknownFamily, fam, col, errUnknownFamily)
	}
	if p.Managed() {
		return t.violation(RuleServerAssignedTimestamp, fam, col, fmt.Errorf("%s on a %s family: the server would pick the timestamp", op, p.Kind()))
	}
	return nil
}

func (t *table) checkRMW(r *btpb.ReadModifyWriteRule) *violation {
	return t.checkServerAssigned(r.GetFamilyName(), r.GetColumnQualifier(), "ReadModifyWrite")
}

var errUnknownFamily = errors.New("family not in the table's schema")

func ruleOf(err error) string {
	switch {
	case errors.Is(err, strategy.ErrServerTimestamp):
		return RuleServerTimestamp
	case errors.Is(err, strategy.ErrAlreadyExpired):
		return RuleExpiredOnArrival
	case errors.Is(err, strategy.ErrBeforeEpoch):
		return RuleBeforeEpoch
	case errors.Is(err, strategy.ErrInvalidSequence):
		return RuleInvalidSequence
	}
	return "invalid-timestamp"
}

// status is the FailedPrecondition refusal: the message names the rule,
// table, family and column; a PreconditionFailure detail carries the same.
func (v *violation) status(method string, row []byte, entry int) error {
	where := ""
	if entry >= 0 {
		where = fmt.Sprintf(", entry %d (the whole request is refused)", entry)
	}
	msg := fmt.Sprintf("bttl wire guard refused %s: rule %s: table %q, family %q, column %q, row %q%s: %v",
		strings.TrimPrefix(method, service), v.rule, v.table, v.family, v.column, truncate(string(row), 64), where, v.err)
	st := status.New(codes.FailedPrecondition, msg)
	if d, err := st.WithDetails(&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{{
		Type:        v.rule,
		Subject:     v.table + "/" + v.family + ":" + v.column,
		Description: v.err.Error(),
	}}}); err == nil {
		st = d
	}
	return st.Err()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
