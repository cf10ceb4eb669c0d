package ttlclient

import (
	"context"
	"errors"
	"fmt"
	"github.com/bttl/bttl/internal/rules"
	"sort"
	"strings"
	"sync"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/keytext"
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
// when it could not be found), the managed families at risk, and why.
type SQLError struct {
	Query    string
	Table    string
	Families []string // the table's managed families, sorted
	Reason   string   // why the query could not be classified, if it could not
	Err      error    // ErrUnfilteredSQL or ErrSQLUnknownTable

	text keytext.Text // shows Query: quoted and cut, or redacted (WithKeyRedaction)
}

func (e *SQLError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	if e.Table != "" {
		fmt.Fprintf(&b, " (table %q", e.Table)
	} else {
		b.WriteString(" (")
	}
	if len(e.Families) > 0 {
		fmt.Fprintf(&b, ", managed families %q", e.Families)
	}
	if e.Reason != "" {
		if e.Table != "" {
			b.WriteString(", ")
		}
		if e.text.Redacts() && e.Table == "" {
			// A parse failure's reason may quote a token of the query: a
			// literal holding a key.
			b.WriteString("the query could not be classified (the reason, which may quote it, is in SQLError.Reason)")
		} else {
			b.WriteString(e.Reason)
		}
	}
	b.WriteString(", query " + e.text.KeyN(e.Query, 80) + ")")
	b.WriteString(": read with ReadRows, or pass ttlclient.WithSQLAllowed() to accept expired cells")
	return b.String()
}

func (e *SQLError) Unwrap() error { return e.Err }

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
// (ErrSQLUnknownTable), both in a *SQLError. Queries over tables of
// unmanaged families only, and queries reading no table, are sent as they
// are. WithSQLAllowed, given to Wrap or among opts, lets every query
// through. The returned statement is the client's own: bind and execute it
// as usual.
//
// The check reads the query's FROM clause. It accepts one SELECT statement
// reading at most one table, and places every FROM keyword of the query
// (the FROM clause, EXTRACT's, IS DISTINCT FROM's): a query with a FROM it
// cannot place (a subquery starting with FROM, as pipe syntax allows), a
// subquery, a join, a union or pipe syntax is refused as unclassifiable. A
// table opened with only unmanaged families, even one opened just for
// this, is untouched.
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
		if err := c.sql.check(query, cfg.keyText); err != nil {
			return nil, err
		}
	}
	return c.raw.PrepareStatement(ctx, query, paramTypes, rest...)
}

// sqlSchemas remembers the managed families of every table and view the
// client opened. A name opened twice with different schemas keeps every
// family either managed.
type sqlSchemas struct {
	mu      sync.RWMutex
	managed map[string]map[string]bool
}

func (s *sqlSchemas) remember(name string, schema Schema) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.managed == nil {
		s.managed = make(map[string]map[string]bool)
	}
	fams := s.managed[name]
	if fams == nil {
		fams = make(map[string]bool)
		s.managed[name] = fams
	}
	for fam, p := range schema {
		if p.Managed() {
			fams[fam] = true
		}
	}
}

