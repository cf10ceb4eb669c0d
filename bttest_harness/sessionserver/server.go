package sessionserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bttl/bttl/internal/keytext"
)

// Defaults of Config.
const (
	DefaultMinSessions = 1
	DefaultMaxSessions = 4
	// DefaultKeepAlive is longer than any call a bttest server serves, so
	// the client's heartbeat watchdog never fires on a call in flight.
	DefaultKeepAlive = time.Minute
)

// Config describes the session plane served.
type Config struct {
	// SessionLoad is GetClientConfiguration's session_load: the share of
	// eligible calls (Apply without a condition, ReadRow, a ReadRows of
	// one key) the client sends on sessions, from 0 (none: the zero
	// Config serves the configuration but moves no traffic) to 1 (all).
	SessionLoad float32
	// MinSessions and MaxSessions bound each session pool (one per table
	// and permission); the client takes the server's values over its own
	// (default DefaultMinSessions, DefaultMaxSessions).
	MinSessions, MaxSessions int32
	// KeepAlive is the heartbeat interval announced to every session
	// (default DefaultKeepAlive).
	KeepAlive time.Duration
}

// Stats counts the calls served, by plane.
type Stats struct {
	// ClientConfigs is the GetClientConfiguration calls answered (the
	// client's start-up probe and its polls).
	ClientConfigs int64
	// Sessions is the OpenTable streams opened.
	Sessions int64
	// VirtualReadRows and VirtualMutateRows are the virtual calls served
	// on sessions, failed ones included.
	VirtualReadRows, VirtualMutateRows int64
	// ReadRows and MutateRow are the classic calls of those names that
	// reached the server.
	ReadRows, MutateRow int64
}

// Server serves the session plane on a bttest server. See the package doc.
type Server struct {
	cfg   Config
	stats struct {
		clientConfigs, sessions, vReadRows, vMutateRows, readRows, mutateRow atomic.Int64
	}
}

// New returns a Server for cfg, or an error when cfg's SessionLoad is not
// within [0, 1] or its bounds are negative or crossed.
func New(cfg Config) (*Server, error) {
	if !(cfg.SessionLoad >= 0 && cfg.SessionLoad <= 1) {
		return nil, fmt.Errorf("sessionserver: session load %v not within [0, 1]", cfg.SessionLoad)
	}
	if cfg.MinSessions == 0 {
		cfg.MinSessions = DefaultMinSessions
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MinSessions < 0 || cfg.MaxSessions < cfg.MinSessions {
		return nil, fmt.Errorf("sessionserver: session bounds [%d, %d] not a range", cfg.MinSessions, cfg.MaxSessions)
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	return &Server{cfg: cfg}, nil
}

// ServerOptions are the interceptors that serve the session plane: give
// them to bttest.NewServer (or bttestharness.Config.ServerOptions). They
// must come before any interceptor that would hold an OpenTable stream's
// call open for its whole life (a gate counting calls in flight).
func (s *Server) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(s.unary), grpc.ChainStreamInterceptor(s.stream)}
}

// Stats is what the server counted so far.
func (s *Server) Stats() Stats {
	return Stats{
		ClientConfigs:     s.stats.clientConfigs.Load(),
		Sessions:          s.stats.sessions.Load(),
		VirtualReadRows:   s.stats.vReadRows.Load(),
		VirtualMutateRows: s.stats.vMutateRows.Load(),
		ReadRows:          s.stats.readRows.Load(),
		MutateRow:         s.stats.mutateRow.Load(),
	}
}

// AwaitSessions calls probe until a call of it was served on a session,
// and returns nil then, or ctx's error. A client applies the session load
// once its first configuration poll has returned, in the background, so
// its first calls can still take the classic RPCs: probe is one call
// eligible for sessions (a ReadRow, say) of the client under test.
func (s *Server) AwaitSessions(ctx context.Context, probe func(context.Context) error) error {
	for {
		before := s.virtual()
		if err := probe(ctx); err != nil {
			return fmt.Errorf("sessionserver: probe: %w", err)
		}
		if s.virtual() > before {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sessionserver: no call on a session yet (%d configuration calls answered): %w",
				s.stats.clientConfigs.Load(), err)
		}
	}
}

