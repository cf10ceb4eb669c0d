package rules

import (
	"errors"
	"fmt"
	"strings"

	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The server's refusals of an app profile, as they reach the client: a
// status, no ErrorInfo. Production's message for a single-row transaction
// on a profile that does not allow it is "Single-row transactions are not
// allowed by this app profile" (FAILED_PRECONDITION, as a client surfaced
// it: https://github.com/googleapis/google-cloud-python/pull/10021;
// bttest_harness/prodserver's msgTransactions). No source gives
// production's exact answer to a write through a Data Boost profile ("You
// can't send write or delete requests with Data Boost", Data Boost
// overview): a FAILED_PRECONDITION naming Data Boost is taken for it, as
// the production-rules server answers (docs/emulators.md).
const (
	msgTransactions = "Single-row transactions are not allowed by this app profile"
	msgDataBoost    = "Data Boost"
)

// ProfileRefusal is the sentinel of the app-profile refusal err is
// (ErrTransactionsNotAllowed or ErrReadOnlyProfile), nil when it is none:
// a FAILED_PRECONDITION with the server's message, never bttl's own
// refusal (its status carries an ErrorInfo of ErrorDomain).
func ProfileRefusal(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			// bttl's own refusal (its message may quote a row key
			// holding any words), not the server's.
			return nil
		}
	}
	switch msg := st.Message(); {
	case strings.Contains(msg, msgTransactions):
		return ErrTransactionsNotAllowed
	case strings.Contains(msg, msgDataBoost):
		return ErrReadOnlyProfile
	}
	return nil
}

// DefaultProfileID is the ID of the profile a client without one uses
// ("When you create a Bigtable instance, a default app profile is created
// automatically", App profiles overview).
const DefaultProfileID = "default"

// Transactional reports whether ap allows single-row transactions:
// single-cluster routing with allow_transactional_writes, and not Data
// Boost (read-only).
func Transactional(ap *btapb.AppProfile) bool {
	return ap.GetSingleClusterRouting().GetAllowTransactionalWrites() && ap.GetDataBoostIsolationReadOnly() == nil
}

// ProfileError (ttlclient.ProfileError) is a call an app profile does not allow: the profile, the
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
func (e *ProfileError) GRPCStatus() *status.Status { return Status(e.Err, e.Error()) }
