package wireguard

import (
	"context"
	"fmt"
	"strings"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/internal/wirestream"
	"github.com/bttl/bttl/strategy"
)

// Rule names, as they appear in a refusal's message and in its
// errdetails.PreconditionFailure violation type: each is the Rule of a row
// of bttl's one refusal registry (internal/rules), which also gives the
// refusal's metric reason (a test checks every name against it).
const (
	RuleServerTimestamp         = "server-timestamp"          // SetCell with timestamp -1 on a managed family
	RuleExpiredOnArrival        = "expired-on-arrival"        // one-second family: timestamp <= now; default expiry: older than D
	RuleBeforeEpoch             = "before-epoch"              // a negative timestamp
	RuleInvalidSequence         = "invalid-sequence"          // sequence family: not seq*1000 with seq >= 1
	RuleServerAssignedTimestamp = "server-assigned-timestamp" // ReadModifyWrite, AddToCell, MergeToCell on a managed family
	RuleUnknownFamily           = "unknown-family"            // a family the table's schema does not name
	RuleTTLTooLong              = "ttl-too-long"              // a timestamp over the family's max TTL (strategy.WithMaxTTL)
	RuleReservedColumn          = "reserved-column"           // a write to a write-time family's qualifiers from 0xFF 0xFF on (the guard writes companions itself)
	RuleSessionDataPlane        = "session-data-plane"        // a session stream the guard cannot inspect
	// RuleUnclassifiable: a request on a guarded method the guard cannot
	// classify: a malformed or conflicting resource name, no name, fields
	// or a mutation kind its protos do not know, a message that is not a
	// protocol buffer or does not decode as the method's request.
	RuleUnclassifiable = "unclassifiable-request"
	// RuleUndeclaredMaterializedView: with WithReadFilter, a read of a
	// materialized view not declared with WithMaterializedView (its name
	// does not say which table it reads).
	RuleUndeclaredMaterializedView = "undeclared-materialized-view"
	// RuleSQL: PrepareQuery or ExecuteQuery while the guard guards managed
	// families, without WithSQLAllowed (the guard cannot filter SQL).
	RuleSQL = "sql-query"
	// RuleSchemaMismatch: a request bttl's client marked as checked
	// (internal/wiremark), computed for a schema other than the guard's
	// for its table.
	RuleSchemaMismatch = "schema-mismatch"
)

// Full method names of the Bigtable data service.
const (
	service            = "/google.bigtable.v2.Bigtable/"
	methodMutateRow    = service + "MutateRow"
	methodMutateRows   = service + "MutateRows"
	methodCheckAndMut  = service + "CheckAndMutateRow"
	methodRMW          = service + "ReadModifyWriteRow"
	methodReadRows     = service + "ReadRows"
	methodPrepareQuery = service + "PrepareQuery"
	methodExecuteQuery = service + "ExecuteQuery"
	methodClientConfig = service + "GetClientConfiguration"
	methodOpenPrefix   = service + "Open" // OpenTable, OpenAuthorizedView, OpenMaterializedView
)

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures a Guard, as New builds it.
type Option func(*options)

// options are what the Options set: apart from the Guard, so that an
// Option cannot change a Guard in use.
type options struct {
	clock      strategy.Clock
	readFilter bool
	sqlAllowed bool
	viewDecls  []viewDecl
	unlisted   *strategy.Policy // WithUnlistedFamilies; nil: strict
	// unlistedTables: the tables unlisted holds for; nil: every table.
	unlistedTables map[string]bool
	rec            Recorder     // WithRecorder; nil: none
	keyText        keytext.Text // WithKeyRedaction; zero: quoted and cut
}

// WithClock sets the clock the guard checks timestamps against (default:
// the system clock).
func WithClock(c strategy.Clock) Option {
	return func(g *options) {
		if c != nil {
			g.clock = c
		}
	}
}

// WithReadFilter makes the guard put each table's TTL filter in front of
// the filter of every ReadRows request and CheckAndMutateRow predicate on
// a guarded table (named directly or through an authorized view), so
// legacy reads stop seeing expired cells. Reads of a materialized view are
// filtered with the schema WithMaterializedView declares for it, and
// refused when it declares none.
func WithReadFilter() Option { return func(g *options) { g.readFilter = true } }