func (s *Server) virtual() int64 { return s.stats.vReadRows.Load() + s.stats.vMutateRows.Load() }

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	switch info.FullMethod {
	case btpb.Bigtable_GetClientConfiguration_FullMethodName:
		s.stats.clientConfigs.Add(1)
		return &btpb.ClientConfiguration{
			SessionConfiguration: &btpb.SessionClientConfiguration{
				SessionLoad: s.cfg.SessionLoad,
				// The client's configuration manager takes these over
				// its own (the fake server's comment, v1.58.0).
				SessionPoolConfiguration: &btpb.SessionClientConfiguration_SessionPoolConfiguration{
					MinSessionCount: s.cfg.MinSessions,
					MaxSessionCount: s.cfg.MaxSessions,
				},
			},
		}, nil
	case btpb.Bigtable_MutateRow_FullMethodName:
		s.stats.mutateRow.Add(1)
	}
	return handler(ctx, req)
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	switch info.FullMethod {
	case btpb.Bigtable_OpenTable_FullMethodName:
		// srv is the service the interceptor wraps (grpc.StreamServerInfo):
		// bttest's, registered as a btpb.BigtableServer.
		backend, ok := srv.(btpb.BigtableServer)
		if !ok {
			return status.Errorf(codes.Internal, "sessionserver: the wrapped service %T is not a Bigtable server", srv)
		}
		s.stats.sessions.Add(1)
		return s.serveSession(backend, ss)
	case btpb.Bigtable_ReadRows_FullMethodName:
		s.stats.readRows.Add(1)
	}
	return handler(srv, ss)
}

// serveSession is one OpenTable stream, from its handshake to its end.
func (s *Server) serveSession(backend btpb.BigtableServer, ss grpc.ServerStream) error {
	first := new(btpb.SessionRequest)
	if err := ss.RecvMsg(first); err != nil {
		return err
	}
	open := first.GetOpenSession()
	if open == nil {
		return status.Errorf(codes.InvalidArgument, "sessionserver: first frame is %T, not OpenSession", first.GetPayload())
	}
	var target btpb.OpenTableRequest
	if err := proto.Unmarshal(open.GetPayload(), &target); err != nil {
		return status.Errorf(codes.InvalidArgument, "sessionserver: OpenSession payload: %v", err)
	}
	if err := ss.SendMsg(&btpb.SessionResponse{Payload: &btpb.SessionResponse_OpenSession{OpenSession: &btpb.OpenSessionResponse{}}}); err != nil {
		return err
	}
	params := &btpb.SessionParametersResponse{KeepAlive: durationpb.New(s.cfg.KeepAlive)}
	if err := ss.SendMsg(&btpb.SessionResponse{Payload: &btpb.SessionResponse_SessionParameters{SessionParameters: params}}); err != nil {
		return err
	}
	for {
		req := new(btpb.SessionRequest)
		if err := ss.RecvMsg(req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if req.GetCloseSession() != nil {
			return nil
		}
		vrpc := req.GetVirtualRpc()
		if vrpc == nil {
			continue
		}
		if err := ss.SendMsg(s.serveVirtual(backend, ss, &target, vrpc)); err != nil {
			return err
		}
	}
}

// serveVirtual is the answer to one virtual call on the session opened
// for target.
func (s *Server) serveVirtual(backend btpb.BigtableServer, ss grpc.ServerStream, target *btpb.OpenTableRequest, vrpc *btpb.VirtualRpcRequest) *btpb.SessionResponse {
	ctx := ss.Context()
	if d := vrpc.GetDeadline(); d != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.AsDuration())
		defer cancel()
	}
	var (
		req  btpb.TableRequest
		resp *btpb.TableResponse
		err  error
	)
	if err = proto.Unmarshal(vrpc.GetPayload(), &req); err != nil {
		err = status.Errorf(codes.InvalidArgument, "sessionserver: TableRequest: %v", err)
	} else {
		switch p := req.GetPayload().(type) {
		case *btpb.TableRequest_ReadRow:
			s.stats.vReadRows.Add(1)
			var row *btpb.Row
			row, err = readRow(ctx, backend, ss, target, p.ReadRow)
			resp = &btpb.TableResponse{Payload: &btpb.TableResponse_ReadRow{ReadRow: &btpb.SessionReadRowResponse{Row: row}}}
		case *btpb.TableRequest_MutateRow:
			s.stats.vMutateRows.Add(1)
			_, err = backend.MutateRow(ctx, &btpb.MutateRowRequest{
				TableName:    target.GetTableName(),
				AppProfileId: target.GetAppProfileId(),
				RowKey:       p.MutateRow.GetKey(),
				Mutations:    p.MutateRow.GetMutations(),
			})
			resp = &btpb.TableResponse{Payload: &btpb.TableResponse_MutateRow{MutateRow: &btpb.SessionMutateRowResponse{}}}
		default:
			err = status.Errorf(codes.Unimplemented, "sessionserver: virtual call %T", p)
		}
	}
	if err == nil {
		var payload []byte
		if payload, err = proto.Marshal(resp); err == nil {
			return &btpb.SessionResponse{Payload: &btpb.SessionResponse_VirtualRpc{VirtualRpc: &btpb.VirtualRpcResponse{
				RpcId:   vrpc.GetRpcId(),
				Payload: payload,
			}}}
		}
	}
	return &btpb.SessionResponse{Payload: &btpb.SessionResponse_Error{Error: &btpb.ErrorResponse{
		RpcId:  vrpc.GetRpcId(),
		Status: status.Convert(err).Proto(),
	}}}
}

