// Package wirestream is a gRPC client stream opened only once its first
// request has been checked (and may have been rewritten): what bttl's wire
// guard and bttl's client interceptor use on MutateRows and ReadRows, so
// that a refused request never reaches the server.
package wirestream

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// lazyStream opens the real stream only from a SendMsg whose message the
// guard checked (and, for reads, rewrote): nothing reaches the server
// before that, whatever the caller, or an interceptor before the guard,
// does with the stream first. Until then Context and Trailer answer
// without opening it, and Header and RecvMsg wait for the outcome: the
// refusal (FailedPrecondition) or the real stream.
//
// gRPC lets one goroutine send (SendMsg, CloseSend) while another
// receives; only the sending side settles the stream, so settle runs on
// one goroutine and the receiving side reads cs and err after ready.
type lazyStream struct {
	check    func(any) (any, error)
	closed   func() error // the outcome of a CloseSend before any request
	ctx      context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	ready chan struct{} // closed once cs or err is set
	cs    grpc.ClientStream
	err   error
}

// New is a stream on method whose first SendMsg sends check's result (or
// fails with check's error, opening nothing); a CloseSend before any
// SendMsg settles it with closed's error.
func New(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts []grpc.CallOption,
	check func(any) (any, error), closed func() error) grpc.ClientStream {
	return &lazyStream{check: check, closed: closed, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts, ready: make(chan struct{})}
}

func (s *lazyStream) settled() bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// settle records the stream's outcome once, on the sending goroutine.
func (s *lazyStream) settle(cs grpc.ClientStream, err error) {
	if s.settled() {
		return
	}
	s.cs, s.err = cs, err
	close(s.ready)
}

// wait blocks until the stream is settled or the caller's context ends.
func (s *lazyStream) wait() error {
	select {
	case <-s.ready:
		return nil
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

// ErrClosedBeforeSend: CloseSend came before any request.
var ErrClosedBeforeSend = errors.New("the stream was closed before its request was sent: nothing was sent")

func (s *lazyStream) SendMsg(m any) error {
	out, err := s.check(m)
	if err != nil {
		s.settle(nil, err)
		return err
	}
	if !s.settled() {
		cs, err := s.streamer(s.ctx, s.desc, s.cc, s.method, s.opts...)
		s.settle(cs, err)
	}
	if s.cs == nil {
		return s.err
	}
	return s.cs.SendMsg(out)
}

func (s *lazyStream) CloseSend() error {
	if !s.settled() {
		// No request passed the guard, so there is no stream to close: the
		// receiving side learns that nothing was sent.
		s.settle(nil, s.closed())
		return nil
	}
	if s.cs == nil {
		return s.err
	}
	return s.cs.CloseSend()
}

func (s *lazyStream) RecvMsg(m any) error {
	if err := s.wait(); err != nil {
		return err
	}
	if s.cs == nil {
		return s.err
	}
	return s.cs.RecvMsg(m)
}

func (s *lazyStream) Header() (metadata.MD, error) {
	if err := s.wait(); err != nil {
		return nil, err
	}
	if s.cs == nil {
		return nil, s.err
	}
	return s.cs.Header()
}

// Trailer is valid only once RecvMsg has returned an error; before the
// stream is open there is none.
func (s *lazyStream) Trailer() metadata.MD {
	if s.settled() && s.cs != nil {
		return s.cs.Trailer()
	}
	return nil
}

func (s *lazyStream) Context() context.Context {
	if s.settled() && s.cs != nil {
		return s.cs.Context()
	}
	return s.ctx
}
