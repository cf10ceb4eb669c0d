package rules

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// Reason is one row of the refusal registry: every vocabulary a refusal is
// known by. ttlclient's errors carry Err (errors.Is), Code (status.Code)
// and an ErrorInfo detail with Info; the refusal counter
// (bttl_refusals_total) labels it Metric on every path, ttlclient's and the
// wire guard's alike; the guard's status names Rule; Anchor is the section
// of docs/design.md that explains it.
type Reason struct {
	Err    error
	Code   codes.Code
	Info   string // google.rpc.ErrorInfo reason (domain ErrorDomain)
	Metric string // bttl_refusals_total's reason label
	Rule   string // the wire guard's rule name, in its status and PreconditionFailure
	Anchor string // the anchor of its section in docs/design.md
}

// ErrorDomain is the domain of the ErrorInfo detail of bttl's refusals.
const ErrorDomain = "github.com/bttl/bttl"

func row(err error, code codes.Code, metric, rule, anchor string) Reason {
	return Reason{Err: err, Code: code, Info: metric, Metric: metric, Rule: rule, Anchor: anchor}
}

const (
	inv  = codes.InvalidArgument
	pre  = codes.FailedPrecondition
	anch = "guardrails"
)

// Registry is every refusal bttl makes, one row each; the table of
// docs/design.md#refusal-status-codes is checked against it. Its order is
// the docs table's. One event has one row whichever path refuses it: a
// cell expired on arrival is already_expired from the client and from the
// guard.
var Registry = []Reason{
	row(strategy.ErrInvalidPolicy, inv, "invalid_policy", "invalid-policy", "strategies"),
	row(strategy.ErrUnsupportedGCRule, inv, "unsupported_gc_rule", "unsupported-gc-rule", "verification"),
	row(strategy.ErrInvalidTTL, inv, "invalid_ttl", "invalid-ttl", anch),
	row(strategy.ErrTimestampOverflow, inv, "timestamp_overflow", "timestamp-overflow", anch),
	row(strategy.ErrBeforeEpoch, inv, "before_epoch", "before-epoch", anch),
	row(strategy.ErrInvalidSequence, inv, "invalid_sequence", "invalid-sequence", "sequence"),
	row(strategy.ErrWrongCellOption, inv, "wrong_cell_option", "wrong-cell-option", anch),
	row(strategy.ErrTTLTooLong, inv, "ttl_too_long", "ttl-too-long", "ttl-cap"),
	row(ErrReservedColumn, inv, "reserved_column", "reserved-column", "write-time"),
	row(ErrNilMutation, inv, "nil_mutation", "nil-mutation", anch),
	row(ErrEmptyMutation, inv, "empty_mutation", "empty-mutation", anch),
	row(ErrNestedCondition, inv, "nested_condition", "nested-condition", anch),
	row(ErrConditionalInBulk, inv, "conditional_in_bulk", "conditional-in-bulk", anch),
	row(ErrEmptyRowKey, inv, "empty_row_key", "empty-row-key", anch),
	row(ErrRowKeyTooLong, inv, "row_key_too_long", "row-key-too-long", anch),
	row(ErrValueTooLarge, inv, "value_too_large", "value-too-large", anch),
	row(ErrTooManyMutations, inv, "too_many_mutations", "too-many-mutations", anch),
	row(ErrInvalidTimestampRange, inv, "invalid_timestamp_range", "invalid-timestamp-range", anch),
	row(ErrTimestampGranularity, inv, "timestamp_granularity", "timestamp-granularity", "granularity"),
	row(filters.ErrFilterTooLarge, inv, "filter_too_large", "filter-too-large", "read-filters"),
	row(strategy.ErrServerTimestamp, pre, "server_timestamp", "server-timestamp", anch),
	row(strategy.ErrAlreadyExpired, pre, "already_expired", "expired-on-arrival", anch),
	row(ErrUnknownFamily, pre, "unknown_family", "unknown-family", "unlisted-families"),
	row(ErrServerAssignedTimestamp, pre, "server_assigned_timestamp", "server-assigned-timestamp", anch),
	row(gcrule.ErrMismatch, pre, "gc_rule_mismatch", "gc-rule-mismatch", "verification"),
	row(ErrNoAdminClient, pre, "no_admin_client", "no-admin-client", "verification"),
	row(ErrTableNotFound, codes.NotFound, "table_not_found", "table-not-found", "verification"),
	row(ErrNotDialed, pre, "not_dialed", "not-dialed", "tableapi"),
	row(ErrNotApplicable, pre, "not_applicable", "not-applicable", "lifecycle"),
	row(filters.ErrCellTooLargeToPin, pre, "cell_too_large_to_pin", "cell-too-large-to-pin", "lifecycle"),
	row(ErrNoWriteTime, pre, "no_write_time", "no-write-time", "write-time"),
	row(ErrCannotPersist, pre, "cannot_persist", "cannot-persist", "persist"),
	row(ErrReadOnlyView, pre, "read_only_view", "read-only-view", "views"),
	row(ErrUnfilteredSQL, pre, "unfiltered_sql", "sql-query", "sql"),
	row(ErrSQLUnknownTable, pre, "sql_unknown_table", "sql-unknown-table", "sql"),
	row(ErrUnclassifiable, pre, "unclassifiable_request", "unclassifiable-request", "wire-guard"),
	row(ErrSessionDataPlane, pre, "session_data_plane", "session-data-plane", "wire-guard"),
	row(ErrUndeclaredMaterializedView, pre, "undeclared_materialized_view", "undeclared-materialized-view", "wire-guard"),
	row(ErrSchemaMismatch, pre, "schema_mismatch", "schema-mismatch", "wire-guard"),
	row(ErrVerifyProbe, pre, "verify_probe", "verify-probe", "wire-guard-install"),
	row(ErrGuardNotInstalled, pre, "guard_not_installed", "guard-not-installed", "wire-guard-install"),
	// The server refused the app profile: use one that allows the call.
	row(ErrTransactionsNotAllowed, pre, "transactions_not_allowed", "transactions-not-allowed", "app-profiles"),
	row(ErrReadOnlyProfile, pre, "read_only_profile", "read-only-profile", "app-profiles"),
	// The cell a call read changed since: read it again and retry.
	row(ErrCellMoved, codes.Aborted, "cell_moved", "cell-moved", "expire"),
}

