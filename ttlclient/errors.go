package ttlclient

import (
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/rules"
)

// Sentinel errors. Every refusal wraps one of them, or one of the package
// that decides it (the timestamp math's strategy.ErrInvalidTTL and the
// other strategy sentinels, gcrule.ErrMismatch, filters.ErrFilterTooLarge,
// filters.ErrCellTooLargeToPin), in a *CellError, so callers test with
// errors.Is and read the details with errors.As. A refused call sends
// nothing.
var (
	// ErrUnknownFamily: a write to a family the schema does not name.
	ErrUnknownFamily = rules.ErrUnknownFamily
	// ErrServerAssignedTimestamp: ReadModifyWrite, AddToCell or MergeToCell
	// on a managed family, where the server picks the timestamp.
	ErrServerAssignedTimestamp = rules.ErrServerAssignedTimestamp
	// ErrNilMutation: a nil mutation.
	ErrNilMutation = rules.ErrNilMutation
	// ErrEmptyMutation: a mutation with no operations.
	ErrEmptyMutation = rules.ErrEmptyMutation
	// ErrNestedCondition: a conditional mutation inside a conditional one.
	ErrNestedCondition = rules.ErrNestedCondition
	// ErrConditionalInBulk: a conditional mutation given to ApplyBulk.
	ErrConditionalInBulk = rules.ErrConditionalInBulk
	// ErrEmptyRowKey: an empty row key.
	ErrEmptyRowKey = rules.ErrEmptyRowKey
	// ErrRowKeyTooLong: a row key over 4 KiB.
	ErrRowKeyTooLong = rules.ErrRowKeyTooLong
	// ErrValueTooLarge: a cell value over 100 MiB.
	ErrValueTooLarge = rules.ErrValueTooLarge
	// ErrTooManyMutations: a row over Bigtable's 100,000 mutations per
	// request once its family rules added their mutations (single-value
	// deletes, write-time companions).
	ErrTooManyMutations = rules.ErrTooManyMutations
	// ErrInvalidTimestampRange: a delete range with a negative bound or an
	// end not after its start.
	ErrInvalidTimestampRange = rules.ErrInvalidTimestampRange
	// ErrTimestampGranularity: a delete range bound (or, through the wire
	// guard, a cell timestamp or a read filter's timestamp range) that is
	// not a whole millisecond, which Bigtable refuses.
	ErrTimestampGranularity = rules.ErrTimestampGranularity
	// ErrNoAdminClient: Open cannot verify GC rules without an admin client;
	// see *NoAdminError.
	ErrNoAdminClient = rules.ErrNoAdminClient
	// ErrTableNotFound: Open's verification found no such table (the admin
	// API's NotFound, wrapped: status.Code still gives NotFound).
	ErrTableNotFound = rules.ErrTableNotFound
	// ErrNotDialed: a call that needs bttl's interceptor on the client's
	// connection (Table.API's writes, a read with options of a table with
	// managed families) on a client whose connection does not carry it;
	// see Wrap and ClientOptions.
	ErrNotDialed = rules.ErrNotDialed

	// ErrNotApplicable: a lifecycle operation (Expiry, Expire, WriteTime) on a
	// family whose cells do not expire by age: a sequence or unmanaged family.
	ErrNotApplicable = rules.ErrNotApplicable
	// ErrReservedColumn: a column whose qualifier starts with 0xFF 0xFF in a
	// family with write-time companions (strategy.WithWriteTime), where such
	// qualifiers hold the companions.
	ErrReservedColumn = rules.ErrReservedColumn
	// ErrNoWriteTime: a cell of a write-time family without its companion:
	// written before the family had strategy.WithWriteTime, past bttl (a raw
	// client), or collected since it was read.
	ErrNoWriteTime = rules.ErrNoWriteTime
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
	case bigtable.ServerTime: // -1: not a timestamp to print as one
		b.WriteString(", timestamp bigtable.ServerTime")
	default:
		fmt.Fprintf(&b, ", timestamp %d", e.Timestamp)
	}
	if e.TTL != 0 {
		fmt.Fprintf(&b, ", ttl %s", e.TTL)
	}
	if e.Sequence != 0 {
		fmt.Fprintf(&b, ", sequence %d", e.Sequence)
	}
	b.WriteString(")")
	return b.String()
}

func (e *CellError) Unwrap() error { return e.Err }

// GRPCStatus is the refusal's gRPC status: the code of its sentinel (see
// StatusCode), its message, and an ErrorInfo detail (domain
// "github.com/bttl/bttl") whose reason is RefusalReason's. It makes status.Code and status.FromError see a
// refusal as they see a server's error.
func (e *CellError) GRPCStatus() *status.Status { return rules.Status(e.Err, e.Error()) }

// NoAdminError: Open was asked to verify GC rules without an admin client.
type NoAdminError struct {
	Table string
}

func (e *NoAdminError) Error() string {
	return fmt.Sprintf("%v for table %q: pass ttlclient.WithAdminClient(adminClient, project, instance) to Wrap or Open, "+
		"or ttlclient.WithoutVerify() to skip the check (callers without admin permission)", ErrNoAdminClient, e.Table)
}

func (e *NoAdminError) Unwrap() error { return ErrNoAdminClient }

func (e *NoAdminError) GRPCStatus() *status.Status { return rules.Status(ErrNoAdminClient, e.Error()) }

// StatusCode is the gRPC code of a refusal wrapping err's sentinel, from
// bttl's refusal registry (docs/design.md#refusal-status-codes):
// codes.Unknown when err wraps none.
func StatusCode(err error) codes.Code { return rules.Code(err) }

// codedError gives a refusal that is not a *CellError (a refused Open, an
// unreadable read option) its sentinel's gRPC status; its message and
// chain are err's.
type codedError struct{ err error }

func (e *codedError) Error() string              { return e.err.Error() }
func (e *codedError) Unwrap() error              { return e.err }
func (e *codedError) GRPCStatus() *status.Status { return rules.Status(e.err, e.err.Error()) }
