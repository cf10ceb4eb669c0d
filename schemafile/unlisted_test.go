package schemafile_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
)

// "*" gives the policy of the families a table's schema does not name, in YAML
// (quoted) and JSON alike; Load and Parse return the schemas without it; a
// table without "*" has a nil Unlisted (strict) (issue 28).
func TestUnlistedFamiliesKey(t *testing.T) {
	const yamlDoc = `
tables:
  wide:
    session: {strategy: one-second}
    "*": {strategy: unmanaged}
  strict:
    doc: {strategy: sequence, versions: 2}
`
	const jsonDoc = `{"tables": {"wide": {"session": {"strategy": "one-second"}, "*": {"strategy": "unmanaged"}},
  "strict": {"doc": {"strategy": "sequence", "versions": 2}}}}`
	unmanaged := strategy.Unmanaged()
	want := map[string]schemafile.Table{
		"wide":   {Schema: strategy.Schema{"session": strategy.OneSecond()}, Unlisted: &unmanaged},
		"strict": {Schema: strategy.Schema{"doc": strategy.Sequence(2)}},
	}
	for _, c := range []struct {
		doc    string
		isJSON bool
	}{{yamlDoc, false}, {jsonDoc, true}} {
		got, err := schemafile.ParseTables([]byte(c.doc), c.isJSON)
		require.NoError(t, err)
		assert.Equal(t, want, got)

		schemas, err := schemafile.Parse([]byte(c.doc), c.isJSON)
		require.NoError(t, err)
		assert.Equal(t, map[string]strategy.Schema{"wide": want["wide"].Schema, "strict": want["strict"].Schema}, schemas)
	}

	p := filepath.Join(t.TempDir(), "s.yaml")
	require.NoError(t, os.WriteFile(p, []byte(yamlDoc), 0o600))
	got, err := schemafile.LoadTables(p)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// "*" takes strategy unmanaged with no option; anything else is refused
// with the position, table, family and key, and "*" inside a name stays
// an invalid family name.
func TestUnlistedFamiliesKeyRefused(t *testing.T) {
	for name, doc := range map[string]string{
		"managed":                  `tables: {t: {"*": {strategy: one-second}}}`,
		"sequence":                 `tables: {t: {"*": {strategy: sequence, versions: 2}}}`,
		"unmanaged with an option": `tables: {t: {"*": {strategy: unmanaged, write_time: true}}}`,
		"no strategy":              `tables: {t: {"*": null}}`,
		"star in a name":           `tables: {t: {"a*": {strategy: unmanaged}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := schemafile.ParseTables([]byte(doc), false)
			require.Error(t, err)
			assert.ErrorIs(t, err, schemafile.ErrInvalidFile)
			var fe *schemafile.Error
			require.True(t, errors.As(err, &fe))
			assert.Equal(t, "t", fe.Table)
			assert.Positive(t, fe.Line)
		})
	}
	_, err := schemafile.ParseTables([]byte(`tables: {t: {"*": {strategy: one-second, default_ttl: 1h}}}`), false)
	require.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	assert.Contains(t, err.Error(), `"*"`)
}
