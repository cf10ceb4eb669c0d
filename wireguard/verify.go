package wireguard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/bttl/bttl/internal/rules"
	"os"
	"regexp"
	"strings"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/internal/bttlerr"
)

// RuleVerifyProbe: the request Guard.Verify sends, refused by the guard
// that made it (and by no other).
const RuleVerifyProbe = "verify-probe"

// RuleNotInstalled: every request of a client whose guard could not be
// installed (ClientOptions under BIGTABLE_EMULATOR_HOST could not make
// its connection); the message says why.
const RuleNotInstalled = "guard-not-installed"

var (
	// ErrGuardInactive: Guard.Verify's probe was not refused by the guard,
	// so the client's requests do not go through it. See *VerifyError.
	ErrGuardInactive = errors.New("bttl: wire guard not installed on this client")
	// ErrNotGuarded: Guard.Verify was asked about a table the guard does
	// not guard.
	ErrNotGuarded = errors.New("bttl: table not guarded by the wire guard")
)

// VerifyError is Guard.Verify's report of a guard that is not on the
// client's connection: the table probed, what happened to the probe, and
// the probe's error as the client returned it (nil when the server
// accepted it). It wraps ErrGuardInactive.
type VerifyError struct {
	Table  string
	Reason string
	Err    error
}

func (e *VerifyError) Error() string {
	msg := fmt.Sprintf("%v (table %q): %s", ErrGuardInactive, e.Table, e.Reason)
	if e.Err != nil {
		msg += ": " + bttlerr.Trim(e.Err.Error())
	}
	return msg + "; install it with bigtable.NewClientWithConfig(..., guard.ClientOptions()...), " +
		"or, on a connection dialled yourself (option.WithGRPCConn), with grpc.NewClient(..., guard.DialOptions()...)"
}

func (e *VerifyError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrGuardInactive}
	}
	return []error{ErrGuardInactive, e.Err}
}

// Verify reports whether the guard is installed on client: nil when it
// is, a *VerifyError wrapping ErrGuardInactive when it is not. It sends
// one MutateRow on table (a table ID the guard guards) that this guard,
// and only this one, refuses before sending it: a server timestamp in a
// family whose name carries the guard's own token and is not a valid
// family name, so a server that gets the probe (the guard is not there)
// refuses it too and nothing is written. Without the guard the probe is
// one RPC to the server; with it, none. A guard that is installed costs
// no network, so Verify can run at startup and in tests.
func (g *Guard) Verify(ctx context.Context, client *bigtable.Client, table string) error {
	if _, ok := g.tables[table]; !ok {
		return fmt.Errorf("%w: %q (the guard guards %d tables; Verify probes one of them)", ErrNotGuarded, table, len(g.tables))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m := bigtable.NewMutation()
	// A server timestamp: not retryable, so an absent guard costs one
	// attempt whatever the server answers.
	m.Set(g.probe, "verify", bigtable.ServerTime, nil)
	err := client.Open(table).Apply(ctx, "bttl-wireguard-verify", m)
	switch {
	case status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), "rule "+RuleVerifyProbe+":") &&
		strings.Contains(status.Convert(err).Message(), g.probe):
		return nil
	case err == nil:
		return &VerifyError{Table: table, Reason: "the server accepted the probe"}
	case ctx.Err() != nil:
		return err
	case strings.Contains(err.Error(), "bttl: wire guard refused"):
		return &VerifyError{Table: table, Reason: "another bttl wire guard, not this one, refused the probe", Err: err}
	}
	return &VerifyError{Table: table, Reason: "the probe reached the server (the server refused it: nothing was written)", Err: err}
}

// newProbe is the family name of a guard's Verify probe: a space makes
// it an invalid family name, which no schema and no table can hold.
func newProbe() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return "bttl wireguard probe " + hex.EncodeToString(b)
}

// emulatorScheme is what the bigtable client strips from
// BIGTABLE_EMULATOR_HOST before dialling it (internal/option, v1.58.0).
var emulatorScheme = regexp.MustCompile("^(http://|https://|passthrough:///)")

// emulatorOptions installs the guard under BIGTABLE_EMULATOR_HOST. There
// the bigtable client (v1.58.0, internal/option.DefaultClientOptions)
// dials the emulator itself and passes that connection as
// option.WithGRPCConn, so dial options never reach it; a later
// option.WithGRPCConn replaces it. This one is dialled the way the client
// dials the emulator (plaintext, passthrough), with the guard's
// interceptors; the client closes it on Close. The connection the client
// dialled first is left unused.
func (g *Guard) emulatorOptions(addr string) []option.ClientOption {
	target := "passthrough:///" + emulatorScheme.ReplaceAllString(addr, "")
	conn, err := grpc.NewClient(target, append(g.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		// Never silently unguarded: every request of the client fails,
		// saying why.
		why := fmt.Sprintf("BIGTABLE_EMULATOR_HOST=%q: the guard could not dial it (%v); the client's requests are refused rather than sent unguarded", addr, err)
		refuse := func(method string) error {
			return refusal(method, rules.ErrGuardNotInstalled, addr, why).(*guardRefusal).st.Err()
		}
		conn, err = grpc.NewClient("passthrough:///bttl-wireguard-not-installed",
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithChainUnaryInterceptor(func(_ context.Context, method string, _, _ any, _ *grpc.ClientConn, _ grpc.UnaryInvoker, _ ...grpc.CallOption) error {
				return refuse(method)
			}),
			grpc.WithChainStreamInterceptor(func(_ context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, method string, _ grpc.Streamer, _ ...grpc.CallOption) (grpc.ClientStream, error) {
				return nil, refuse(method)
			}))
		if err != nil {
			panic("wireguard: a passthrough connection with fixed, valid options failed: " + err.Error())
		}
	}
	return []option.ClientOption{option.WithGRPCConn(conn)}
}

// emulatorHost is the emulator the bigtable client dials, if any.
func emulatorHost() string { return os.Getenv("BIGTABLE_EMULATOR_HOST") }