// readRow is the backend's ReadRows of req's one key with req's filter,
// as one Row (nil when the row has no cells).
func readRow(ctx context.Context, backend btpb.BigtableServer, ss grpc.ServerStream, target *btpb.OpenTableRequest, req *btpb.SessionReadRowRequest) (*btpb.Row, error) {
	out := &collector{ServerStream: ss, ctx: ctx}
	err := backend.ReadRows(&btpb.ReadRowsRequest{
		TableName:    target.GetTableName(),
		AppProfileId: target.GetAppProfileId(),
		Rows:         &btpb.RowSet{RowKeys: [][]byte{req.GetKey()}},
		Filter:       req.GetFilter(),
	}, out)
	if err != nil {
		return nil, err
	}
	return mergeRow(out.chunks)
}

// collector is the ReadRows stream of a virtual ReadRow: it keeps the
// chunks sent, and gives the virtual call's context (its deadline).
type collector struct {
	grpc.ServerStream
	ctx    context.Context
	chunks []*btpb.ReadRowsResponse_CellChunk
}

func (c *collector) Context() context.Context { return c.ctx }

func (c *collector) Send(r *btpb.ReadRowsResponse) error {
	c.chunks = append(c.chunks, r.GetChunks()...)
	return nil
}

func (c *collector) SendMsg(m any) error {
	r, ok := m.(*btpb.ReadRowsResponse)
	if !ok {
		return status.Errorf(codes.Internal, "sessionserver: ReadRows sent %T", m)
	}
	return c.Send(r)
}

// mergeRow is the row that ReadRows chunks of one key make, by the rules
// of ReadRowsResponse.CellChunk: a row key, family name or qualifier
// starts a row, family or column and holds until the next; value_size > 0
// marks a value continued in the next chunk; reset_row drops the row so
// far; commit_row ends it.
func mergeRow(chunks []*btpb.ReadRowsResponse_CellChunk) (*btpb.Row, error) {
	var (
		row       *btpb.Row
		committed *btpb.Row
		fam       *btpb.Family
		col       *btpb.Column
		partial   []byte
		inValue   bool
	)
	for _, c := range chunks {
		if c.GetResetRow() {
			row, fam, col, partial, inValue = nil, nil, nil, nil, false
			continue
		}
		if !inValue {
			// A key, family or qualifier may be repeated on chunks of the
			// same row, family or column (bttest repeats them all).
			if key := c.GetRowKey(); len(key) > 0 {
				switch {
				case row != nil && !bytes.Equal(key, row.Key):
					return nil, status.Errorf(codes.Internal, "sessionserver: ReadRows row %s inside row %s", keytext.Quote(string(key)), keytext.Quote(string(row.Key)))
				case committed != nil:
					return nil, status.Errorf(codes.Internal, "sessionserver: ReadRows of one key returned a second row %s", keytext.Quote(string(key)))
				case row == nil:
					row, fam, col = &btpb.Row{Key: key}, nil, nil
				}
			}
			if row == nil {
				return nil, status.Error(codes.Internal, "sessionserver: ReadRows chunk before a row key")
			}
			if name := c.GetFamilyName(); name != nil && (fam == nil || fam.Name != name.GetValue()) {
				fam = &btpb.Family{Name: name.GetValue()}
				row.Families = append(row.Families, fam)
				col = nil
			}
			if q := c.GetQualifier(); q != nil && (col == nil || !bytes.Equal(col.Qualifier, q.GetValue())) {
				if fam == nil {
					return nil, status.Error(codes.Internal, "sessionserver: ReadRows qualifier before a family")
				}
				col = &btpb.Column{Qualifier: q.GetValue()}
				fam.Columns = append(fam.Columns, col)
			}
			if col == nil {
				return nil, status.Error(codes.Internal, "sessionserver: ReadRows cell before a column")
			}
			col.Cells = append(col.Cells, &btpb.Cell{TimestampMicros: c.GetTimestampMicros(), Labels: c.GetLabels()})
		}
		wasIn := inValue
		inValue = c.GetValueSize() > 0
		switch {
		case !wasIn && !inValue: // the whole value in one chunk
			col.Cells[len(col.Cells)-1].Value = c.GetValue()
		case inValue:
			partial = append(partial, c.GetValue()...)
		default:
			col.Cells[len(col.Cells)-1].Value = append(partial, c.GetValue()...)
			partial = nil
		}
		if c.GetCommitRow() {
			if inValue {
				return nil, status.Error(codes.Internal, "sessionserver: ReadRows committed a row inside a value")
			}
			committed, row = row, nil
		}
	}
	if row != nil {
		return nil, status.Error(codes.Internal, "sessionserver: ReadRows ended inside a row")
	}
	return committed, nil
}