// Of is the row of the sentinel err wraps, nil when it wraps none. When
// err wraps several, the first row of the registry wins.
func Of(err error) *Reason {
	if err == nil {
		return nil
	}
	for i := range Registry {
		if errors.Is(err, Registry[i].Err) {
			return &Registry[i]
		}
	}
	return nil
}

// ByRule is the row whose guard rule is rule, nil for none.
func ByRule(rule string) *Reason {
	for i := range Registry {
		if Registry[i].Rule == rule {
			return &Registry[i]
		}
	}
	return nil
}

// Metric is err's metric reason, "other" when it wraps no sentinel.
func Metric(err error) string {
	if r := Of(err); r != nil {
		return r.Metric
	}
	return "other"
}

// Code is err's gRPC code, codes.Unknown when it wraps no sentinel.
func Code(err error) codes.Code {
	if r := Of(err); r != nil {
		return r.Code
	}
	return codes.Unknown
}

// Status is the gRPC status of a refusal whose cause is err and whose
// message is msg. A cause that carries a gRPC status itself (a server's
// error in a *CellError about a cell that was read) keeps its code.
func Status(err error, msg string) *status.Status {
	var inner interface{ GRPCStatus() *status.Status }
	if errors.As(err, &inner) {
		if st := inner.GRPCStatus(); st != nil {
			p := st.Proto()
			p.Message = msg
			return status.FromProto(p)
		}
	}
	code := Code(err)
	st := status.New(code, msg)
	if code == codes.Unknown {
		return st // not a refusal (a failed Open's own error, say): no reason to give
	}
	if d, e := st.WithDetails(&errdetails.ErrorInfo{Reason: Of(err).Info, Domain: ErrorDomain}); e == nil {
		st = d
	}
	return st
}
