package sqlscan

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Tables finds the table of every query GoogleSQL for Bigtable accepts,
// whatever strings, comments and functions say, and refuses what it cannot
// classify rather than guessing.
func TestSQLTables(t *testing.T) {
	found := map[string][]string{
		"SELECT 1":                                   nil,
		"SELECT * FROM t":                            {"t"},
		"select _key from t where _key = 'r'":        {"t"},
		"SELECT * FROM t;":                           {"t"},
		"SELECT * FROM `my-table.v2` LIMIT 1":        {"my-table.v2"},
		"SELECT * FROM t(with_history => TRUE) AS x": {"t"},
		"SELECT * FROM t(with_history => TRUE, latest_n => 2) x WHERE x._key = 'a'": {"t"},
		"SELECT cf['from'] FROM t":                      {"t"},
		"SELECT 'FROM u' AS s FROM t":                   {"t"},
		"SELECT \"a\\\"FROM u\" FROM t":                 {"t"},
		"SELECT '''FROM u''' FROM t":                    {"t"},
		"SELECT 1 -- FROM u\nFROM t":                    {"t"},
		"SELECT 1 # FROM u\nFROM t":                     {"t"},
		"SELECT /* FROM u */ 1 FROM t":                  {"t"},
		"SELECT EXTRACT(DAY FROM ts) FROM t GROUP BY 1": {"t"},
		"SELECT from_col FROM t ORDER BY _key":          {"t"},
		"SELECT * FROM t HAVING 1 = 1":                  {"t"},
		"SELECT * FROM t WHERE _key IN UNNEST(@keys)":   {"t"},
		"SELECT * FROM \n\tt\n":                         {"t"},
		"SELECT 1 --\rFROM t":                           {"t"},
		"SELECT 1 # x\rFROM t":                          {"t"},
		"SELECT EXTRACT(WEEK(MONDAY) FROM ts) FROM t":   {"t"},
		"SELECT * FROM t WHERE a IS DISTINCT FROM b":    {"t"},
		"SELECT a IS NOT DISTINCT FROM b FROM t":        {"t"},
		"SELECT DISTINCT x FROM t":                      {"t"},
		"SELECT `from` FROM t":                          {"t"},
		"SELECT * FROM t(x => EXTRACT(DAY FROM ts))":    {"t"},
	}
	for q, want := range found {
		got, err := Tables(q)
		if assert.NoError(t, err, q) {
			assert.Equal(t, want, got, q)
		}
	}
	refused := map[string]string{
		"SELECT * FROM a JOIN b ON a._key = b._key": "a join",
		"SELECT * FROM a CROSS JOIN b":              "a join",
		"SELECT * FROM a, b":                        `"," after FROM a`,
		"SELECT * FROM a UNION ALL SELECT * FROM b": "a subquery",
		"SELECT * FROM a UNION ALL FROM b":          "a FROM it cannot place (FROM b)",
		"SELECT * FROM a UNION ALL (SELECT 1)":      "a subquery",
		"SELECT * FROM a INTERSECT DISTINCT b":      `"INTERSECT" after FROM a`,
		"SELECT * FROM (SELECT * FROM a)":           "a subquery",
		"SELECT * FROM (a)":                         "no table name after FROM",
		"SELECT (SELECT 1 FROM a) FROM b":           "a subquery",
		"SELECT * FROM t(x => (SELECT 1))":          "a subquery",
		"WITH x AS (SELECT 1) SELECT * FROM t":      "does not start with SELECT",
		"SELECT * FROM p.t":                         "a path after FROM p",
		"SELECT * FROM":                             "no table name after FROM",
		"SELECT * FROM WHERE":                       "no table name after FROM",
		"SELECT * FROM t AS":                        "no alias after AS",
		"SELECT * FROM t(with_history => TRUE":      "unbalanced parentheses",
		"SELECT (1 FROM t":                          "a FROM it cannot place",
		"SELECT (1 FROM t WHERE":                    "a FROM it cannot place",
		"SELECT (1":                                 "unbalanced parentheses",
		"SELECT 'x FROM t":                          "unterminated '",
		"SELECT `x FROM t":                          "unterminated `",
		"SELECT 1 /* FROM t":                        "unterminated comment",
		"SELECT ) FROM t (":                         "unbalanced parentheses",
		"SELECT 1 AS k |> JOIN t USING (k)":         "pipe syntax",
		"FROM t |> WHERE _key = 'a'":                "does not start with SELECT",
		"FROM t":                                    "does not start with SELECT",
		"":                                          "does not start with SELECT",
		"(SELECT * FROM t)":                         "does not start with SELECT",
		"SELECT 1; SELECT * FROM t":                 "more than one statement",
		"SELECT * FROM plain; FROM t":               "more than one statement",
		"SELECT * FROM p(TABLE t)":                  "a TABLE argument",
		// Subqueries starting with FROM (pipe syntax) (issue 26 item 5).
		"SELECT * FROM plain WHERE EXISTS(FROM events)":              "a FROM it cannot place (FROM events)",
		"SELECT * FROM plain ORDER BY (FROM events)":                 "a FROM it cannot place (FROM events)",
		"SELECT ARRAY(FROM events) FROM plain":                       "a FROM it cannot place (FROM events)",
		"SELECT * FROM plain WHERE EXISTS(FROM events |> WHERE x)":   "a FROM it cannot place (FROM events)",
		"SELECT * FROM plain WHERE a IS DISTINCT FROM (FROM events)": "a FROM it cannot place (FROM events)",
		"SELECT EXTRACT(DAY FROM (FROM events)) FROM plain":          "a FROM it cannot place (FROM events)",
		"SELECT EXTRACT(FROM events) FROM plain":                     "a FROM it cannot place (FROM events)",
		"SELECT * FROM plain(x => (FROM events))":                    "a FROM it cannot place (FROM events)",
		"SELECT * FROM plain WHERE TRUE FROM events":                 "a FROM it cannot place (FROM events)",
		"SELECT 1 FROM events.x":                                     "a path after FROM events",
	}
	for q, want := range refused {
		_, err := Tables(q)
		if assert.Error(t, err, q) {
			assert.Contains(t, err.Error(), want, q)
		}
	}
}