// WithMaterializedView declares the families of materialized view (an ID,
// as in Client.OpenMaterializedView) and their policies: with
// WithReadFilter its reads get schema's TTL filter. A view's name does not
// say which table it reads, so an undeclared view cannot be filtered and
// its reads are refused. Pass the source table's schema for a view that
// keeps the table's family names and cell timestamps, and an empty schema
// for a view that carries no managed data. Declaring a view twice makes
// New fail.
func WithMaterializedView(view string, schema strategy.Schema) Option {
	return func(g *options) { g.viewDecls = append(g.viewDecls, viewDecl{view, schema}) }
}

// WithSQLAllowed lets PrepareQuery and ExecuteQuery through. Without it
// they are refused (RuleSQL) whenever a guarded table or declared view
// has a managed family: a query sends SQL text with no row filter the
// guard could extend, and may read any table of the instance, so it could
// return expired cells GC has not collected yet.
func WithSQLAllowed() Option { return func(g *options) { g.sqlAllowed = true } }

// WithKeyRedaction makes the guard's refusals (status message and
// PreconditionFailure detail, which go back to the caller and into its
// logs) show no row key or column qualifier: each is replaced by
// "[redacted N bytes hmac:T]", N its length and T the first 6 bytes, in
// hex, of HMAC-SHA256 of it under hashKey, as ttlclient.WithKeyRedaction
// does. A nil hashKey is a random key drawn once per process (tags match
// within the process only); pass the same secret as to
// ttlclient.WithKeyRedaction to match tags across a client and a guard, or
// across processes. Without it a key is quoted (strconv.Quote) and cut to
// 64 bytes (docs/design.md#keys-in-messages).
func WithKeyRedaction(hashKey []byte) Option {
	return func(g *options) { g.keyText = keytext.Redact(hashKey) }
}

// Guard holds the schemas of the tables it guards and makes the gRPC client
// interceptors. It is safe for concurrent use.
type Guard struct {
	tables map[string]*table // by table ID
	views  map[string]*table // materialized views, by view ID
	options
	managed bool   // some guarded table or declared view has a managed family
	probe   string // the family of Verify's probe, which only this guard recognizes
}

type viewDecl struct {
	id     string
	schema strategy.Schema
}

// table is a guarded table's (or declared view's) rules, the one rule set
// bttl's client applies too (internal/rules), in its wire mode.
type table struct {
	*rules.Table
	id      string
	keyText keytext.Text // how refusals show row keys and qualifiers
}

// New guards the tables named by schemas' keys. Keys are table IDs, as in
// Client.Open: a request whose table_name is
// projects/{any}/instances/{any}/tables/{ID}, or whose
// authorized_view_name is an authorized view of such a table, is checked
// against that schema. Names are parsed exactly, segment by segment.
func New(schemas map[string]strategy.Schema, opts ...Option) (*Guard, error) {
	g := &Guard{tables: make(map[string]*table, len(schemas)), views: map[string]*table{}, options: options{clock: systemClock{}}, probe: newProbe()}
	for _, o := range opts {
		o(&g.options)
	}
	if err := g.checkUnlisted(schemas); err != nil {
		return nil, err
	}
	newTable := func(kind, id string, s strategy.Schema) (*table, error) {
		if id == "" || strings.Contains(id, "/") {
			return nil, fmt.Errorf("%w: %s ID %q", strategy.ErrInvalidPolicy, kind, id)
		}
		rt, err := rules.NewTable(id, s, g.unlistedFor(id), rules.ModeGuard, nil)
		if err != nil {
			return nil, bttlerr.Wrap(err, "wire guard: %s %q", kind, id)
		}
		rt.Probe = g.probe
		for _, p := range s {
			g.managed = g.managed || p.Managed()
		}
		return &table{Table: rt, id: id, keyText: g.keyText}, nil
	}
	for id, s := range schemas {
		t, err := newTable("table", id, s)
		if err != nil {
			return nil, err
		}
		g.tables[id] = t
	}
	for _, d := range g.viewDecls {
		if _, dup := g.views[d.id]; dup {
			return nil, fmt.Errorf("%w: materialized view %q declared twice", strategy.ErrInvalidPolicy, d.id)
		}
		t, err := newTable("materialized view", d.id, d.schema)
		if err != nil {
			return nil, err
		}
		g.views[d.id] = t
	}
	g.viewDecls = nil
	return g, nil
}

