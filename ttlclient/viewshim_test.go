package ttlclient_test

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// viewShim stands in for the view support neither emulator has (bttest
// and cbtemulator answer CreateAuthorizedView with Unimplemented and look
// only at table_name, so a request naming a view finds no table; see
// TestEmulatorsServeNoViewsOrSQL). As client interceptors on a real
// server connection, it records every request as the client sent it, then
// sends a copy naming, instead of the authorized view, its table, and
// instead of materialized view M, table M, which a test fills with what the
// view would hold. The view's own restrictions (a subset of families) are
// not emulated: everything else is the real server's.
type viewShim struct {
	mu   sync.Mutex
	sent []sentRequest
}

// sentRequest is one request as the client sent it.
type sentRequest struct {
	method string // short name: MutateRow, ReadRows, ...
	msg    proto.Message
}

func (s *viewShim) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(ctx, method, s.record(method, req), reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return &shimStream{ClientStream: cs, shim: s, method: method}, nil
		}),
	}
}

type shimStream struct {
	grpc.ClientStream
	shim   *viewShim
	method string
}

func (s *shimStream) SendMsg(m any) error { return s.ClientStream.SendMsg(s.shim.record(s.method, m)) }

// dataMethods are the requests the shim records: those reading or writing
// data (not the client's own background calls).
var dataMethods = map[string]bool{"MutateRow": true, "MutateRows": true, "CheckAndMutateRow": true,
	"ReadModifyWriteRow": true, "ReadRows": true, "SampleRowKeys": true, "PrepareQuery": true, "ExecuteQuery": true}

// record keeps req and returns what to send: a copy naming tables only.
func (s *viewShim) record(method string, req any) any {
	m, ok := req.(proto.Message)
	short, data := strings.CutPrefix(method, "/google.bigtable.v2.Bigtable/")
	if !ok || !data || !dataMethods[short] {
		return req
	}
	s.mu.Lock()
	s.sent = append(s.sent, sentRequest{method: short, msg: proto.Clone(m)})
	s.mu.Unlock()
	out := proto.Clone(m)
	r := out.ProtoReflect()
	fields := r.Descriptor().Fields()
	str := func(name protoreflect.Name) string {
		if fd := fields.ByName(name); fd != nil {
			return r.Get(fd).String()
		}
		return ""
	}
	setTable := func(name string, clear protoreflect.Name) {
		r.Set(fields.ByName("table_name"), protoreflect.ValueOfString(name))
		r.Clear(fields.ByName(clear))
	}
	if av := str("authorized_view_name"); av != "" && fields.ByName("table_name") != nil {
		setTable(av[:strings.Index(av, "/authorizedViews/")], "authorized_view_name")
	}
	if mv := str("materialized_view_name"); mv != "" && fields.ByName("table_name") != nil {
		setTable(strings.Replace(mv, "/materializedViews/", "/tables/", 1), "materialized_view_name")
	}
	return out
}

// requests is what the client sent for method since the last reset.
func (s *viewShim) requests(method string) []proto.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []proto.Message
	for _, r := range s.sent {
		if r.method == method {
			out = append(out, r.msg)
		}
	}
	return out
}

// count is how many data requests the client sent since the last reset.
func (s *viewShim) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

func (s *viewShim) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = nil
}
