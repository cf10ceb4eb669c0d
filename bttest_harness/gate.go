package bttestharness

import (
	"context"
	"sync"

	"google.golang.org/grpc"
)

// readWriteGate keeps the in-process bttest from running a ReadRows while
// a write runs (see the package doc: bttest v1.58.0 lets a write sort a
// row's column names in place while a read iterates them unlocked, which
// -race reports and which can tear the read). Reads run together, writes
// run together, the two sides take turns: a side that waits gets the next
// turn, so neither starves.
type readWriteGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	active  [2]int // running calls per side
	waiting [2]int
	turn    int // the side that goes next when both wait
}

const (
	gateRead = iota
	gateWrite
)

func newReadWriteGate() *readWriteGate {
	g := &readWriteGate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *readWriteGate) enter(side int) {
	other := 1 - side
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting[side]++
	if g.active[other] > 0 {
		g.turn = side
	}
	for g.active[other] > 0 || g.waiting[other] > 0 && g.turn == other {
		g.cond.Wait()
	}
	g.waiting[side]--
	g.active[side]++
}

func (g *readWriteGate) exit(side int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active[side]--
	if g.active[side] == 0 {
		g.turn = 1 - side
	}
	g.cond.Broadcast()
}

// gateSides: which data methods read rows and which write them.
var gateSides = map[string]int{
	"/google.bigtable.v2.Bigtable/ReadRows":           gateRead,
	"/google.bigtable.v2.Bigtable/MutateRow":          gateWrite,
	"/google.bigtable.v2.Bigtable/MutateRows":         gateWrite,
	"/google.bigtable.v2.Bigtable/CheckAndMutateRow":  gateWrite,
	"/google.bigtable.v2.Bigtable/ReadModifyWriteRow": gateWrite,
}

// serverOptions install the gate as the innermost interceptors, so
// interceptors from Config.ServerOptions see every call as before.
func (g *readWriteGate) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			side, ok := gateSides[info.FullMethod]
			if !ok {
				return handler(ctx, req)
			}
			g.enter(side)
			defer g.exit(side)
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			side, ok := gateSides[info.FullMethod]
			if !ok {
				return handler(srv, ss)
			}
			// The handler's responses are held until it returns: a
			// handler blocked on a slow client would otherwise hold the
			// gate, and a client writing from its ReadRows callback would
			// wait for itself.
			held := &heldStream{ServerStream: ss}
			g.enter(side)
			err := handler(srv, held)
			g.exit(side)
			for _, m := range held.out {
				if serr := ss.SendMsg(m); serr != nil {
					return serr
				}
			}
			return err
		}),
	}
}

// heldStream keeps the messages a handler sends, to send them later.
type heldStream struct {
	grpc.ServerStream
	out []any
}

func (s *heldStream) SendMsg(m any) error {
	s.out = append(s.out, m)
	return nil
}