// ClientOptions are the options that install the guard on a client:
// bigtable.NewClient(ctx, project, instance, guard.ClientOptions()...).
// They are dial options, which the client ignores when it is given an
// already dialled connection. Under BIGTABLE_EMULATOR_HOST (read when
// ClientOptions is called), where the client dials the emulator itself
// and ignores dial options, they are instead a connection to the emulator
// carrying the guard (option.WithGRPCConn), which the client closes on
// Close; put them after any option of your own. With option.WithGRPCConn
// of your own, dial that connection with DialOptions. Verify tells
// whether a client's requests go through the guard.
func (g *Guard) ClientOptions() []option.ClientOption {
	if addr := emulatorHost(); addr != "" {
		return g.emulatorOptions(addr)
	}
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

func (g *Guard) now() time.Time { return g.clock.Now() }

// active: the guard guards something; a guard with nothing to guard lets
// every call through untouched.
func (g *Guard) active() bool { return len(g.tables) > 0 || len(g.views) > 0 }

// UnaryClientInterceptor checks MutateRow, MutateRows (every entry),
// CheckAndMutateRow (both branches) and ReadModifyWriteRow before they are
// sent, and with WithReadFilter puts the TTL filter in CheckAndMutateRow
// predicates and ReadRows filters. It refuses PrepareQuery and
// ExecuteQuery unless WithSQLAllowed, and session streams (OpenTable and
// its kin), and keeps GetClientConfiguration from moving traffic to the
// session data plane, which it cannot inspect. Methods are matched by
// name, whichever kind of call carries them: gRPC runs this interceptor
// for every conn.Invoke, so a streaming method invoked as a unary call
// gets the same checks. Other calls pass untouched.
func (g *Guard) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if g.active() && g.guarded(method) {
			pass, err := g.passesMarked(ctx, method)
			if err != nil {
				return g.refused(err)
			}
			out := req
			if !pass {
				out, err = g.check(method, req)
			}
			if err != nil {
				return g.refused(err)
			}
			req = out
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if method == methodClientConfig && g.active() {
			if cfg, ok := reply.(*btpb.ClientConfiguration); ok && cfg.GetSessionConfiguration() != nil {
				// Session load 0 keeps every data call on the classic
				// RPCs this guard sees.
				cfg.GetSessionConfiguration().SessionLoad = 0
			}
		}
		return err
	}
}

// StreamClientInterceptor applies the same checks as
// UnaryClientInterceptor to streams, matching methods by name: gRPC runs
// it for every conn.NewStream, so a unary method sent on a stream is
// checked too. A stream on a checked method (every entry of MutateRows,
// MutateRow, CheckAndMutateRow, ReadModifyWriteRow, and with
// WithReadFilter ReadRows) is opened only once its request passed, so a
// refused request (a MutateRows with one bad entry is refused whole) sends
// nothing. ExecuteQuery and PrepareQuery are refused unless
// WithSQLAllowed; session streams (OpenTable and its kin) are refused: the
// guard cannot inspect them.
func (g *Guard) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if !g.active() || !g.guarded(method) {
			return streamer(ctx, desc, cc, method, opts...)
		}
		if pass, err := g.passesMarked(ctx, method); err != nil || pass {
			if err != nil {
				return nil, g.refused(err)
			}
			return streamer(ctx, desc, cc, method, opts...)
		}
		if err := g.refuseByMethod(method); err != nil {
			return nil, g.refused(err)
		}
		if method == methodPrepareQuery || method == methodExecuteQuery {
			return streamer(ctx, desc, cc, method, opts...) // allowed SQL: nothing to check per request
		}
		// Open the stream only once the request is known, so a refused
		// one never reaches the server.
		if method == methodMutateRows {
			// The rules may add mutations (single-value deletes,
			// write-time companions): a request the client grouped
			// within Bigtable's limit can be over it once checked, and
			// is then sent as several.
			return wirestream.NewBulkWhole(ctx, desc, cc, method, streamer, opts,
				func(m any) (*btpb.MutateRowsRequest, error) {
					out, err := g.check(method, m)
					if err != nil {
						return nil, g.refused(err)
					}
					if r, ok := out.(*btpb.MutateRowsRequest); ok {
						return r, nil
					}
					return nil, g.refused(refusal(method, rules.ErrUnclassifiable, "", fmt.Sprintf("a MutateRows message of type %T", m)))
				},
				func() error {
					return g.refused(refusal(method, rules.ErrUnclassifiable, "", wirestream.ErrClosedBeforeSend.Error()))
				}), nil
		}
		return wirestream.New(ctx, desc, cc, method, streamer, opts,
			func(m any) (any, error) {
				out, err := g.check(method, m)
				return out, g.refused(err)
			},
			func() error {
				return g.refused(refusal(method, rules.ErrUnclassifiable, "", wirestream.ErrClosedBeforeSend.Error()))
			}), nil
	}
}

