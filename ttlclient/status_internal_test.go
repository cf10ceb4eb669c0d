package ttlclient

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// sentinelsByName is every sentinel a refusal of the package wraps: its
// own, and those of strategy, gcrule and filters, by name, for the tests
// that go through all of them.
var sentinelsByName = map[string]error{
	"ErrInvalidPolicy": strategy.ErrInvalidPolicy, "ErrUnsupportedGCRule": strategy.ErrUnsupportedGCRule, "ErrInvalidTTL": strategy.ErrInvalidTTL,
	"ErrTimestampOverflow": strategy.ErrTimestampOverflow, "ErrBeforeEpoch": strategy.ErrBeforeEpoch, "ErrInvalidSequence": strategy.ErrInvalidSequence,
	"ErrServerTimestamp": strategy.ErrServerTimestamp, "ErrAlreadyExpired": strategy.ErrAlreadyExpired, "ErrWrongCellOption": strategy.ErrWrongCellOption,
	"ErrUnknownFamily": ErrUnknownFamily, "ErrServerAssignedTimestamp": ErrServerAssignedTimestamp, "ErrNilMutation": ErrNilMutation,
	"ErrEmptyMutation": ErrEmptyMutation, "ErrNestedCondition": ErrNestedCondition, "ErrConditionalInBulk": ErrConditionalInBulk,
	"ErrEmptyRowKey": ErrEmptyRowKey, "ErrRowKeyTooLong": ErrRowKeyTooLong, "ErrValueTooLarge": ErrValueTooLarge, "ErrTooManyMutations": ErrTooManyMutations,
	"ErrTimestampGranularity":  ErrTimestampGranularity,
	"ErrInvalidTimestampRange": ErrInvalidTimestampRange,
	"ErrMismatch":              gcrule.ErrMismatch, "ErrNoAdminClient": ErrNoAdminClient, "ErrTableNotFound": ErrTableNotFound,
	"ErrFilterTooLarge": filters.ErrFilterTooLarge, "ErrNotDialed": ErrNotDialed,
	"ErrTTLTooLong": strategy.ErrTTLTooLong, "ErrNotApplicable": ErrNotApplicable, "ErrReservedColumn": ErrReservedColumn,
	"ErrCellTooLargeToPin": filters.ErrCellTooLargeToPin, "ErrNoWriteTime": ErrNoWriteTime,
	"ErrReadOnlyView": ErrReadOnlyView, "ErrUnfilteredSQL": ErrUnfilteredSQL, "ErrSQLUnknownTable": ErrSQLUnknownTable,
	"ErrCellMoved": ErrCellMoved, "ErrCannotPersist": ErrCannotPersist, "ErrTransactionsNotAllowed": ErrTransactionsNotAllowed, "ErrReadOnlyProfile": ErrReadOnlyProfile,
}

// documentedCodes is the gRPC code table of docs/design.md#refusal-status-codes, by
// sentinel name.
func documentedCodes(t *testing.T) map[string]codes.Code {
	t.Helper()
	doc, err := os.ReadFile("../docs/design.md")
	require.NoError(t, err)
	row := regexp.MustCompile("(?m)^\\| `(?:[a-z]+\\.)?(Err[A-Za-z]+)` \\| `(InvalidArgument|FailedPrecondition|NotFound|Aborted)` \\|")
	out := map[string]codes.Code{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		c := map[string]codes.Code{"InvalidArgument": codes.InvalidArgument, "FailedPrecondition": codes.FailedPrecondition, "NotFound": codes.NotFound, "Aborted": codes.Aborted}[m[2]]
		_, dup := out[m[1]]
		require.False(t, dup, "%s twice in the table", m[1])
		out[m[1]] = c
	}
	return out
}

// A refusal carried no gRPC status (status.Code gave Unknown). Every sentinel
// of the package (errors.go, sql.go, views.go and the strategy sentinels it
// re-exports) gets the code the table of docs/design.md#refusal-status-codes
// gives it, through a *CellError, wrapped further, and the chain still answers
// errors.Is and errors.As (issue 28).
func TestEverySentinelHasItsStatusCode(t *testing.T) {
	doc := documentedCodes(t)
	names := packageSentinelNames(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			sentinel, ok := sentinelsByName[name]
			require.True(t, ok, "sentinel %s is not in sentinelsByName: add it, and its code to statusCodes and docs/design.md#refusal-status-codes", name)
			want, ok := doc[name]
			require.True(t, ok, "sentinel %s has no row in the table of docs/design.md#refusal-status-codes", name)
			assert.Equal(t, want, StatusCode(sentinel))

			ce := &CellError{Table: "t", Row: "r", Family: "f", Err: fmt.Errorf("%w: detail", sentinel)}
			assert.Equal(t, want, status.Code(ce))
			st, ok := status.FromError(ce)
			require.True(t, ok)
			assert.Equal(t, ce.Error(), st.Message())
			if assert.Len(t, st.Details(), 1) {
				info, ok := st.Details()[0].(*errdetails.ErrorInfo)
				require.True(t, ok, "%T", st.Details()[0])
				assert.Equal(t, RefusalReason(sentinel), info.GetReason())
				assert.Equal(t, "github.com/bttl/bttl", info.GetDomain())
			}

			// Wrapped further, as Open and callers wrap: the code stays,
			// the message is the whole text, errors.Is/As still see through.
			wrapped := fmt.Errorf("save order: %w", ce)
			st, ok = status.FromError(wrapped)
			require.True(t, ok)
			assert.Equal(t, want, st.Code())
			assert.Equal(t, wrapped.Error(), st.Message())
			assert.ErrorIs(t, wrapped, sentinel)
			var got *CellError
			require.ErrorAs(t, wrapped, &got)
			assert.Same(t, ce, got)
		})
	}
	assert.Equal(t, codes.Unknown, StatusCode(errors.New("not a refusal")))
}

// A *CellError whose cause carries a status (a server's error) keeps the
// server's code rather than claiming a refusal's.
func TestCellErrorKeepsItsCauseStatus(t *testing.T) {
	cause := status.Error(codes.Unavailable, "server went away")
	ce := &CellError{Table: "t", Row: "r", Family: "f", Err: fmt.Errorf("read cell: %w", cause)}
	st, ok := status.FromError(ce)
	require.True(t, ok)
	assert.Equal(t, codes.Unavailable, st.Code())
	assert.Equal(t, ce.Error(), st.Message())
}
