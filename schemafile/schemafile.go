package schemafile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bttl/bttl/strategy"
)

// ErrInvalidFile: the file cannot be read as a schema file. Errors about a
// policy wrap strategy.ErrInvalidPolicy as well.
var ErrInvalidFile = errors.New("bttl: invalid schema file")

// Family is one family's entry.
type Family struct {
	Strategy    string `json:"strategy" yaml:"strategy"`
	TTL         string `json:"ttl,omitempty" yaml:"ttl,omitempty"`
	DefaultTTL  string `json:"default_ttl,omitempty" yaml:"default_ttl,omitempty"`
	Versions    int    `json:"versions,omitempty" yaml:"versions,omitempty"`
	MaxVersions int    `json:"max_versions,omitempty" yaml:"max_versions,omitempty"`
	SingleValue bool   `json:"single_value,omitempty" yaml:"single_value,omitempty"`
}

// File is the whole file.
type File struct {
	Tables map[string]map[string]Family `json:"tables" yaml:"tables"`
}

// Load reads path: JSON when it ends in .json, YAML otherwise.
func Load(path string) (map[string]strategy.Schema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidFile, err)
	}
	return Parse(data, strings.EqualFold(filepath.Ext(path), ".json"))
}

// Parse decodes a schema file (JSON if isJSON, else YAML) into one schema
// per table, each validated.
func Parse(data []byte, isJSON bool) (map[string]strategy.Schema, error) {
	var f File
	if isJSON {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidFile, err)
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidFile, err)
		}
	}
	if len(f.Tables) == 0 {
		return nil, fmt.Errorf("%w: no tables", ErrInvalidFile)
	}
	out := make(map[string]strategy.Schema, len(f.Tables))
	for table, fams := range f.Tables {
		if table == "" || len(fams) == 0 {
			return nil, fmt.Errorf("%w: table %q has no families", ErrInvalidFile, table)
		}
		s := make(strategy.Schema, len(fams))
		for name, fam := range fams {
			p, err := fam.Policy()
			if err != nil {
				return nil, fmt.Errorf("%w: table %q, family %q: %w", ErrInvalidFile, table, name, err)
			}
			s[name] = p
		}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("%w: table %q: %w", ErrInvalidFile, table, err)
		}
		out[table] = s
	}
	return out, nil
}

// Policy converts the entry.
func (f Family) Policy() (strategy.Policy, error) {
	bad := func(format string, a ...any) (strategy.Policy, error) {
		return strategy.Policy{}, fmt.Errorf("%w: %s", strategy.ErrInvalidPolicy, fmt.Sprintf(format, a...))
	}
	var opts []strategy.Option
	if f.MaxVersions != 0 {
		opts = append(opts, strategy.WithMaxVersions(f.MaxVersions))
	}
	if f.SingleValue {
		opts = append(opts, strategy.SingleValue())
	}
	switch f.Strategy {
	case "one-second":
		if f.TTL != "" || f.Versions != 0 {
			return bad("one-second takes default_ttl and max_versions, not ttl or versions")
		}
		if f.DefaultTTL != "" {
			d, err := ParseDuration(f.DefaultTTL)
			if err != nil {
				return bad("default_ttl: %v", err)
			}
			opts = append(opts, strategy.WithDefaultTTL(d))
		}
		return strategy.OneSecond(opts...), nil
	case "default-expiry":
		if f.DefaultTTL != "" || f.Versions != 0 {
			return bad("default-expiry takes ttl and max_versions, not default_ttl or versions")
		}
		if f.TTL == "" {
			return bad("default-expiry needs ttl")
		}
		d, err := ParseDuration(f.TTL)
		if err != nil {
			return bad("ttl: %v", err)
		}
		return strategy.DefaultExpiry(d, opts...), nil
	case "sequence":
		if f.TTL != "" || f.DefaultTTL != "" || f.MaxVersions != 0 || f.SingleValue {
			return bad("sequence takes only versions")
		}
		if f.Versions < 1 {
			return bad("sequence needs versions >= 1")
		}
		return strategy.Sequence(f.Versions), nil
	case "unmanaged":
		if f != (Family{Strategy: "unmanaged"}) {
			return bad("unmanaged takes no options")
		}
		return strategy.Unmanaged(), nil
	}
	return bad("strategy %q: want one-second, default-expiry, sequence or unmanaged", f.Strategy)
}

// ParseDuration is time.ParseDuration plus whole days ("7d").
func ParseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days < 0 || days > int64(1<<63-1)/int64(24*time.Hour) {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}