// guarded reports whether the guard checks or refuses calls of method,
// whichever kind of call (unary or stream) carries it.
func (g *Guard) guarded(method string) bool {
	switch method {
	case methodMutateRow, methodMutateRows, methodCheckAndMut, methodRMW, methodPrepareQuery, methodExecuteQuery:
		return true
	case methodReadRows:
		return g.readFilter
	}
	return strings.HasPrefix(method, methodOpenPrefix)
}

// refuseByMethod refuses methods the guard refuses whatever the request:
// session streams, and SQL unless allowed.
func (g *Guard) refuseByMethod(method string) error {
	switch {
	case method == methodPrepareQuery || method == methodExecuteQuery:
		return g.checkSQL(method)
	case strings.HasPrefix(method, methodOpenPrefix):
		return refusal(method, rules.ErrSessionDataPlane, "*",
			"the session data plane bypasses the bttl wire guard; create the client with bigtable.ClientConfig{DisableSession: true}")
	}
	return nil
}

// check classifies a request on a guarded method and returns the message
// to send in its place (the request itself, its decoded form when it came
// as another Go type, or a rewritten shallow copy), or the refusal.
func (g *Guard) check(method string, req any) (any, error) {
	switch method {
	case methodMutateRow:
		r, t, err := decodeAndResolve[*btpb.MutateRowRequest](g, method, req)
		if err != nil || t == nil {
			return r, err
		}
		out, v := t.MutateRow(g.now(), r)
		if v != nil {
			return nil, t.status(v, method, r.GetRowKey(), -1)
		}
		return out, nil
	case methodMutateRows:
		r, t, err := decodeAndResolve[*btpb.MutateRowsRequest](g, method, req)
		if err != nil || t == nil {
			return r, err
		}
		out, v, i := t.MutateRows(g.now(), r)
		if v != nil {
			return nil, t.status(v, method, r.GetEntries()[i].GetRowKey(), i)
		}
		return out, nil
	case methodCheckAndMut:
		r, t, err := decodeAndResolve[*btpb.CheckAndMutateRowRequest](g, method, req)
		if err != nil || t == nil {
			return r, err
		}
		out, v := t.CheckAndMutateRow(g.now(), r, g.readFilter)
		if v != nil {
			return nil, t.status(v, method, r.GetRowKey(), -1)
		}
		return out, nil
	case methodRMW:
		r, t, err := decodeAndResolve[*btpb.ReadModifyWriteRowRequest](g, method, req)
		if err != nil || t == nil {
			return r, err
		}
		if v := t.ReadModifyWriteRow(r); v != nil {
			return nil, t.status(v, method, r.GetRowKey(), -1)
		}
		return r, nil
	case methodReadRows:
		r, t, err := decodeAndResolve[*btpb.ReadRowsRequest](g, method, req)
		if err != nil || t == nil {
			return r, err
		}
		out, v := t.ReadRows(g.now(), r)
		if v != nil {
			return nil, t.status(v, method, nil, -1)
		}
		return out, nil
	}
	return req, g.refuseByMethod(method)
}

// checkSQL refuses a query unless the guard guards no managed family or
// WithSQLAllowed was given.
func (g *Guard) checkSQL(method string) error {
	if !g.managed || g.sqlAllowed {
		return nil
	}
	return refusal(method, rules.ErrUnfilteredSQL, "*", "the guard cannot filter SQL queries, which could return expired cells of guarded tables; "+
		"read with ReadRows, or install the guard with wireguard.WithSQLAllowed() to accept that")
}

// resourceNames are the getters every request type naming a resource has;
// requests without a field return "".
type resourceNames interface {
	proto.Message
	GetTableName() string
	GetAuthorizedViewName() string
}

