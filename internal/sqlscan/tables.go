package sqlscan

import (
	"errors"
	"fmt"
	"strings"
)

// token is one token of a GoogleSQL query: an identifier (quoted with
// backquotes or not), a literal, or one punctuation character.
type token struct {
	text   string // an identifier's name, unquoted; a punctuation character
	ident  bool
	quoted bool
}

func (t token) keyword(k string) bool { return t.ident && !t.quoted && strings.EqualFold(t.text, k) }

// punct reports whether t is the punctuation character p.
func (t token) punct(p string) bool { return !t.ident && t.text == p }

// tokens splits query into tokens, skipping comments and the contents
// of string and bytes literals.
func tokens(query string) ([]token, error) {
	var out []token
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
				out = append(out, token{text: b.String(), ident: true, quoted: true})
			} else {
				out = append(out, token{text: "'"})
			}
			i = j + len(quote)
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			j := i + 1
			for j < len(query) && (query[j] == '_' || 'a' <= query[j] && query[j] <= 'z' || 'A' <= query[j] && query[j] <= 'Z' || '0' <= query[j] && query[j] <= '9') {
				j++
			}
			out = append(out, token{text: query[i:j], ident: true})
			i = j
		default:
			out = append(out, token{text: query[i : i+1]})
			i++
		}
	}
	return out, nil
}

// followers may follow a query's FROM item: anything else (a join, a
// second table, a path) makes the query unclassifiable.
var followers = []string{"WHERE", "GROUP", "ORDER", "LIMIT", "HAVING", "QUALIFY", "WINDOW", "OFFSET"}

// notAlias are keywords that, after a FROM item, are not its alias.
var notAlias = []string{"JOIN", "CROSS", "INNER", "LEFT", "RIGHT", "FULL", "OUTER", "NATURAL",
	"UNION", "INTERSECT", "EXCEPT", "ON", "USING", "TABLESAMPLE", "UNNEST", "WITH", "FOR", "PIVOT", "UNPIVOT", "SELECT"}

func isKeyword(t token, set []string) bool {
	for _, k := range set {
		if t.keyword(k) {
			return true
		}
	}
	return false
}

// Tables is the tables query reads: none, or the table of its one FROM
// clause. It refuses what it cannot classify rather than guess, and does
// so structurally: the query must be one statement starting with SELECT,
// and every FROM keyword in it must be placed, as
//   - the FROM clause of that SELECT (outside parentheses, the first such
//     FROM), whose item fromItem reads as a table; or
//   - the FROM of EXTRACT(part FROM x) or EXTRACT(part(arg) FROM x); or
//   - the FROM of x IS [NOT] DISTINCT FROM y.
//
// Any other FROM (a subquery starting with FROM: EXISTS(FROM t),
// ARRAY(FROM t), (FROM t); a second FROM clause) is refused, as are a
// second SELECT anywhere (a subquery, a union), a query not starting with
// SELECT (WITH, pipe syntax starting with FROM), pipe operators (|>), a
// TABLE argument, JOIN anywhere, and a second statement. GoogleSQL's
// other ways to read a table (comma joins, paths) follow a FROM clause,
// where fromItem refuses them.
func Tables(query string) ([]string, error) {
	toks, err := tokens(query)
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
			case extractFrom(toks, i), distinctFrom(toks, i):
			case depth == 0 && from < 0:
				from = i
			default:
				return nil, fmt.Errorf("a FROM it cannot place (FROM %s): a subquery starting with FROM, pipe syntax, or a second FROM clause", next(toks, i))
			}
		}
	}
	if depth != 0 {
		return nil, errors.New("unbalanced parentheses")
	}
	if from < 0 {
		return nil, nil
	}
	table, _, err := fromItem(toks, from+1)
	if err != nil {
		return nil, err
	}
	return []string{table}, nil
}

// extractFrom reports whether toks[i], a FROM, is EXTRACT's:
// EXTRACT ( part FROM, or EXTRACT ( part ( arg ) FROM.
func extractFrom(toks []token, i int) bool {
	at := func(j int) token {
		if j < 0 {
			return token{}
		}
		return toks[j]
	}
	part := func(j int) bool { return at(j).ident && !at(j).quoted }
	return part(i-1) && at(i-2).punct("(") && at(i-3).keyword("EXTRACT") ||
		at(i-1).punct(")") && part(i-2) && at(i-3).punct("(") && part(i-4) && at(i-5).punct("(") && at(i-6).keyword("EXTRACT")
}

// distinctFrom reports whether toks[i], a FROM, ends IS [NOT] DISTINCT
// FROM, a comparison.
func distinctFrom(toks []token, i int) bool {
	return i >= 2 && toks[i-1].keyword("DISTINCT") &&
		(toks[i-2].keyword("IS") || i >= 3 && toks[i-2].keyword("NOT") && toks[i-3].keyword("IS"))
}

// next is the text of the token after toks[i], for messages.
func next(toks []token, i int) string {
	if i+1 < len(toks) {
		return toks[i+1].text
	}
	return "(end)"
}

// fromItem reads the FROM item starting at toks[i]: a table name, its
// table-function arguments, an alias. It returns the name and the index of
// the token after the item, which must end the query or start a clause.
func fromItem(toks []token, i int) (string, int, error) {
	if i >= len(toks) || !toks[i].ident || isKeyword(toks[i], notAlias) || isKeyword(toks[i], followers) {
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
				continue // Tables placed every SELECT and FROM already
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
	} else if i < len(toks) && toks[i].ident && !isKeyword(toks[i], followers) && !isKeyword(toks[i], notAlias) {
		i++ // an alias
	}
	if i == len(toks) || toks[i].text == ";" && !toks[i].ident || isKeyword(toks[i], followers) {
		return table, i, nil
	}
	return "", 0, fmt.Errorf("%q after FROM %s", toks[i].text, table)
}