// check refuses query unless every table it reads is known and has no
// managed family.
func (s *sqlSchemas) check(query string, text keytext.Text) error {
	tables, err := sqlTables(query)
	if err != nil {
		return &SQLError{Query: query, Reason: err.Error(), Err: ErrSQLUnknownTable, text: text}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, table := range tables {
		fams, ok := s.managed[table]
		if !ok {
			return &SQLError{Query: query, Table: table, Err: ErrSQLUnknownTable,
				Reason: "its schema is unknown: this client has not opened it", text: text}
		}
		if len(fams) > 0 {
			names := make([]string, 0, len(fams))
			for fam := range fams {
				names = append(names, fam)
			}
			sort.Strings(names)
			return &SQLError{Query: query, Table: table, Families: names, Err: ErrUnfilteredSQL, text: text}
		}
	}
	return nil
}

// sqlToken is one token of a GoogleSQL query: an identifier (quoted with
// backquotes or not), a literal, or one punctuation character.
type sqlToken struct {
	text   string // an identifier's name, unquoted; a punctuation character
	ident  bool
	quoted bool
}

func (t sqlToken) keyword(k string) bool { return t.ident && !t.quoted && strings.EqualFold(t.text, k) }

// punct reports whether t is the punctuation character p.
func (t sqlToken) punct(p string) bool { return !t.ident && t.text == p }

// sqlTokens splits query into tokens, skipping comments and the contents
// of string and bytes literals.
func sqlTokens(query string) ([]sqlToken, error) {
	var out []sqlToken
	for i := 0; i < len(query); {
		c := query[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#' || c == '-' && strings.HasPrefix(query[i:], "--"):
			// GoogleSQL ends a line comment at a carriage return too:
			// "--\rFROM t" reads t.
			for i < len(query) && query[i] != '\n' && query[i] != '\r' {
				i++
			}
		case c == '/' && strings.HasPrefix(query[i:], "/*"):
			end := strings.Index(query[i+2:], "*/")
			if end < 0 {
				return nil, errors.New("unterminated comment")
			}
			i += 2 + end + 2
		case c == '\'' || c == '"' || c == '`':
			quote := string(c)
			if c != '`' && strings.HasPrefix(query[i:], quote+quote+quote) {
				quote = quote + quote + quote
			}
			j := i + len(quote)
			var b strings.Builder
			for ; ; j++ {
				if j >= len(query) {
					return nil, fmt.Errorf("unterminated %s", quote)
				}
				if query[j] == '\\' && j+1 < len(query) {
					j++
					b.WriteByte(query[j])
					continue
				}
				if strings.HasPrefix(query[j:], quote) {
					break
				}
				b.WriteByte(query[j])
			}
			if c == '`' {
				out = append(out, sqlToken{text: b.String(), ident: true, quoted: true})
			} else {
				out = append(out, sqlToken{text: "'"})
			}
			i = j + len(quote)
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			j := i + 1
			for j < len(query) && (query[j] == '_' || 'a' <= query[j] && query[j] <= 'z' || 'A' <= query[j] && query[j] <= 'Z' || '0' <= query[j] && query[j] <= '9') {
				j++
			}
			out = append(out, sqlToken{text: query[i:j], ident: true})
			i = j
		default:
			out = append(out, sqlToken{text: query[i : i+1]})
			i++
		}
	}
	return out, nil
}

// sqlFollowers may follow a query's FROM item: anything else (a join, a
// second table, a path) makes the query unclassifiable.
var sqlFollowers = []string{"WHERE", "GROUP", "ORDER", "LIMIT", "HAVING", "QUALIFY", "WINDOW", "OFFSET"}

// sqlNotAlias are keywords that, after a FROM item, are not its alias.
var sqlNotAlias = []string{"JOIN", "CROSS", "INNER", "LEFT", "RIGHT", "FULL", "OUTER", "NATURAL",
	"UNION", "INTERSECT", "EXCEPT", "ON", "USING", "TABLESAMPLE", "UNNEST", "WITH", "FOR", "PIVOT", "UNPIVOT", "SELECT"}

func isKeyword(t sqlToken, set []string) bool {
	for _, k := range set {
		if t.keyword(k) {
			return true
		}
	}
	return false
}

// sqlTables is the tables query reads: none, or the table of its one FROM
// clause. It refuses what it cannot classify rather than guess, and does
// so structurally: the query must be one statement starting with SELECT,
// and every FROM keyword in it must be placed, as
//   - the FROM clause of that SELECT (outside parentheses, the first such
//     FROM), whose item sqlFromItem reads as a table; or
//   - the FROM of EXTRACT(part FROM x) or EXTRACT(part(arg) FROM x); or
//   - the FROM of x IS [NOT] DISTINCT FROM y.
//
// Any other FROM (a subquery starting with FROM: EXISTS(FROM t),
// ARRAY(FROM t), (FROM t); a second FROM clause) is refused, as are a
// second SELECT anywhere (a subquery, a union), a query not starting with
// SELECT (WITH, pipe syntax starting with FROM), pipe operators (|>), a
// TABLE argument, JOIN anywhere, and a second statement. GoogleSQL's
// other ways to read a table (comma joins, paths) follow a FROM clause,
// where sqlFromItem refuses them.
func sqlTables(query string) ([]string, error) {
	toks, err := sqlTokens(query)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 || !toks[0].keyword("SELECT") {
		first := ""
		if len(toks) > 0 {
			first = toks[0].text
		}
		return nil, fmt.Errorf("the query does not start with SELECT but %q (a WITH clause, pipe syntax, or another form)", first)
	}
	depth, from := 0, -1 // from: the index of the SELECT's FROM clause
	for i := 1; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.punct("("):
			depth++
		case t.punct(")"):
			depth--
			if depth < 0 {
				return nil, errors.New("unbalanced parentheses")
			}
		case t.punct(";") && i < len(toks)-1:
			return nil, errors.New("more than one statement")
		case t.punct("|") && i+1 < len(toks) && toks[i+1].punct(">"):
			// A pipe operator can read a table with no FROM before it
			// ("SELECT 1 |> JOIN t ON TRUE").
			return nil, errors.New("pipe syntax (|>)")
		case t.keyword("SELECT"):
			return nil, errors.New("a subquery (a second SELECT)")
		case t.keyword("TABLE"):
			return nil, errors.New("a TABLE argument")
		case t.keyword("JOIN"):
			return nil, errors.New("a join")
		case t.keyword("FROM"):
			switch {
			case sqlExtractFrom(toks, i), sqlDistinctFrom(toks, i):
			case depth == 0 && from < 0:
				from = i
			default:
				return nil, fmt.Errorf("a FROM it cannot place (FROM %s): a subquery starting with FROM, pipe syntax, or a second FROM clause", sqlNext(toks, i))
			}
		}
	}
	if depth != 0 {
		return nil, errors.New("unbalanced parentheses")
	}
	if from < 0 {
		return nil, nil
	}
	table, _, err := sqlFromItem(toks, from+1)
	if err != nil {
		return nil, err
	}
	return []string{table}, nil
}

