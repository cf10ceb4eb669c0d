package ttlclient

import (
	"context"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/internal/sqlscan"
)

var (
	// ErrUnfilteredSQL: a SQL query reads a table (or materialized view)
	// with managed families. SQL sends no row filter and GoogleSQL's
	// temporal arguments bound every family of a table alike, so the query
	// would return expired cells GC has not collected yet; see *SQLError
	// for the families, and docs/design.md#sql.
	ErrUnfilteredSQL = rules.ErrUnfilteredSQL
	// ErrSQLUnknownTable: the library cannot tell whether a SQL query reads
	// managed families: it reads a table this client has not opened (so its
	// schema is unknown), or its text could not be classified (a subquery,
	// pipe syntax, a FROM it cannot place, a join, a path, a comment or
	// string left open). See *SQLError.
	ErrSQLUnknownTable = rules.ErrSQLUnknownTable
)

// SQLError is a refused SQL query: the query, the table it reads (empty
// when it could not be found), the managed families at risk (sorted), why
// it could not be classified if it could not, and Err, ErrUnfilteredSQL or
// ErrSQLUnknownTable. It is built beside the SQL classifier.
type SQLError = sqlscan.Error

// WithSQLAllowed lets PrepareStatement send queries that read managed
// families, accepting that they return expired cells GC has not collected
// yet. Given to Wrap (or in ClientConfig.Options) it holds for every query
// of the client; given among PrepareStatement's options, for that query
// only. It is not a TableOption: SQL is prepared by the client.
func WithSQLAllowed() PrepareOption {
	return prepareClientOption(func(cfg *config) { cfg.sqlAllowed = true })
}

// PrepareOption is an option of the client that PrepareStatement also
// takes among its bigtable.PrepareOptions, for one query: WithSQLAllowed
// (a ClientOption only) and WithKeyRedaction (an Option). Other values
// among those options go to the bigtable client as they are.
type PrepareOption interface {
	ClientOption
	applyPrepare(*config)
}

// prepareClientOption is a ClientOption and a PrepareOption.
type prepareClientOption func(*config)

func (o prepareClientOption) applyClient(cfg *config)  { o(cfg) }
func (o prepareClientOption) applyPrepare(cfg *config) { o(cfg) }

// prepareOption is an Option and a PrepareOption.
type prepareOption func(*config)

func (o prepareOption) applyClient(cfg *config)  { o(cfg) }
func (o prepareOption) applyTable(cfg *config)   { o(cfg) }
func (o prepareOption) applyPrepare(cfg *config) { o(cfg) }

// PrepareStatement prepares a SQL query, like
// bigtable.Client.PrepareStatement, after checking what it reads. A query
// has no row filter, so bttl cannot hide expired cells from it: it refuses,
// before any RPC, a query reading a table or materialized view opened
// through this client with a managed family (ErrUnfilteredSQL), and one
// whose table this client has not opened or whose text it cannot classify
// (a subquery, a join, a union, pipe syntax: ErrSQLUnknownTable), both in
// a *SQLError (docs/design.md#sql). Queries over tables of unmanaged
// families only, and queries reading no table, are sent as they are.
// WithSQLAllowed, given to Wrap or among opts, lets every query through.
func (c *Client) PrepareStatement(ctx context.Context, query string, paramTypes map[string]bigtable.SQLType, opts ...bigtable.PrepareOption) (*bigtable.PreparedStatement, error) {
	cfg := c.config(nil)
	rest := make([]bigtable.PrepareOption, 0, len(opts))
	for _, o := range opts {
		if b, ok := o.(PrepareOption); ok {
			b.applyPrepare(&cfg)
			continue
		}
		rest = append(rest, o)
	}
	if !cfg.sqlAllowed {
		if err := c.checkSQL(query, cfg.keyText); err != nil {
			return nil, err
		}
	}
	return c.raw.PrepareStatement(ctx, query, paramTypes, rest...)
}

// checkSQL refuses query unless every table it reads was opened by the
// client and has no managed family.
func (c *Client) checkSQL(query string, text keytext.Text) error {
	if f := c.sql.Check(query); f != nil {
		return f.Refusal(query, text)
	}
	return nil
}
