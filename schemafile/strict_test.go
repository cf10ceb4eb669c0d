package schemafile_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
)

// badCase is a file that must be refused, and what the *Error must say.
type badCase struct {
	name   string
	doc    string
	json   bool
	line   int    // 0: not checked
	column int    // 0: not checked
	offset int64  // JSON only; -1: not checked
	table  string // "" : not checked
	family string
	key    string
	msg    string // a fragment of the message
	policy bool   // wraps strategy.ErrInvalidPolicy
}

// The regression cases of issues 14 (item 8) and 15: each file was read
// as something else, or refused with a poor message, before this package
// read files strictly.
var badCases = []badCase{
	// Integers must be integers.
	{name: "fraction", doc: "tables:\n  t:\n    f: {strategy: sequence, versions: 2.9}\n",
		line: 3, column: 39, offset: -1, table: "t", family: "f", key: "versions", msg: "want a whole number in decimal, not 2.9"},
	{name: "leading zero (octal 15 in YAML 1.1)", doc: "tables:\n  t:\n    f:\n      strategy: sequence\n      versions: 017\n",
		line: 5, column: 17, offset: -1, table: "t", family: "f", key: "versions", msg: "017 has a leading zero"},
	{name: "fraction above MaxInt32", doc: "tables: {t: {f: {strategy: sequence, versions: 2147483647.9}}}",
		line: 1, column: 48, offset: -1, key: "versions", msg: "not 2147483647.9"},
	{name: "MaxInt32+1", doc: "tables: {t: {f: {strategy: sequence, versions: 2147483648}}}",
		offset: -1, key: "versions", msg: "at most 2147483647", policy: true},
	{name: "huge", doc: "tables: {t: {f: {strategy: default-expiry, ttl: 1h, max_versions: 99999999999999999999999}}}",
		offset: -1, key: "max_versions", msg: "at most 2147483647", policy: true},
	{name: "zero versions", doc: "tables: {t: {f: {strategy: sequence, versions: 0}}}",
		offset: -1, key: "versions", msg: "at least 1", policy: true},
	{name: "zero max_versions", doc: "tables: {t: {f: {strategy: one-second, max_versions: 0}}}",
		offset: -1, key: "max_versions", msg: "at least 1", policy: true},
	{name: "negative", doc: "tables: {t: {f: {strategy: sequence, versions: -3}}}",
		offset: -1, key: "versions", msg: "at least 1", policy: true},
	{name: "hex", doc: "tables: {t: {f: {strategy: sequence, versions: 0x10}}}",
		offset: -1, key: "versions", msg: "in decimal, not 0x10"},
	{name: "exponent", doc: "tables: {t: {f: {strategy: sequence, versions: 1e3}}}",
		offset: -1, key: "versions", msg: "in decimal, not 1e3"},
	{name: "quoted number", doc: "tables: {t: {f: {strategy: sequence, versions: '3'}}}",
		offset: -1, key: "versions", msg: "want a whole number, not a string"},
	{name: "JSON fraction", json: true, doc: `{"tables": {"t": {"f": {"strategy": "sequence", "versions": 2.9}}}}`,
		line: 1, column: 61, offset: 60, key: "versions", msg: "not 2.9"},
	{name: "JSON 2.0", json: true, doc: `{"tables": {"t": {"f": {"strategy": "sequence", "versions": 2.0}}}}`,
		offset: 60, key: "versions", msg: "not 2.0"},
	{name: "JSON string", json: true, doc: `{"tables": {"t": {"f": {"strategy": "sequence", "versions": "3"}}}}`,
		offset: 60, key: "versions", msg: "not a string"},

	// One document only.
	{name: "second document", doc: "tables: {t: {f: {strategy: sequence, versions: 3}}}\n---\ntables: {t: {f: {strategy: sequence, versions: 1}}}\n",
		line: 2, column: 1, offset: -1, msg: "a second YAML document"},
	{name: "second, empty document", doc: "tables: {t: {f: {strategy: unmanaged}}}\n---\n",
		line: 2, offset: -1, msg: "a second YAML document"},

	// No duplicate keys, exact key case, no trailing data.
	{name: "JSON duplicate option", json: true, doc: `{"tables": {"t": {"f": {"strategy": "sequence", "versions": 3, "versions": 4}}}}`,
		line: 1, column: 64, offset: 63, table: "t", family: "f", key: "versions", msg: "duplicate key (first at byte offset 48)"},
	{name: "JSON duplicate table", json: true, doc: "{\"tables\": {\n\"t\": {\"f\": {\"strategy\": \"unmanaged\"}},\n\"t\": {\"g\": {\"strategy\": \"unmanaged\"}}}}",
		line: 3, column: 1, offset: 52, key: "t", msg: "duplicate key"},
	{name: "JSON duplicate tables", json: true, doc: `{"tables": {"t": {"f": {"strategy": "unmanaged"}}}, "tables": {}}`,
		offset: 52, key: "tables", msg: "duplicate key"},
	{name: "JSON Strategy", json: true, doc: `{"tables": {"t": {"f": {"Strategy": "unmanaged"}}}}`,
		line: 1, column: 25, offset: 24, table: "t", family: "f", key: "Strategy", msg: `keys are case-sensitive, did you mean "strategy"?`},
	{name: "JSON DEFAULT_TTL", json: true, doc: `{"tables": {"t": {"f": {"strategy": "one-second", "DEFAULT_TTL": "1h"}}}}`,
		offset: 50, table: "t", family: "f", key: "DEFAULT_TTL", msg: `did you mean "default_ttl"?`},
	{name: "JSON Tables", json: true, doc: `{"Tables": {"t": {"f": {"strategy": "unmanaged"}}}}`,
		offset: 1, key: "Tables", msg: `did you mean "tables"?`},
	{name: "JSON trailing garbage", json: true, doc: `{"tables": {"t": {"f": {"strategy": "unmanaged"}}}} x`,
		offset: 52, msg: "JSON syntax: invalid character 'x'"},
	{name: "JSON second object", json: true, doc: "{\"tables\": {\"t\": {\"f\": {\"strategy\": \"unmanaged\"}}}}\n{\"tables\": {}}",
		line: 2, column: 1, offset: 52, msg: "data after the schema's closing brace"},
	{name: "JSON truncated", json: true, doc: `{"tables": {"t": {"f": {"strategy": "unmanaged"}}}`,
		offset: 50, msg: "unexpected end of input"},
	{name: "JSON syntax error", json: true, doc: "{\"tables\":\n  {\"t\" {}}}",
		line: 2, column: 8, offset: 18, msg: "JSON syntax: invalid character '{' after object key"},
	{name: "YAML duplicate option", doc: "tables:\n  t:\n    f:\n      strategy: sequence\n      versions: 3\n      versions: 4\n",
		line: 6, column: 7, offset: -1, table: "t", family: "f", key: "versions", msg: "duplicate key (first at line 5, column 7)"},
	{name: "YAML duplicate family", doc: "tables:\n  t:\n    f: {strategy: unmanaged}\n    \"f\": {strategy: sequence, versions: 1}\n",
		line: 4, column: 5, offset: -1, table: "t", key: "f", msg: `table "t", key "f": duplicate key`},
	{name: "YAML typo", doc: "tables: {t: {f: {strategy: sequence, version: 3}}}",
		line: 1, column: 38, offset: -1, table: "t", family: "f", key: "version", msg: "unknown key (known keys: strategy, ttl,"},
	{name: "YAML wrong case", doc: "tables: {t: {f: {strategy: one-second, Default_TTL: 1h}}}",
		offset: -1, key: "Default_TTL", msg: `did you mean "default_ttl"?`},
	{name: "YAML unknown top-level key", doc: "tables: {t: {f: {strategy: unmanaged}}}\nversion: 2\n",
		line: 2, column: 1, offset: -1, key: "version", msg: "unknown key (known keys: tables, change_stream_retention)"},
	{name: "YAML syntax error", doc: "tables:\n  t:\n    f: {strategy: unmanaged\n",
		line: 2, offset: -1, msg: "YAML syntax: did not find expected ',' or '}'"},
	{name: "YAML yes is not a boolean", doc: "tables: {t: {f: {strategy: one-second, single_value: yes}}}",
		offset: -1, key: "single_value", msg: "want true or false"},

	// Table IDs and family names follow Bigtable's rules.
	{name: "table a/b", doc: "tables:\n  a/b:\n    f: {strategy: unmanaged}\n",
		line: 2, column: 3, offset: -1, table: "a/b", msg: `invalid table ID "a/b": Bigtable's rule is [_a-zA-Z0-9][-_.a-zA-Z0-9]*`},
	{name: "JSON table a/b", json: true, doc: `{"tables": {"a/b": {"f": {"strategy": "unmanaged"}}}}`,
		line: 1, column: 13, offset: 12, table: "a/b", msg: `invalid table ID "a/b"`},
	{name: "table starting with a dash", doc: "tables: {-t: {f: {strategy: unmanaged}}}",
		offset: -1, table: "-t", msg: "invalid table ID"},
	{name: "table ID of 51 bytes", doc: "tables: {" + strings.Repeat("t", 51) + ": {f: {strategy: unmanaged}}}",
		offset: -1, msg: "51 characters, Bigtable allows at most 50"},
	{name: "empty table ID", json: true, doc: `{"tables": {"": {"f": {"strategy": "unmanaged"}}}}`,
		offset: 12, msg: `invalid table ID ""`},
	{name: "family with a space", doc: "tables: {t: {'a b': {strategy: unmanaged}}}",
		line: 1, column: 14, offset: -1, table: "t", family: "a b", msg: `invalid family name "a b": Bigtable's rule is [-_.a-zA-Z0-9]+`},
	{name: "family with a colon", json: true, doc: `{"tables": {"t": {"a:b": {"strategy": "unmanaged"}}}}`,
		offset: 18, table: "t", family: "a:b", msg: "invalid family name"},
	{name: "family name of 65 bytes", doc: "tables: {t: {" + strings.Repeat("f", 65) + ": {strategy: unmanaged}}}",
		offset: -1, table: "t", msg: "65 characters, Bigtable allows at most 64"},

	// Durations.
	{name: "zero ttl", doc: "tables: {t: {f: {strategy: default-expiry, ttl: 0s}}}",
		offset: -1, key: "ttl", msg: "0s must be positive", policy: true},
	{name: "bare zero ttl", doc: "tables: {t: {f: {strategy: default-expiry, ttl: 0}}}",
		offset: -1, key: "ttl", msg: "0 must be positive", policy: true},
	{name: "negative ttl", doc: "tables: {t: {f: {strategy: default-expiry, ttl: -2d}}}",
		offset: -1, key: "ttl", msg: "-2d must be positive", policy: true},
	{name: "zero default_ttl", doc: "tables: {t: {f: {strategy: one-second, default_ttl: 0s}}}",
		offset: -1, key: "default_ttl", msg: "must be positive (omit default_ttl for none)", policy: true},
	{name: "duration without unit", doc: "tables: {t: {f: {strategy: default-expiry, ttl: 30}}}",
		offset: -1, key: "ttl", msg: `invalid duration "30"`, policy: true},
	{name: "unknown unit", json: true, doc: `{"tables": {"t": {"f": {"strategy": "default-expiry", "ttl": "2y"}}}}`,
		offset: 61, key: "ttl", msg: `invalid duration "2y"`, policy: true},
	{name: "sub-millisecond D", doc: "tables: {t: {f: {strategy: default-expiry, ttl: 1500us}}}",
		offset: -1, key: "ttl", msg: "whole number of milliseconds", policy: true},
	// Refused by strategy.Policy.Validate: the key is its PolicyError's
	// Param in the file's words (WithDefaultTTL's d is default_ttl here,
	// DefaultExpiry's d ttl above).
	{name: "sub-millisecond default_ttl", doc: "tables: {t: {f: {strategy: one-second, default_ttl: 500us}}}",
		offset: -1, key: "default_ttl", msg: "default TTL 500µs must be at least 1ms", policy: true},

	// Structure.
	{name: "empty YAML", doc: "", offset: -1, msg: "empty schema file"},
	{name: "YAML comments only", doc: "# nothing yet\n\n", offset: -1, msg: "empty schema file"},
	{name: "YAML document marker only", doc: "---\n", offset: -1, msg: "empty schema file"},
	{name: "empty JSON", json: true, doc: "", offset: -1, msg: "empty schema file"},
	{name: "JSON whitespace", json: true, doc: " \n\t", offset: -1, msg: "empty schema file"},
	{name: "JSON null", json: true, doc: "null", offset: -1, msg: "empty schema file"},
	{name: "no tables", doc: "tables: {}", offset: -1, msg: "no tables"},
	{name: "tables a list", doc: "tables: [t]", offset: -1, msg: "want a mapping of table IDs, not a list"},
	{name: "root a list", json: true, doc: "[]", offset: 0, msg: "want a mapping with the key \"tables\", not a list"},
	{name: "no families", doc: "tables: {t: {}}", offset: -1, table: "t", msg: "no families"},
	{name: "family without strategy", doc: "tables: {t: {f: {ttl: 1h}}}", offset: -1, key: "strategy", msg: "missing", policy: true},
	{name: "null family", doc: "tables: {t: {f: }}", offset: -1, key: "strategy", msg: "missing", policy: true},
	{name: "option on the wrong strategy", doc: "tables: {t: {f: {strategy: sequence, versions: 3, ttl: 1h}}}",
		offset: -1, key: "ttl", msg: "sequence takes only versions", policy: true},
	{name: "unknown strategy", doc: "tables: {t: {f: {strategy: forever}}}",
		offset: -1, key: "strategy", msg: `"forever": want one-second`, policy: true},
	{name: "custom tag", doc: "tables: {t: {f: {strategy: !x one-second}}}", offset: -1, msg: "unsupported tag !x"},
	{name: "merge of a scalar", doc: "tables: {t: {f: {<<: 3, strategy: unmanaged}}}", offset: -1, msg: "a merge key (<<) takes a mapping"},
}

