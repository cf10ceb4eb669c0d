package ttlclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// sqlTables finds the table of every query GoogleSQL for Bigtable accepts,
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
	}
	for q, want := range found {
		got, err := sqlTables(q)
		if assert.NoError(t, err, q) {
			assert.Equal(t, want, got, q)
		}
	}
	refused := map[string]string{
		"SELECT * FROM a JOIN b ON a._key = b._key": `"JOIN" after FROM a`,
		"SELECT * FROM a, b":                        `"," after FROM a`,
		"SELECT * FROM a UNION ALL SELECT * FROM b": `"UNION" after FROM a`,
		"SELECT * FROM (SELECT * FROM a)":           "no table name after FROM",
		"SELECT (SELECT 1 FROM a) FROM b":           "a subquery",
		"SELECT * FROM t(x => (SELECT 1))":          "a subquery",
		"WITH x AS (SELECT 1) SELECT * FROM t":      "a WITH clause",
		"SELECT * FROM p.t":                         "a path after FROM p",
		"SELECT * FROM":                             "no table name after FROM",
		"SELECT * FROM WHERE":                       "no table name after FROM",
		"SELECT * FROM t AS":                        "no alias after AS",
		"SELECT * FROM t(with_history => TRUE":      "unbalanced parentheses",
		"SELECT (1 FROM t":                          "unbalanced parentheses",
		"SELECT 'x FROM t":                          "unterminated '",
		"SELECT `x FROM t":                          "unterminated `",
		"SELECT 1 /* FROM t":                        "unterminated comment",
		"SELECT ) FROM t (":                         "unbalanced parentheses",
		"SELECT 1 AS k |> JOIN t USING (k)":         "pipe syntax",
		"FROM t |> WHERE _key = 'a'":                `"|" after FROM t`,
	}
	for q, want := range refused {
		_, err := sqlTables(q)
		if assert.Error(t, err, q) {
			assert.Contains(t, err.Error(), want, q)
		}
	}
}