// decodeAndResolve takes req as M (decoding it from another protocol
// buffer type through its wire form) and finds the guarded table or
// declared materialized view it names: nil when it names something
// unguarded. A request it cannot classify is refused.
func decodeAndResolve[M resourceNames](g *Guard, method string, req any) (M, *table, error) {
	var zero M
	r, err := decode[M](req)
	if err != nil {
		return zero, nil, refusal(method, rules.ErrUnclassifiable, "", err.Error())
	}
	if paths := unknownFields(r.ProtoReflect(), "", nil); len(paths) > 0 {
		return zero, nil, refusal(method, rules.ErrUnclassifiable, "", fmt.Sprintf(
			"the request carries fields %v that the guard's protos (cloud.google.com/go/bigtable v1.58.0) do not know", paths))
	}
	var mv string
	if x, ok := any(r).(interface{ GetMaterializedViewName() string }); ok {
		mv = x.GetMaterializedViewName()
	}
	res, err := resolve(r.GetTableName(), r.GetAuthorizedViewName(), mv)
	if err != nil {
		return zero, nil, refusal(method, rules.ErrUnclassifiable, "", err.Error())
	}
	if !res.materialized {
		return r, g.tables[res.id], nil
	}
	if t, ok := g.views[res.id]; ok {
		return r, t, nil
	}
	return zero, nil, refusal(method, rules.ErrUndeclaredMaterializedView, res.name, fmt.Sprintf(
		"materialized view %q was not declared with wireguard.WithMaterializedView, so the guard cannot tell which TTL filter its reads need", res.id))
}

// decode returns req as M: itself when it is one, else decoded from its
// wire form, which is what the server would decode (a dynamicpb message,
// an older generated type, any message with the same fields).
func decode[M proto.Message](req any) (M, error) {
	var zero M
	if r, ok := req.(M); ok {
		return r, nil
	}
	var pm proto.Message
	switch m := req.(type) {
	case proto.Message:
		pm = m
	case protoadapt.MessageV1:
		pm = protoadapt.MessageV2Of(m)
	default:
		return zero, fmt.Errorf("the request is a %T, not a protocol buffer message", req)
	}
	b, err := proto.Marshal(pm)
	if err != nil {
		return zero, fmt.Errorf("the request (%T) does not encode: %v", req, err)
	}
	out := zero.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		return zero, fmt.Errorf("the request (%T) does not decode as %s: %v", req, out.ProtoReflect().Descriptor().FullName(), err)
	}
	return out, nil
}

// refusal is a FailedPrecondition for a whole request, with a
// PreconditionFailure detail carrying the rule of err's registry row.
func refusal(method string, err error, subject, reason string) error {
	row := rules.Of(err)
	msg := fmt.Sprintf("bttl: wire guard refused %s: rule %s: %s", strings.TrimPrefix(method, service), row.Rule, bttlerr.Trim(reason))
	return &guardRefusal{st: withViolation(status.New(codes.FailedPrecondition, msg), row, subject, reason), reason: row}
}

// guardRefusal is a refusal of the guard with what its Recorder labels:
// the registry row, the guarded table (or view) and the family of its
// schema, "" for none. The caller gets st alone (Guard.refused).
type guardRefusal struct {
	st            *status.Status
	reason        *rules.Reason
	table, family string
}

func (e *guardRefusal) Error() string              { return e.st.Err().Error() }
func (e *guardRefusal) GRPCStatus() *status.Status { return e.st }

func withViolation(st *status.Status, row *rules.Reason, subject, description string) *status.Status {
	if d, err := st.WithDetails(&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{{
		Type: row.Rule, Subject: subject, Description: description,
	}}}, &errdetails.ErrorInfo{Reason: row.Info, Domain: rules.ErrorDomain}); err == nil {
		st = d
	}
	return st
}

// status is the FailedPrecondition refusal of v: the message names the
// rule, table, family, column and row; a PreconditionFailure detail
// carries the rule, table, family and column. Row and column are shown as
// docs/design.md#keys-in-messages says: quoted and cut, or redacted.
func (t *table) status(v *rules.Refusal, method string, row []byte, entry int) error {
	where := ""
	if entry >= 0 {
		where = fmt.Sprintf(", entry %d (the whole request is refused)", entry)
	}
	column := string(v.Column)
	col, desc := t.keyText.Key(column), bttlerr.Trim(t.keyText.Scrub(v.Err.Error(), column, string(row)))
	msg := fmt.Sprintf("bttl: wire guard refused %s: rule %s: table %q, family %q, column %s, row %s%s: %s",
		strings.TrimPrefix(method, service), v.Reason.Rule, t.id, v.Family, col, t.keyText.Key(string(row)), where, desc)
	fam := v.Family
	if _, ok := t.Schema[fam]; !ok {
		fam = ""
	}
	st := withViolation(status.New(codes.FailedPrecondition, msg), v.Reason, t.id+"/"+v.Family+":"+col, desc)
	return &guardRefusal{st: st, reason: v.Reason, table: t.id, family: fam}
}
