package schemafile_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/bttl/bttl/schemafile"
)

// FuzzParse: whatever the bytes, Parse does not panic, gives the same
// answer twice (errors are found in file order, not map order), and either
// returns valid schemas or a *Error wrapping ErrInvalidFile with one
// "bttl:" prefix at the start.
func FuzzParse(f *testing.F) {
	f.Add([]byte(yamlDoc), false)
	f.Add([]byte(jsonDoc), true)
	if data, err := os.ReadFile("testdata/events.yaml"); err == nil {
		f.Add(data, false)
	}
	for _, c := range badCases {
		f.Add([]byte(c.doc), c.json)
	}
	f.Add([]byte("a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"), false)
	f.Add([]byte("tables: {t: {f: &f {strategy: unmanaged, <<: *f}}}"), false)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		got, err := schemafile.Parse(data, isJSON)
		again, err2 := schemafile.Parse(data, isJSON)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("two parses differ: %v / %v", err, err2)
		}
		if err != nil {
			var e *schemafile.Error
			if !errors.As(err, &e) || !errors.Is(err, schemafile.ErrInvalidFile) {
				t.Fatalf("not a *schemafile.Error wrapping ErrInvalidFile: %#v", err)
			}
			if !strings.HasPrefix(err.Error(), "bttl: invalid schema file") {
				t.Fatalf("message: %q", err)
			}
			return
		}
		if len(got) == 0 || len(again) != len(got) {
			t.Fatalf("accepted with %d tables", len(got))
		}
		for table, s := range got {
			if table == "" || len(table) > 50 || len(s) == 0 {
				t.Fatalf("accepted table %q with %d families", table, len(s))
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("accepted an invalid schema for %q: %v", table, err)
			}
		}
	})
}
