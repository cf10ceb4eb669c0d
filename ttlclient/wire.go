package ttlclient

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/internal/wirestream"
	"github.com/bttl/bttl/strategy"
)

// bttl's client interceptor (docs/design.md#tableapi): the connection a
// bttl client dials carries it, and it rewrites the request protos of the
// calls a Table marks (a context value holding the table), so that a
// caller's *bigtable.Mutation and bigtable.RowFilter get the Table's
// semantics without bttl reading either: the request is public, their
// fields are not. Unmarked calls (Client.Raw's, the table's own internal
// reads) pass untouched. A request the caller owns is never written: a
// changed one is a shallow copy (internal/rules.ShallowCopy).

// wireCall marks one call of a Table for the interceptor.
type wireCall struct {
	// Call rewrites the call's requests (internal/rules): its rules, its
	// write instant, its read's rows limit.
	rules.Call
	t     *Table
	probe bool // Client's interceptor probe: answer without sending
	seen  atomic.Bool
	// refused is the interceptor's refusal, which the table returns
	// typed: the client hands the caller only a status rebuilt from the
	// code and message.
	refused atomic.Pointer[CellError]

	// bulk: the rows of MutateRows requests refused, by entry.
	bulk wirestream.Refused[*CellError]

	// counted: the call's cells are counted on the recorder (its first
	// write attempt); countedEntries, a MutateRows entry's (the client
	// retries the same entries).
	counted        atomic.Bool
	countedEntries sync.Map
}

// newCall is a call of t to mark: writes applies the table's write rules
// (Table.API's writes), reads puts the TTL filter before the request's.
func (t *Table) newCall(writes, reads bool) *wireCall {
	return &wireCall{Call: rules.Call{Rules: t.rules, Now: t.clock.Now, Writes: writes, Reads: reads}, t: t}
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
	if method == rules.MethodClientConfig {
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
	case rules.MethodMutateRows:
		if c.Writes {
			return wirestream.NewBulk(ctx, desc, cc, method, streamer, opts, c.entry,
				func(m any) error { _, err := c.rewrite(method, m); return err }), nil
		}
	case rules.MethodReadRows, rules.MethodMutateRow, rules.MethodCheckAndMut, rules.MethodRMW:
	default:
		return streamer(ctx, desc, cc, method, opts...)
	}
	return wirestream.New(ctx, desc, cc, method, streamer, opts,
		func(m any) (any, error) { return c.rewrite(method, m) },
		func() error { return status.Error(codes.Canceled, wirestream.ErrClosedBeforeSend.Error()) }), nil
}

// rewrite is the request to send for a marked call's req, or the refusal.
func (c *wireCall) rewrite(method string, req any) (any, error) {
	out, row, v := c.Rewrite(method, req)
	if v != nil {
		return nil, c.refuse(string(row), v)
	}
	if c.Writes && c.t.obs != nil {
		switch r := out.(type) {
		case *btpb.MutateRowRequest:
			if c.counted.CompareAndSwap(false, true) {
				c.t.observeWire(r.GetMutations(), c.WriteTime())
			}
		case *btpb.CheckAndMutateRowRequest:
			if c.counted.CompareAndSwap(false, true) { // both branches, as Table.Apply counts them
				c.t.observeWire(r.GetTrueMutations(), c.WriteTime())
				c.t.observeWire(r.GetFalseMutations(), c.WriteTime())
			}
		}
	}
	return out, nil
}

// observeWire counts on the recorder the cells ms, a Table.API request's
// mutations as the rules rewrote them, set at now: each SetCell but the
// write-time companions the rules added.
func (t *Table) observeWire(ms []*btpb.Mutation, now time.Time) {
	nowMicros := bigtable.Timestamp(now.UnixMicro())
	for _, m := range ms {
		s := m.GetSetCell()
		if s == nil {
			continue
		}
		p, ok := t.rules.Policy(s.GetFamilyName())
		if !ok || (p.HasCompanions() && strings.HasPrefix(string(s.GetColumnQualifier()), strategy.ReservedQualifierStart)) {
			continue // a companion: a write-time family's reserved qualifiers are bttl's alone
		}
		t.obs.cell(&p, &rules.Op{Family: s.GetFamilyName()}, bigtable.Timestamp(s.GetTimestampMicros()), nowMicros)
	}
}

// entry is the entry of a Table.API MutateRows to send for e, or the
// status it is answered with: its refusal, the same on every attempt of
// the call (neither counted nor recorded again).
func (c *wireCall) entry(e *btpb.MutateRowsRequest_Entry) (*btpb.MutateRowsRequest_Entry, *status.Status) {
	ce, ok := c.bulk.Of(e)
	if !ok {
		out, v := c.Entry(e)
		if v == nil {
			if c.t.obs != nil {
				if _, seen := c.countedEntries.LoadOrStore(e, struct{}{}); !seen {
					c.t.observeWire(out.GetMutations(), c.WriteTime())
				}
			}
			return out, nil
		}
		ce = c.refuse(string(e.GetRowKey()), v)
		c.bulk.Add(e, ce.Row, ce)
	}
	return nil, ce.GRPCStatus()
}

// refuse records v as the call's typed refusal and returns it.
func (c *wireCall) refuse(row string, v *rules.Refusal) *CellError {
	e := c.t.refusal(row, v)
	c.refused.CompareAndSwap(nil, e)
	return e
}

// checkWire reports whether the client's connection carries bttl's
// interceptor: nil when it does, else ErrNotDialed naming what to use.
// The first call probes: a SampleRowKeys on the table, marked as a probe
// and with its context already cancelled, which the interceptor answers
// and which, without it, gRPC fails before sending anything.
func (t *Table) checkWire(ctx context.Context, what string) error {
	if t.wireState.Check(func() bool {
		// The probe's context is cancelled before the call: gRPC runs the
		// interceptors first and, without them, fails the call on the
		// cancelled context before anything is sent. So the probe sends
		// nothing either way.
		c := &wireCall{t: t, probe: true}
		pctx, cancel := context.WithCancel(c.mark(context.WithoutCancel(ctx)))
		cancel()
		_, _ = t.raw.SampleRowKeys(pctx)
		return c.seen.Load()
	}) {
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
