package sqlscan

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// checkSQLPlacement is the classifier's contract, checked from the
// tokens: when Tables accepts a query, every FROM keyword in it is
// placed, either as a comparison or EXTRACT's (and then reads no table)
// or as the one FROM clause whose table Tables returned; and no table
// named after FROM, JOIN or TABLE is read but the one returned.
func checkSQLPlacement(t *testing.T, query string) {
	t.Helper()
	tables, err := Tables(query)
	if err != nil {
		return // refused: nothing to check
	}
	toks, err := tokens(query)
	require.NoError(t, err, "%q was classified but does not tokenize", query)
	require.LessOrEqual(t, len(tables), 1, "%q", query)
	clauses := 0
	for i, tok := range toks {
		if tok.keyword("FROM") && !extractFrom(toks, i) && !distinctFrom(toks, i) {
			clauses++
			require.Len(t, tables, 1, "%q: FROM %s not placed", query, next(toks, i))
			require.Equal(t, tables[0], toks[i+1].text, "%q: a FROM clause not of the table returned", query)
		}
		if i > 0 && tok.ident && (toks[i-1].keyword("FROM") && !extractFrom(toks, i-1) && !distinctFrom(toks, i-1) ||
			toks[i-1].keyword("JOIN") || toks[i-1].keyword("TABLE")) {
			require.Equal(t, []string{tok.text}, tables, "%q reads %s", query, tok.text)
		}
	}
	require.Equal(t, len(tables), clauses, "%q: %v returned for %d FROM clauses", query, tables, clauses)
}

// Random queries built by splicing table-reading fragments (subqueries
// starting with FROM or SELECT, pipe operators, joins, TABLE arguments, second
// statements) into accepted queries, at token boundaries and at random bytes
// (inside strings and comments too), are either refused or classified with
// every FROM placed (checkSQLPlacement) (issue 26 item 5, as a property).
func TestSQLClassifierPlacesEveryFrom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BTTL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	const n = 20000
	t.Logf("SQL classifier: seed %d, %d queries (replay with BTTL_SEED=%d)", seed, n, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	bases := []string{
		"SELECT * FROM plain",
		"SELECT 1",
		"SELECT EXTRACT(DAY FROM ts) FROM plain WHERE _key = 'a FROM events' ORDER BY _key LIMIT 1",
		"SELECT * FROM plain(with_history => TRUE) AS p WHERE a IS DISTINCT FROM b -- FROM events\n",
		"SELECT EXTRACT(WEEK(MONDAY) FROM ts), x IS NOT DISTINCT FROM y FROM `plain` /* (FROM events) */ ;",
	}
	fragments := []string{
		"FROM events", "(FROM events)", "EXISTS(FROM events)", "ARRAY(FROM events)", "(SELECT * FROM events)",
		"|> JOIN events ON TRUE", "| > JOIN events", "UNION ALL SELECT * FROM events", ", events", "JOIN events ON TRUE",
		"FROM events |> WHERE TRUE", "(TABLE events)", "TABLE events", "WITH e AS (FROM events)", "; FROM events",
		"; SELECT * FROM events", "EXTRACT(DAY FROM events)", "EXTRACT(DAY FROM (FROM events))", "IS DISTINCT FROM events",
		"IS DISTINCT FROM (FROM events)", "--\nFROM events", "#\rFROM events", "/* */FROM events", "FROM `events`",
		"FROM events AS e", "CROSS JOIN events", "(FROM events) AS e", "(", ")", "events", "FROM", "SELECT", "'", "`",
		"/*", "*/", "\n", ".", "AS", "EXTRACT(", "DAY", "IS", "NOT", "DISTINCT",
	}
	for i := 0; i < n; i++ {
		q := bases[rng.IntN(len(bases))]
		for k := 1 + rng.IntN(3); k > 0; k-- {
			frag := fragments[rng.IntN(len(fragments))]
			var at int
			if rng.IntN(2) == 0 { // a token boundary (a space)
				spaces := []int{0, len(q)}
				for j, c := range q {
					if c == ' ' {
						spaces = append(spaces, j)
					}
				}
				at = spaces[rng.IntN(len(spaces))]
			} else {
				at = rng.IntN(len(q) + 1)
			}
			q = q[:at] + " " + frag + " " + q[at:]
		}
		checkSQLPlacement(t, q)
	}
}

// FuzzSQLTables checks the placement contract on arbitrary text; go test
// runs the seeds, go test -fuzz=FuzzSQLTables explores.
func FuzzSQLTables(f *testing.F) {
	for _, q := range []string{
		"SELECT * FROM plain WHERE EXISTS(FROM events)",
		"SELECT * FROM plain ORDER BY (FROM events)",
		"SELECT ARRAY(FROM events) FROM plain",
		"SELECT EXTRACT(DAY FROM ts) FROM t",
		"SELECT a IS NOT DISTINCT FROM b FROM t",
		"SELECT * FROM t(with_history => TRUE) AS x WHERE _key = 'FROM u'",
		"FROM t |> WHERE TRUE",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) { checkSQLPlacement(t, q) })
}