// sqlExtractFrom reports whether toks[i], a FROM, is EXTRACT's:
// EXTRACT ( part FROM, or EXTRACT ( part ( arg ) FROM.
func sqlExtractFrom(toks []sqlToken, i int) bool {
	at := func(j int) sqlToken {
		if j < 0 {
			return sqlToken{}
		}
		return toks[j]
	}
	part := func(j int) bool { return at(j).ident && !at(j).quoted }
	return part(i-1) && at(i-2).punct("(") && at(i-3).keyword("EXTRACT") ||
		at(i-1).punct(")") && part(i-2) && at(i-3).punct("(") && part(i-4) && at(i-5).punct("(") && at(i-6).keyword("EXTRACT")
}

// sqlDistinctFrom reports whether toks[i], a FROM, ends IS [NOT] DISTINCT
// FROM, a comparison.
func sqlDistinctFrom(toks []sqlToken, i int) bool {
	return i >= 2 && toks[i-1].keyword("DISTINCT") &&
		(toks[i-2].keyword("IS") || i >= 3 && toks[i-2].keyword("NOT") && toks[i-3].keyword("IS"))
}

// sqlNext is the text of the token after toks[i], for messages.
func sqlNext(toks []sqlToken, i int) string {
	if i+1 < len(toks) {
		return toks[i+1].text
	}
	return "(end)"
}

// sqlFromItem reads the FROM item starting at toks[i]: a table name, its
// table-function arguments, an alias. It returns the name and the index of
// the token after the item, which must end the query or start a clause.
func sqlFromItem(toks []sqlToken, i int) (string, int, error) {
	if i >= len(toks) || !toks[i].ident || isKeyword(toks[i], sqlNotAlias) || isKeyword(toks[i], sqlFollowers) {
		return "", 0, errors.New("no table name after FROM")
	}
	table := toks[i].text
	i++
	if i < len(toks) && toks[i].text == "." && !toks[i].ident {
		return "", 0, fmt.Errorf("a path after FROM %s", table)
	}
	if i < len(toks) && toks[i].text == "(" && !toks[i].ident {
		depth := 0
		for ; i < len(toks); i++ {
			if toks[i].ident {
				continue // sqlTables placed every SELECT and FROM already
			}
			switch toks[i].text {
			case "(":
				depth++
			case ")":
				depth--
			}
			if depth == 0 {
				break
			}
		}
		if i >= len(toks) {
			return "", 0, errors.New("unbalanced parentheses")
		}
		i++
	}
	if i < len(toks) && toks[i].keyword("AS") {
		i++
		if i >= len(toks) || !toks[i].ident {
			return "", 0, errors.New("no alias after AS")
		}
		i++
	} else if i < len(toks) && toks[i].ident && !isKeyword(toks[i], sqlFollowers) && !isKeyword(toks[i], sqlNotAlias) {
		i++ // an alias
	}
	if i == len(toks) || toks[i].text == ";" && !toks[i].ident || isKeyword(toks[i], sqlFollowers) {
		return table, i, nil
	}
	return "", 0, fmt.Errorf("%q after FROM %s", toks[i].text, table)
}
