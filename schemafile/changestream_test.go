package schemafile_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/schemafile"
)

const streamsYAML = `
change_stream_retention:   # before tables: the file's order does not matter
  sessions: 7d
  archive: "off"
  logs: off
  short: 36h
tables:
  sessions: {s: {strategy: one-second}}
  archive: {a: {strategy: unmanaged}}
  logs: {l: {strategy: unmanaged}}
  short: {x: {strategy: unmanaged}}
  plain: {p: {strategy: unmanaged}}
`

func TestChangeStreamRetention(t *testing.T) {
	want := map[string]*schemafile.ChangeStream{
		"sessions": {Retention: 7 * 24 * time.Hour},
		"archive":  {},
		"logs":     {},
		"short":    {Retention: 36 * time.Hour},
		"plain":    nil,
	}
	check := func(tables map[string]schemafile.Table) {
		t.Helper()
		require.Len(t, tables, len(want))
		for id, cs := range want {
			assert.Equal(t, cs, tables[id].ChangeStream, id)
		}
	}
	got, err := schemafile.ParseTables([]byte(streamsYAML), false)
	require.NoError(t, err)
	check(got)
	got, err = schemafile.ParseTables([]byte(`{"tables": {"sessions": {"s": {"strategy": "one-second"}}, "archive": {"a": {"strategy": "unmanaged"}},
	  "logs": {"l": {"strategy": "unmanaged"}}, "short": {"x": {"strategy": "unmanaged"}}, "plain": {"p": {"strategy": "unmanaged"}}},
	  "change_stream_retention": {"sessions": "7d", "archive": "off", "logs": "off", "short": "1d12h"}}`), true)
	require.NoError(t, err)
	check(got)
}

// Bigtable keeps a change stream 1 to 7 days (ChangeStreamConfig's
// retention_period doc): anything else is refused with its position,
// before any RPC.
func TestChangeStreamRetentionRefused(t *testing.T) {
	for name, c := range map[string]struct{ doc, msg string }{
		"too long":       {"8d", `line 2, column 30: table "t", key "change_stream_retention": change stream retention 8d is out of range: Bigtable keeps a change stream between 1d and 7d`},
		"too short":      {"23h", "change stream retention 23h is out of range"},
		"zero":           {"0s", "change stream retention 0s is out of range"},
		"bool":           {"false", `want a duration such as 90s, 1h30m or 1d12h, not a boolean, or "off"`},
		"not a duration": {"7days", `invalid duration "7days"`},
		"unknown table":  {"1d\n  other: 1d", `table "other", key "change_stream_retention": table not under tables`},
	} {
		t.Run(name, func(t *testing.T) {
			doc := "tables: {t: {f: {strategy: unmanaged}}}\nchange_stream_retention: {t: " + c.doc + "}\n"
			if name == "unknown table" {
				doc = "tables: {t: {f: {strategy: unmanaged}}}\nchange_stream_retention:\n  t: " + c.doc + "\n"
			}
			_, err := schemafile.ParseTables([]byte(doc), false)
			require.Error(t, err)
			assert.True(t, errors.Is(err, schemafile.ErrInvalidFile))
			var fe *schemafile.Error
			require.True(t, errors.As(err, &fe))
			assert.Equal(t, schemafile.ChangeStreamKey, fe.Key)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
	_, err := schemafile.ParseTables([]byte("tables: {t: {f: {strategy: unmanaged}}}\nchange_stream_retention: 7d\n"), false)
	assert.ErrorContains(t, err, `want a mapping of table IDs to a retention (1d to 7d) or "off", not`)
	_, err = schemafile.ParseTables([]byte("tables: {t: {f: {strategy: unmanaged}}}\nchange_streams: {t: 7d}\n"), false)
	assert.ErrorContains(t, err, "known keys: tables, change_stream_retention")
}
