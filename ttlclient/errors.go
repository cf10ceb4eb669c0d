package ttlclient

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/strategy"
)

// Sentinel errors. Every refusal wraps one of them, or one of the package
// that decides it (the timestamp math's strategy.ErrInvalidTTL and the
// other strategy sentinels, gcrule.ErrMismatch, filters.ErrFilterTooLarge,
// filters.ErrCellTooLargeToPin), in a *CellError, so callers test with
// errors.Is and read the details with errors.As. A refused call sends
// nothing.
var (
	// ErrUnknownFamily: a write to a family the schema does not name.
	ErrUnknownFamily = errors.New("bttl: family not in the table's schema")
	// ErrServerAssignedTimestamp: ReadModifyWrite, AddToCell or MergeToCell
	// on a managed family, where the server picks the timestamp.
	ErrServerAssignedTimestamp = errors.New("bttl: operation lets the server pick the timestamp of a managed family")
	// ErrNilMutation: a nil mutation.
	ErrNilMutation = errors.New("bttl: nil mutation")
	// ErrEmptyMutation: a mutation with no operations.
	ErrEmptyMutation = errors.New("bttl: mutation has no operations")
	// ErrNestedCondition: a conditional mutation inside a conditional one.
	ErrNestedCondition = errors.New("bttl: conditional mutations cannot be nested")
	// ErrConditionalInBulk: a conditional mutation given to ApplyBulk.
	ErrConditionalInBulk = errors.New("bttl: conditional mutations cannot be applied in bulk")
	// ErrEmptyRowKey: an empty row key.
	ErrEmptyRowKey = errors.New("bttl: empty row key")
	// ErrRowKeyTooLong: a row key over 4 KiB.
	ErrRowKeyTooLong = errors.New("bttl: row key over 4 KiB")
	// ErrValueTooLarge: a cell value over 100 MiB.
	ErrValueTooLarge = errors.New("bttl: cell value over 100 MiB")
	// ErrInvalidTimestampRange: a delete range with a negative bound or an
	// end not after its start.
	ErrInvalidTimestampRange = errors.New("bttl: invalid timestamp range")
	// ErrNoAdminClient: Open cannot verify GC rules without an admin client;
	// see *NoAdminError.
	ErrNoAdminClient = errors.New("bttl: no admin client to verify GC rules")
	// ErrTableNotFound: Open's verification found no such table (the admin
	// API's NotFound, wrapped: status.Code still gives NotFound).
	ErrTableNotFound = errors.New("bttl: table not found")
	// ErrUnsupportedReadOption: a read option whose filter the library cannot
	// see, so it could not put the TTL filter first.
	ErrUnsupportedReadOption = errors.New("bttl: unsupported read option")
	// ErrMutationUnreadable: a *bigtable.Mutation or *bigtable.ReadModifyWrite
	// given to Table.API could not be read in full: this client version lays
	// them out differently from the one bttl checks for (every such call then
	// fails), or it holds an operation bttl does not know. Nothing is sent.
	ErrMutationUnreadable = errors.New("bttl: cannot read *bigtable.Mutation")

	// ErrNotApplicable: a lifecycle operation (Expiry, Expire, WriteTime) on a
	// family whose cells do not expire by age: a sequence or unmanaged family.
	ErrNotApplicable = errors.New("bttl: operation does not apply to the family's strategy")
	// ErrReservedColumn: a column whose qualifier starts with 0xFF 0xFF in a
	// family with write-time companions (strategy.WithWriteTime), where such
	// qualifiers hold the companions.
	ErrReservedColumn = errors.New("bttl: column qualifier reserved for write-time companions")
	// ErrNoWriteTime: a cell of a write-time family without its companion:
	// written before the family had strategy.WithWriteTime, past bttl (a raw
	// client), or collected since it was read.
	ErrNoWriteTime = errors.New("bttl: no write time recorded for the cell")
)

// Limits Bigtable enforces, checked before any RPC.
const (
	MaxRowKeyBytes = 4 << 10
	MaxValueBytes  = 100 << 20
)

