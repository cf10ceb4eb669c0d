package schemafile_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
)

const yamlDoc = `
tables:
  events:
    session: {strategy: one-second, default_ttl: 30m}
    clicks: {strategy: default-expiry, ttl: 2d, max_versions: 3, single_value: true}
    doc: {strategy: sequence, versions: 5}
    meta: {strategy: unmanaged}
`

const jsonDoc = `{"tables": {"events": {
  "session": {"strategy": "one-second", "default_ttl": "30m"},
  "clicks": {"strategy": "default-expiry", "ttl": "48h", "max_versions": 3, "single_value": true},
  "doc": {"strategy": "sequence", "versions": 5},
  "meta": {"strategy": "unmanaged"}}}}`

func TestYAMLAndJSONAgree(t *testing.T) {
	want := map[string]strategy.Schema{"events": {
		"session": strategy.OneSecond(strategy.WithDefaultTTL(30 * time.Minute)),
		"clicks":  strategy.DefaultExpiry(48*time.Hour, strategy.WithMaxVersions(3), strategy.SingleValue()),
		"doc":     strategy.Sequence(5),
		"meta":    strategy.Unmanaged(),
	}}
	got, err := schemafile.Parse([]byte(yamlDoc), false)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	got, err = schemafile.Parse([]byte(jsonDoc), true)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	dir := t.TempDir()
	p := filepath.Join(dir, "s.json")
	require.NoError(t, os.WriteFile(p, []byte(jsonDoc), 0o600))
	got, err = schemafile.Load(p)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestBadFiles(t *testing.T) {
	for name, doc := range map[string]string{
		"typo in a key":      "tables: {t: {f: {strategy: sequence, version: 3}}}",
		"unknown strategy":   "tables: {t: {f: {strategy: forever}}}",
		"no ttl":             "tables: {t: {f: {strategy: default-expiry}}}",
		"bad duration":       "tables: {t: {f: {strategy: default-expiry, ttl: soon}}}",
		"sub-ms D":           "tables: {t: {f: {strategy: default-expiry, ttl: 1500us}}}",
		"ttl on sequence":    "tables: {t: {f: {strategy: sequence, versions: 2, max_versions: 1}}}",
		"options, unmanaged": "tables: {t: {f: {strategy: unmanaged, versions: 1}}}",
		"no tables":          "tables: {}",
		"bad family name":    "tables: {t: {'a b': {strategy: unmanaged}}}",
	} {
		_, err := schemafile.Parse([]byte(doc), false)
		assert.ErrorIs(t, err, schemafile.ErrInvalidFile, name)
	}
	_, err := schemafile.Parse([]byte(`{"tables": {"t": {"f": {"strategy": "sequence", "versions": 0}}}}`), true)
	assert.ErrorIs(t, err, strategy.ErrInvalidPolicy)
}

func TestLifecycleKeys(t *testing.T) {
	got, err := schemafile.Parse([]byte(`tables:
  t:
    s: {strategy: one-second, default_ttl: 1h, max_ttl: 30d, clamp_ttl: true, write_time: true}
    c: {strategy: default-expiry, ttl: 1d, max_ttl: 2w}
`), false)
	require.NoError(t, err)
	assert.Equal(t, strategy.OneSecond(strategy.WithDefaultTTL(time.Hour), strategy.WithMaxTTL(30*24*time.Hour, strategy.ClampLonger), strategy.WithWriteTime()), got["t"]["s"])
	assert.Equal(t, strategy.DefaultExpiry(24*time.Hour, strategy.WithMaxTTL(14*24*time.Hour, strategy.RefuseLonger)), got["t"]["c"])
	assert.Equal(t, "default-expiry(D=24h0m0s)+maxttl(336h0m0s)", got["t"]["c"].String())

	got, err = schemafile.Parse([]byte(`{"tables": {"t": {"s": {"strategy": "one-second", "max_ttl": "1h", "write_time": true}}}}`), true)
	require.NoError(t, err)
	assert.Equal(t, strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger), strategy.WithWriteTime()), got["t"]["s"])

	for doc, key := range map[string]string{
		"tables: {t: {f: {strategy: one-second, clamp_ttl: true}}}":              "clamp_ttl",
		"tables: {t: {f: {strategy: default-expiry, ttl: 2d, max_ttl: 1d}}}":     "max_ttl",
		"tables: {t: {f: {strategy: one-second, default_ttl: 2d, max_ttl: 1d}}}": "max_ttl",
		"tables: {t: {f: {strategy: sequence, versions: 2, max_ttl: 1d}}}":       "max_ttl",
		"tables: {t: {f: {strategy: sequence, versions: 2, write_time: true}}}":  "write_time",
		"tables: {t: {f: {strategy: one-second, max_ttl: 0s}}}":                  "max_ttl",
		"tables: {t: {f: {strategy: one-second, write_time: yes}}}":              "write_time",
		"tables: {t: {f: {strategy: one-second, Max_TTL: 1d}}}":                  "Max_TTL",
	} {
		_, err := schemafile.Parse([]byte(doc), false)
		var fe *schemafile.Error
		require.ErrorAs(t, err, &fe, doc)
		assert.Equal(t, key, fe.Key, doc)
	}
}
