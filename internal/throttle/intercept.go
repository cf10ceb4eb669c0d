package throttle

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
)

// DialOptions are the gRPC options that install the controller's
// interceptors on a client's connections (option.WithGRPCDialOption
// each): every attempt's status reaches the controller, RetryInfo
// included.
func (c *Controller) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(c.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(c.StreamClientInterceptor()),
	}
}

// UnaryClientInterceptor observes each unary call's answer and sends a
// call answered RESOURCE_EXHAUSTED with RetryInfo again once its whole
// delay passed (the server refused it, asking for it later; the workers'
// hold may be shorter, Config.MaxHold) and no hold remains, until its
// context ends; then the RESOURCE_EXHAUSTED answer is returned.
func (c *Controller) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for {
			err := invoker(ctx, method, req, reply, cc, opts...)
			delay, retry := c.observe(err)
			if !retry {
				return err
			}
			if delay > 0 && c.sleep(ctx, c.clock.Now(), delay) != nil || c.awaitHold(ctx) != nil {
				return err
			}
			c.mu.Lock()
			c.retried++
			c.mu.Unlock()
		}
	}
}

// StreamClientInterceptor observes each stream's end: the client retries
// its streams itself (ReadRows, SampleRowKeys honour RetryInfo), so the
// controller only learns of the answer, and its workers hold as the
// client's retry does.
func (c *Controller) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			c.observe(err)
			return nil, err
		}
		return &observedStream{ClientStream: s, c: c}, nil
	}
}

// observedStream reports its end (its first error from RecvMsg) once.
type observedStream struct {
	grpc.ClientStream
	c    *Controller
	once sync.Once
}

func (s *observedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.once.Do(func() {
			if errors.Is(err, io.EOF) {
				s.c.observe(nil)
				return
			}
			s.c.observe(err)
		})
	}
	return err
}