// CellError is a refused operation: which table, row, family and column,
// and the offending timestamp, TTL or sequence number. Its GRPCStatus
// gives the refusal a gRPC code, so status.Code(err) is InvalidArgument or
// FailedPrecondition as docs/design.md#refusal-status-codes lists per sentinel.
type CellError struct {
	Table     string
	Row       string
	Family    string
	Column    string
	Timestamp bigtable.Timestamp // the caller's timestamp, when one was given
	TTL       time.Duration      // the cell's TTL, when one was given
	Sequence  int64              // the cell's sequence number, when one was given
	Options   []CellOption       // the cell options, when more than one was given
	Err       error              // wraps a sentinel

	// named: the refused operation names Family, so the message names it
	// even when it is "" (an operation on the empty family name).
	named bool
	// text shows Row and Column in the message: quoted and cut, or
	// redacted (WithKeyRedaction).
	text keytext.Text
}

// Error names the row and column as docs/design.md#keys-in-messages says:
// quoted and cut to keytext.Limit bytes, or redacted with WithKeyRedaction
// (the fields keep the full values).
func (e *CellError) Error() string {
	var b strings.Builder
	b.WriteString(e.text.Scrub(e.Err.Error(), e.Row, e.Column))
	fmt.Fprintf(&b, " (table %q", e.Table)
	if e.Row != "" {
		b.WriteString(", row " + e.text.Key(e.Row))
	}
	if e.Family != "" || e.named {
		fmt.Fprintf(&b, ", family %q", e.Family)
	}
	if e.Column != "" {
		b.WriteString(", column " + e.text.Key(e.Column))
	}
	switch e.Timestamp {
	case 0:
	case Auto: // bigtable.ServerTime, -1: not a timestamp to print as one
		b.WriteString(", timestamp ttlclient.Auto")
	default:
		fmt.Fprintf(&b, ", timestamp %d", e.Timestamp)
	}
	if e.TTL != 0 {
		fmt.Fprintf(&b, ", ttl %s", e.TTL)
	}
	if e.Sequence != 0 {
		fmt.Fprintf(&b, ", sequence %d", e.Sequence)
	}
	if len(e.Options) > 0 {
		fmt.Fprintf(&b, ", options %v", e.Options)
	}
	b.WriteString(")")
	return b.String()
}

func (e *CellError) Unwrap() error { return e.Err }

// GRPCStatus is the refusal's gRPC status: the code of its sentinel (see
// StatusCode), its message, and an ErrorInfo detail (domain
// "github.com/bttl/bttl") whose reason is RefusalReason's. It makes status.Code and status.FromError see a
// refusal as they see a server's error.
func (e *CellError) GRPCStatus() *status.Status { return refusalStatus(e.Err, e.Error()) }

// NoAdminError: Open was asked to verify GC rules without an admin client.
type NoAdminError struct {
	Table string
}

func (e *NoAdminError) Error() string {
	return fmt.Sprintf("%v for table %q: pass ttlclient.WithAdminClient(adminClient, project, instance) to Wrap or Open, "+
		"or ttlclient.WithoutVerify() to skip the check (callers without admin permission)", ErrNoAdminClient, e.Table)
}

func (e *NoAdminError) Unwrap() error { return ErrNoAdminClient }

func (e *NoAdminError) GRPCStatus() *status.Status { return refusalStatus(ErrNoAdminClient, e.Error()) }

func (e *SQLError) GRPCStatus() *status.Status { return refusalStatus(e.Err, e.Error()) }

