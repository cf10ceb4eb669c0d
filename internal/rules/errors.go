package rules

import "errors"

// The sentinels of bttl's refusals that no lower package (strategy,
// filters, gcrule) declares. ttlclient re-exports them under the same
// names, so errors.Is matches across both packages.
var (
	ErrUnknownFamily           = errors.New("bttl: family not in the table's schema")
	ErrServerAssignedTimestamp = errors.New("bttl: operation lets the server pick the timestamp of a managed family")
	ErrNilMutation             = errors.New("bttl: nil mutation")
	ErrEmptyMutation           = errors.New("bttl: mutation has no operations")
	ErrNestedCondition         = errors.New("bttl: conditional mutations cannot be nested")
	ErrConditionalInBulk       = errors.New("bttl: conditional mutations cannot be applied in bulk")
	ErrEmptyRowKey             = errors.New("bttl: empty row key")
	ErrRowKeyTooLong           = errors.New("bttl: row key over 4 KiB")
	ErrValueTooLarge           = errors.New("bttl: cell value over 100 MiB")
	ErrTooManyMutations        = errors.New("bttl: row mutations over Bigtable's 100000 per request")
	ErrInvalidTimestampRange   = errors.New("bttl: invalid timestamp range")
	// ErrTimestampGranularity: a timestamp bttl would send that is not a
	// whole millisecond (a multiple of 1000 microseconds), which
	// production refuses (docs/design.md#granularity).
	ErrTimestampGranularity = errors.New("bttl: timestamp not a whole millisecond")
	ErrNoAdminClient        = errors.New("bttl: no admin client to verify GC rules")
	ErrTableNotFound        = errors.New("bttl: table not found")
	ErrNotApplicable        = errors.New("bttl: operation does not apply to the family's strategy")
	ErrReservedColumn       = errors.New("bttl: column qualifier reserved for write-time companions")
	ErrNoWriteTime          = errors.New("bttl: no write time recorded for the cell")
	ErrCannotPersist        = errors.New("bttl: the family cannot keep a cell without a TTL")
	ErrCellMoved            = errors.New("bttl: cell moved since it was read, and its value is not unique in its column")
	ErrReadOnlyView         = errors.New("bttl: a materialized view is read-only")
	ErrUnfilteredSQL        = errors.New("bttl: SQL query reads managed families with no TTL filter")
	ErrSQLUnknownTable      = errors.New("bttl: cannot tell which families a SQL query reads")
	// ErrNotDialed: a call that needs bttl's interceptor on the client's
	// connection (Table.API, a read with a RowFilter option) on a client
	// bttl did not dial.
	ErrNotDialed = errors.New("bttl: the client's connection does not carry bttl's interceptor")

	// The server's refusals of an app profile (docs/design.md#app-profiles).
	ErrTransactionsNotAllowed = errors.New("bttl: single-row transactions are not allowed by the app profile")
	ErrReadOnlyProfile        = errors.New("bttl: writes are not allowed by the app profile (Data Boost is read-only)")

	// The wire guard's refusals of whole requests.
	ErrUnclassifiable             = errors.New("bttl: request the wire guard cannot classify")
	ErrSessionDataPlane           = errors.New("bttl: session stream the wire guard cannot inspect")
	ErrUndeclaredMaterializedView = errors.New("bttl: read of an undeclared materialized view")
	ErrSchemaMismatch             = errors.New("bttl: request checked for another schema")
	ErrVerifyProbe                = errors.New("bttl: the wire guard's verify probe")
	ErrGuardNotInstalled          = errors.New("bttl: the wire guard could not be installed")
)