func TestStrictFiles(t *testing.T) {
	for _, c := range badCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := schemafile.Parse([]byte(c.doc), c.json)
			require.Error(t, err)
			assert.ErrorIs(t, err, schemafile.ErrInvalidFile)
			assert.Equal(t, c.policy, errors.Is(err, strategy.ErrInvalidPolicy), "wraps ErrInvalidPolicy: %v", err)
			var e *schemafile.Error
			require.ErrorAs(t, err, &e)
			assert.Contains(t, err.Error(), c.msg)
			assert.Equal(t, 1, strings.Count(err.Error(), "bttl:"), "one bttl: prefix: %v", err)
			assert.True(t, strings.HasPrefix(err.Error(), "bttl: "), err.Error())
			assert.NotContains(t, err.Error(), "EOF")
			if c.line != 0 {
				assert.Equal(t, c.line, e.Line, "line: %v", err)
			}
			if c.column != 0 {
				assert.Equal(t, c.column, e.Column, "column: %v", err)
			}
			if c.json {
				if c.offset >= 0 {
					assert.Equal(t, c.offset, e.Offset, "offset: %v", err)
					assert.Contains(t, err.Error(), "byte offset")
				}
			} else {
				assert.Equal(t, int64(-1), e.Offset, "no offset in YAML: %v", err)
			}
			if c.table != "" {
				assert.Equal(t, c.table, e.Table, "table: %v", err)
			}
			if c.family != "" {
				assert.Equal(t, c.family, e.Family, "family: %v", err)
			}
			if c.key != "" {
				assert.Equal(t, c.key, e.Key, "key: %v", err)
			}
		})
	}
}