// statusCodes is the gRPC code of each sentinel's refusals: InvalidArgument
// when the call itself is malformed or out of range whatever the table
// holds; FailedPrecondition when the call is well formed but the schema, a
// family's strategy, the clock, the client's setup or the stored data rule
// it out; Aborted when a cell the call read changed since, so the caller
// reads again and retries (ErrCellMoved).
// docs/design.md#refusal-status-codes has the same table.
var statusCodes = []struct {
	err  error
	code codes.Code
}{
	{strategy.ErrInvalidPolicy, codes.InvalidArgument},
	{strategy.ErrUnsupportedGCRule, codes.InvalidArgument},
	{strategy.ErrInvalidTTL, codes.InvalidArgument},
	{strategy.ErrTimestampOverflow, codes.InvalidArgument},
	{strategy.ErrBeforeEpoch, codes.InvalidArgument},
	{strategy.ErrInvalidSequence, codes.InvalidArgument},
	{strategy.ErrWrongCellOption, codes.InvalidArgument},
	{strategy.ErrTTLTooLong, codes.InvalidArgument},
	{ErrReservedColumn, codes.InvalidArgument},
	{ErrNilMutation, codes.InvalidArgument},
	{ErrEmptyMutation, codes.InvalidArgument},
	{ErrNestedCondition, codes.InvalidArgument},
	{ErrConditionalInBulk, codes.InvalidArgument},
	{ErrEmptyRowKey, codes.InvalidArgument},
	{ErrRowKeyTooLong, codes.InvalidArgument},
	{ErrValueTooLarge, codes.InvalidArgument},
	{ErrInvalidTimestampRange, codes.InvalidArgument},
	{ErrUnsupportedReadOption, codes.InvalidArgument},
	{filters.ErrFilterTooLarge, codes.InvalidArgument},

	{strategy.ErrServerTimestamp, codes.FailedPrecondition},
	{strategy.ErrAlreadyExpired, codes.FailedPrecondition},
	{ErrUnknownFamily, codes.FailedPrecondition},
	{ErrServerAssignedTimestamp, codes.FailedPrecondition},
	{gcrule.ErrMismatch, codes.FailedPrecondition},
	{ErrNoAdminClient, codes.FailedPrecondition},
	{ErrTableNotFound, codes.NotFound},
	{ErrMutationUnreadable, codes.FailedPrecondition},
	{ErrNotApplicable, codes.FailedPrecondition},
	{filters.ErrCellTooLargeToPin, codes.FailedPrecondition},
	{ErrNoWriteTime, codes.FailedPrecondition},
	{ErrReadOnlyView, codes.FailedPrecondition},
	{ErrUnfilteredSQL, codes.FailedPrecondition},
	{ErrSQLUnknownTable, codes.FailedPrecondition},

	// The cell a call read changed since: read it again and retry.
	{ErrCellMoved, codes.Aborted},
}

// StatusCode is the gRPC code of a refusal wrapping err's sentinel (see
// statusCodes), codes.Unknown when err wraps none.
func StatusCode(err error) codes.Code {
	for _, s := range statusCodes {
		if errors.Is(err, s.err) {
			return s.code
		}
	}
	return codes.Unknown
}

// refusalStatus is the status of a refusal whose cause is err and whose
// message is msg. A cause that carries a gRPC status itself (a server's
// error in a *CellError about a cell that was read) keeps its code.
func refusalStatus(err error, msg string) *status.Status {
	var inner interface{ GRPCStatus() *status.Status }
	if errors.As(err, &inner) {
		if st := inner.GRPCStatus(); st != nil {
			p := st.Proto()
			p.Message = msg
			return status.FromProto(p)
		}
	}
	code := StatusCode(err)
	st := status.New(code, msg)
	if code == codes.Unknown {
		return st // not a refusal (a failed Open's own error, say): no reason to give
	}
	if d, e := st.WithDetails(&errdetails.ErrorInfo{Reason: RefusalReason(err), Domain: "github.com/bttl/bttl"}); e == nil {
		st = d
	}
	return st
}

// codedError gives a refusal that is not a *CellError (a refused Open, an
// unreadable read option) its sentinel's gRPC status; its message and
// chain are err's.
type codedError struct{ err error }

func (e *codedError) Error() string              { return e.err.Error() }
func (e *codedError) Unwrap() error              { return e.err }
func (e *codedError) GRPCStatus() *status.Status { return refusalStatus(e.err, e.err.Error()) }
