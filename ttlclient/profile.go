package ttlclient

import (
	"errors"
	"fmt"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/internal/rules"
)

// App profiles (docs/design.md#app-profiles): Bigtable allows single-row
// transactions (CheckAndMutateRow, ReadModifyWriteRow) only through a
// profile with single-cluster routing and allow_transactional_writes, and
// no write through a Data Boost profile. bttl sends single-row
// transactions for Expire, ExpireColumn, ExpireRow and Expire's purge,
// every time-to-idle refresh, the cell moves, a conditional Mutation and
// ApplyReadModifyWrite: all through Table.transact, on the client's
// transactional profile (ClientConfig.TransactionalAppProfile,
// WithTransactionalClient), the client's own profile without one.

var (
	// ErrTransactionsNotAllowed: the server refused a single-row
	// transaction (CheckAndMutateRow, ReadModifyWriteRow) because the app
	// profile does not allow it (multi-cluster routing, or single-cluster
	// without allow_transactional_writes); see *ProfileError.
	ErrTransactionsNotAllowed = rules.ErrTransactionsNotAllowed
	// ErrReadOnlyProfile: the server refused a write through a Data Boost
	// app profile, which is read-only; see *ProfileError.
	ErrReadOnlyProfile = rules.ErrReadOnlyProfile
)

// ProfileError is a call an app profile does not allow: the profile, the
// call, and the fix. It wraps ErrTransactionsNotAllowed or
// ErrReadOnlyProfile and the server's error, and its GRPCStatus keeps the
// server's code (FailedPrecondition). Open returns one, with no server
// error, for a profile it read that cannot serve the schema (see Open).
type ProfileError struct {
	Profile string // the app profile's ID; "" is the instance's default profile
	Call    string // what was refused: "CheckAndMutateRow", "ReadModifyWriteRow", "MutateRow", "MutateRows"; "Open" for Open's check
	Err     error  // ErrTransactionsNotAllowed or ErrReadOnlyProfile
	Server  error  // the server's error; nil from Open's check
}

func (e *ProfileError) Error() string {
	profile := fmt.Sprintf("app profile %q", e.Profile)
	if e.Profile == "" {
		profile = "the client's app profile (the instance's default unless one was set)"
	}
	fix := "send writes through a standard profile"
	if errors.Is(e.Err, ErrTransactionsNotAllowed) {
		fix = "give the client a profile with single-cluster routing and allow_transactional_writes for its single-row transactions " +
			"(Expire, time-to-idle refreshes, cell moves, conditional mutations): ttlclient.ClientConfig.TransactionalAppProfile, " +
			"or ttlclient.WithTransactionalClient on Wrap"
	}
	msg := fmt.Sprintf("%v (%s, %s): %s (docs/design.md#app-profiles)", e.Err, e.Call, profile, fix)
	if e.Server != nil {
		msg += "; the server said: " + status.Convert(e.Server).Message()
	}
	return msg
}

func (e *ProfileError) Unwrap() []error {
	if e.Server == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Server}
}

// GRPCStatus is the server's code (FailedPrecondition, the registry's for
// both sentinels) with the error's message and an ErrorInfo reason.
func (e *ProfileError) GRPCStatus() *status.Status { return rules.Status(e.Err, e.Error()) }

// WithTransactionalClient gives a client you Wrap the bigtable client its
// single-row transactions go through (see ClientConfig.TransactionalAppProfile),
// created with bigtable.ClientConfig{AppProfile: profile} on the same
// connection settings as the wrapped one. Close leaves it open: its owner
// closes it. A ClientOption only: every table of the client uses it.
func WithTransactionalClient(c *bigtable.Client, profile string) ClientOption {
	return clientOption(func(cfg *config) { cfg.txn, cfg.txnProfile = c, profile })
}

// transact sends one single-row transaction through the table's
// transactional profile: send is given the table to send it on (the
// transactional client's, else the table's own). Every CheckAndMutateRow
// and ReadModifyWriteRow ttlclient sends goes through it; call names it
// in a refusal of the profile, which is a *ProfileError.
func (t *Table) transact(call string, send func(bigtable.TableAPI) error) error {
	return t.profiled(call, t.txnProfile, send(t.txn))
}

// profiled is err, a call's error through profile, as a *ProfileError
// when it is the server's refusal of the profile.
func (t *Table) profiled(call, profile string, err error) error {
	if sentinel := rules.ProfileRefusal(err); sentinel != nil {
		return &ProfileError{Profile: profile, Call: call, Err: sentinel, Server: err}
	}
	return err
}