// Load names the file, with the line and column, in the message and the
// *Error.
func TestLoadNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.yaml")
	require.NoError(t, os.WriteFile(p, []byte("tables:\n  t:\n    f: {strategy: sequence, versions: 2.9}\n"), 0o600))
	_, err := schemafile.Load(p)
	var e *schemafile.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, p, e.File)
	assert.Equal(t, "bttl: invalid schema file "+p+`:3:39: table "t", family "f", key "versions": want a whole number in decimal, not 2.9`, err.Error())

	pj := filepath.Join(dir, "s.json")
	require.NoError(t, os.WriteFile(pj, []byte("{\"tables\": {\"t\": {\"f\":\n  {\"strategy\": \"sequence\", \"versions\": 2.9}}}}"), 0o600))
	_, err = schemafile.Load(pj)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "bttl: invalid schema file "+pj+`:2:40 (byte offset 62): table "t", family "f", key "versions": want a whole number in decimal, not 2.9`, err.Error())

	empty := filepath.Join(dir, "empty.yaml")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = schemafile.Load(empty)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "bttl: invalid schema file "+empty+`: empty schema file: it needs a "tables" mapping`, err.Error())

	_, err = schemafile.Load(filepath.Join(dir, "missing.yaml"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorIs(t, err, schemafile.ErrInvalidFile)
	assert.Equal(t, 1, strings.Count(err.Error(), "bttl:"), err.Error())
	assert.Equal(t, 1, strings.Count(err.Error(), "missing.yaml"), err.Error())
}

// A policy error from the strategy package keeps one "bttl:" prefix.
func TestOnePrefixWithStrategyErrors(t *testing.T) {
	_, err := schemafile.Parse([]byte("tables: {t: {.f: {strategy: unmanaged}}}"), false)
	require.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	assert.Equal(t, `bttl: invalid schema file at line 1, column 14: table "t", family ".f": invalid policy: family name ".f": want 1 to 64 of [-_.a-zA-Z0-9], not starting with - or .`, err.Error())
}

func TestAcceptedFiles(t *testing.T) {
	for _, c := range []struct {
		name string
		doc  string
		json bool
		want map[string]strategy.Schema
	}{
		{name: "days and hours", doc: "tables: {t: {f: {strategy: default-expiry, ttl: 1d12h}}}",
			want: map[string]strategy.Schema{"t": {"f": strategy.DefaultExpiry(36 * time.Hour)}}},
		{name: "weeks", doc: "tables: {t: {f: {strategy: default-expiry, ttl: 2w}}}",
			want: map[string]strategy.Schema{"t": {"f": strategy.DefaultExpiry(14 * 24 * time.Hour)}}},
		{name: "weeks, days, hours", json: true, doc: `{"tables": {"t": {"f": {"strategy": "one-second", "default_ttl": "1w2d3h"}}}}`,
			want: map[string]strategy.Schema{"t": {"f": strategy.OneSecond(strategy.WithDefaultTTL(9*24*time.Hour + 3*time.Hour))}}},
		{name: "MaxInt32 versions", doc: "tables: {t: {f: {strategy: sequence, versions: 2147483647}}}",
			want: map[string]strategy.Schema{"t": {"f": strategy.Sequence(2147483647)}}},
		{name: "explicit int tag", doc: "tables: {t: {f: {strategy: sequence, versions: !!int 7}}}",
			want: map[string]strategy.Schema{"t": {"f": strategy.Sequence(7)}}},
		{name: "table ID of 50 bytes, family name of 64", doc: "tables: {" + strings.Repeat("t", 50) + ": {" + strings.Repeat("f", 64) + ": {strategy: unmanaged}}}",
			want: map[string]strategy.Schema{strings.Repeat("t", 50): {strings.Repeat("f", 64): strategy.Unmanaged()}}},
		{name: "names with dots, dashes, underscores", doc: "tables: {_a.b-c: {x_y-z.1: {strategy: unmanaged}}}",
			want: map[string]strategy.Schema{"_a.b-c": {"x_y-z.1": strategy.Unmanaged()}}},
		{name: "document markers", doc: "---\ntables: {t: {f: {strategy: unmanaged}}}\n...\n",
			want: map[string]strategy.Schema{"t": {"f": strategy.Unmanaged()}}},
		{name: "single_value false", doc: "tables: {t: {f: {strategy: default-expiry, ttl: 1h, single_value: false}}}",
			want: map[string]strategy.Schema{"t": {"f": strategy.DefaultExpiry(time.Hour)}}},
		// Anchors, aliases and merge keys worked when the file was decoded
		// into structs; they still do, with duplicates checked among the
		// keys written out and written keys winning over merged ones.
		{name: "alias and merge key", doc: `
tables:
  t:
    a: &seq {strategy: sequence, versions: 3}
    b: *seq
    c:
      <<: *seq
      versions: 5
`, want: map[string]strategy.Schema{"t": {"a": strategy.Sequence(3), "b": strategy.Sequence(3), "c": strategy.Sequence(5)}}},
		{name: "JSON with line breaks", json: true, doc: "{\n  \"tables\": {\n    \"t\": {\"f\": {\"strategy\": \"sequence\", \"versions\": 1}}\n  }\n}\n",
			want: map[string]strategy.Schema{"t": {"f": strategy.Sequence(1)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := schemafile.Parse([]byte(c.doc), c.json)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"90s": 90 * time.Second, "1h30m": 90 * time.Minute, "1500ms": 1500 * time.Millisecond,
		"7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "2w": 14 * 24 * time.Hour,
		"1w2d3h": 9*24*time.Hour + 3*time.Hour, "1.5d": 36 * time.Hour, "1d1ms": 24*time.Hour + time.Millisecond,
	} {
		d, err := schemafile.ParseDuration(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, d, s)
	}
	for _, s := range []string{"", "d", "1y", "soon", "1d 2h", "99999999w"} {
		_, err := schemafile.ParseDuration(s)
		assert.ErrorContains(t, err, "invalid duration", s)
	}
}

// Family.Policy, for programs that build entries themselves, names the
// 32-bit limit too.
func TestFamilyPolicyRange(t *testing.T) {
	_, err := schemafile.Family{Strategy: "sequence", Versions: math.MaxInt32 + 1}.Policy()
	require.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	assert.Contains(t, err.Error(), "versions 2147483648 is out of range: between 1 and 2147483647")
	_, err = schemafile.Family{Strategy: "one-second", MaxVersions: -1}.Policy()
	require.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	assert.Contains(t, err.Error(), "max_versions -1 is out of range")
	assert.Equal(t, 1, strings.Count(err.Error(), "bttl:"), err.Error())
}

// A File written with the yaml and json packages (as a program generating
// a schema file would) reads back as the same schemas.
func TestFileRoundTrip(t *testing.T) {
	file := schemafile.File{Tables: map[string]map[string]schemafile.Family{"events": {
		"session": {Strategy: "one-second", DefaultTTL: "30m", MaxVersions: 2},
		"clicks":  {Strategy: "default-expiry", TTL: "2d", SingleValue: true},
		"doc":     {Strategy: "sequence", Versions: 5},
		"meta":    {Strategy: "unmanaged"},
	}}}
	want := map[string]strategy.Schema{"events": {
		"session": strategy.OneSecond(strategy.WithDefaultTTL(30*time.Minute), strategy.WithMaxVersions(2)),
		"clicks":  strategy.DefaultExpiry(48*time.Hour, strategy.SingleValue()),
		"doc":     strategy.Sequence(5),
		"meta":    strategy.Unmanaged(),
	}}
	y, err := yaml.Marshal(file)
	require.NoError(t, err)
	got, err := schemafile.Parse(y, false)
	require.NoError(t, err, string(y))
	assert.Equal(t, want, got)
	j, err := json.Marshal(file)
	require.NoError(t, err)
	got, err = schemafile.Parse(j, true)
	require.NoError(t, err, string(j))
	assert.Equal(t, want, got)
}
