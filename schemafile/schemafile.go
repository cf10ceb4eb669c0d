package schemafile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/xhit/go-str2duration/v2"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/strategy"
)

// Family is one family's entry.
type Family struct {
	Strategy    string `json:"strategy" yaml:"strategy"`
	TTL         string `json:"ttl,omitempty" yaml:"ttl,omitempty"`
	DefaultTTL  string `json:"default_ttl,omitempty" yaml:"default_ttl,omitempty"`
	Versions    int    `json:"versions,omitempty" yaml:"versions,omitempty"`
	MaxVersions int    `json:"max_versions,omitempty" yaml:"max_versions,omitempty"`
	SingleValue bool   `json:"single_value,omitempty" yaml:"single_value,omitempty"`
	MaxTTL      string `json:"max_ttl,omitempty" yaml:"max_ttl,omitempty"`
	ClampTTL    bool   `json:"clamp_ttl,omitempty" yaml:"clamp_ttl,omitempty"`
	WriteTime   bool   `json:"write_time,omitempty" yaml:"write_time,omitempty"`
	// IdleTTL is the family's time-to-idle (strategy.WithIdleTTL), on an
	// age strategy.
	IdleTTL string `json:"idle_ttl,omitempty" yaml:"idle_ttl,omitempty"`
	// IdleDebounce is its debounce as a fraction of IdleTTL, in [0, 1)
	// (strategy.WithIdleTTL's debounce); nil for
	// strategy.DefaultIdleDebounce.
	IdleDebounce *float64 `json:"idle_debounce,omitempty" yaml:"idle_debounce,omitempty"`
}

// File is the whole file.
type File struct {
	Tables map[string]map[string]Family `json:"tables" yaml:"tables"`
	// ChangeStreamRetention maps table IDs to a retention or "off"
	// (ChangeStreamKey).
	ChangeStreamRetention map[string]string `json:"change_stream_retention,omitempty" yaml:"change_stream_retention,omitempty"`
}

// UnlistedKey is the family key that gives the policy of every family a
// table's schema does not name: "*" (quoted in YAML, where a bare * starts
// an alias). Its policy must be strategy unmanaged, with no option; see
// Table.Unlisted.
const UnlistedKey = "*"

// Table is one table of the file: its schema, and the policy of the
// families the schema does not name when the file gives one under
// UnlistedKey (nil otherwise: such families are refused, the default).
// Pass a non-nil Unlisted to ttlclient.WithUnlistedFamilies or
// wireguard.WithUnlistedFamilies.
type Table struct {
	Schema   strategy.Schema
	Unlisted *strategy.Policy
	// ChangeStream is the table's entry under ChangeStreamKey: nil when
	// the file gives none (bttl leaves the table's change stream as it
	// is).
	ChangeStream *ChangeStream
}

// ChangeStreamKey is the top-level key giving tables' change streams: a
// mapping of table IDs (of the file's tables) to a retention, between 1
// and 7 days (Bigtable's bounds), or "off":
//
//	change_stream_retention:
//	  sessions: 7d
//	  archive: off
//
// bttl apply enables (or disables) each named table's change stream to
// match and bttl verify checks it (docs/design.md#change-stream-config).
const ChangeStreamKey = "change_stream_retention"

// ChangeStream is what a table's change stream should be.
type ChangeStream struct {
	// Retention is how long Bigtable keeps the stream's records, between
	// 1 and 7 days (truncated to microseconds, as Bigtable truncates it);
	// 0 for "off": the stream is disabled.
	Retention time.Duration
}

// Load reads path: JSON when it ends in .json, YAML otherwise. Errors are
// *Error values naming path, wrapping ErrInvalidFile. It returns the
// tables' schemas alone; LoadTables also returns each table's
// unlisted-families policy.
func Load(path string) (map[string]strategy.Schema, error) {
	return schemas(LoadTables(path))
}

// LoadTables is Load with each table's unlisted-families policy.
func LoadTables(path string) (map[string]Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the Error already
		}
		return nil, &Error{File: path, Offset: -1, Err: err}
	}
	return parse(path, data, strings.EqualFold(filepath.Ext(path), ".json"))
}

// Parse decodes a schema file (JSON if isJSON, else YAML) into one schema
// per table, each validated. Errors are *Error values wrapping
// ErrInvalidFile, with the position (line and column for YAML, byte offset
// as well for JSON) and the table, family and key concerned. ParseTables
// also returns each table's unlisted-families policy.
func Parse(data []byte, isJSON bool) (map[string]strategy.Schema, error) {
	return schemas(ParseTables(data, isJSON))
}

// ParseTables is Parse with each table's unlisted-families policy.
func ParseTables(data []byte, isJSON bool) (map[string]Table, error) {
	return parse("", data, isJSON)
}

// schemas drops the unlisted-families policies: a program given the
// schemas alone refuses writes to unlisted families, the strict default.
func schemas(tables map[string]Table, err error) (map[string]strategy.Schema, error) {
	if err != nil {
		return nil, err
	}
	out := make(map[string]strategy.Schema, len(tables))
	for id, t := range tables {
		out[id] = t.Schema
	}
	return out, nil
}

func parse(file string, data []byte, isJSON bool) (map[string]Table, error) {
	read := readYAML
	if isJSON {
		read = readJSON
	}
	root, err := read(data)
	if err == nil {
		var out map[string]Table
		if out, err = build(root); err == nil {
			return out, nil
		}
	}
	err.File = file
	return nil, err
}

// Policy converts the entry; a mistake wraps strategy.ErrInvalidPolicy.
func (f Family) Policy() (strategy.Policy, error) {
	p, _, err := f.policy()
	return p, err
}

// policy converts the entry and, on a mistake, names the key at fault.
func (f Family) policy() (p strategy.Policy, key string, err error) {
	bad := func(k, format string, a ...any) (strategy.Policy, string, error) {
		return strategy.Policy{}, k, fmt.Errorf("%w: %s", strategy.ErrInvalidPolicy, fmt.Sprintf(format, a...))
	}
	duration := func(k, s string) (time.Duration, error) {
		d, err := ParseDuration(s)
		if err == nil && d <= 0 {
			err = fmt.Errorf("%s must be positive (omit %s for none)", s, k)
		}
		if err != nil {
			return 0, fmt.Errorf("%w: %s", strategy.ErrInvalidPolicy, bttlerr.Trim(err.Error()))
		}
		return d, nil
	}
	if f.Versions < 0 || f.Versions > maxVersions {
		return bad("versions", "versions %d is out of range: between 1 and %d", f.Versions, maxVersions)
	}
	if f.MaxVersions < 0 || f.MaxVersions > maxVersions {
		return bad("max_versions", "max_versions %d is out of range: between 1 and %d", f.MaxVersions, maxVersions)
	}
	// The file can say what the strategy API cannot (an age option on a
	// sequence family, clamp_ttl without max_ttl): each is refused here,
	// naming its key; the options are then built with their types.
	var opts []strategy.AgeOption
	if f.MaxVersions != 0 {
		opts = append(opts, strategy.WithMaxVersions(f.MaxVersions))
	}
	if f.SingleValue {
		opts = append(opts, strategy.SingleValue())
	}
	var maxTTL time.Duration
	if f.ClampTTL && f.MaxTTL == "" {
		return bad("clamp_ttl", "clamp_ttl needs max_ttl")
	}
	if f.MaxTTL != "" {
		d, err := duration("max_ttl", f.MaxTTL)
		if err != nil {
			return strategy.Policy{}, "max_ttl", err
		}
		maxTTL = d
		over := strategy.RefuseLonger
		if f.ClampTTL {
			over = strategy.ClampLonger
		}
		opts = append(opts, strategy.WithMaxTTL(d, over))
	}
	if f.WriteTime {
		opts = append(opts, strategy.WithWriteTime())
	}
	if f.IdleDebounce != nil && f.IdleTTL == "" {
		return bad("idle_debounce", "idle_debounce needs idle_ttl")
	}
	if f.IdleTTL != "" {
		d, err := duration("idle_ttl", f.IdleTTL)
		if err != nil {
			return strategy.Policy{}, "idle_ttl", err
		}
		if d < time.Millisecond {
			return bad("idle_ttl", "idle_ttl %s must be at least 1ms", f.IdleTTL)
		}
		if maxTTL > 0 && d > maxTTL {
			return bad("idle_ttl", "idle_ttl %s is over max_ttl %s", f.IdleTTL, f.MaxTTL)
		}
		debounce := strategy.DefaultIdleDebounce
		if f.IdleDebounce != nil {
			if v := *f.IdleDebounce; !(v >= 0 && v < 1) {
				return bad("idle_debounce", "idle_debounce %g must be a fraction of idle_ttl in [0, 1)", v)
			}
			debounce = *f.IdleDebounce
		}
		opts = append(opts, strategy.WithIdleTTL(d, debounce))
	}
	switch f.Strategy {
	case "one-second":
		var one []strategy.OneSecondOption
		if f.TTL != "" {
			return bad("ttl", "one-second takes default_ttl and max_versions, not ttl")
		}
		if f.Versions != 0 {
			return bad("versions", "one-second takes default_ttl and max_versions, not versions")
		}
		if f.DefaultTTL != "" {
			d, err := duration("default_ttl", f.DefaultTTL)
			if err != nil {
				return strategy.Policy{}, "default_ttl", err
			}
			if maxTTL > 0 && d > maxTTL && !f.ClampTTL {
				return bad("max_ttl", "max_ttl %s is below default_ttl %s", f.MaxTTL, f.DefaultTTL)
			}
			one = append(one, strategy.WithDefaultTTL(d))
		}
		for _, o := range opts {
			one = append(one, o)
		}
		p = strategy.OneSecond(one...)
	case "default-expiry":
		if f.DefaultTTL != "" {
			return bad("default_ttl", "default-expiry takes ttl and max_versions, not default_ttl")
		}
		if f.Versions != 0 {
			return bad("versions", "default-expiry takes ttl and max_versions, not versions")
		}
		if f.TTL == "" {
			return bad("ttl", "default-expiry needs ttl")
		}
		d, err := duration("ttl", f.TTL)
		if err != nil {
			return strategy.Policy{}, "ttl", err
		}
		if maxTTL > 0 && d > maxTTL {
			return bad("max_ttl", "max_ttl %s is below ttl %s, the TTL of every cell written without one", f.MaxTTL, f.TTL)
		}
		p = strategy.DefaultExpiry(d, opts...)
	case "sequence":
		for _, o := range []struct {
			key string
			set bool
		}{{"ttl", f.TTL != ""}, {"default_ttl", f.DefaultTTL != ""}, {"max_versions", f.MaxVersions != 0}, {"single_value", f.SingleValue},
			{"max_ttl", f.MaxTTL != ""}, {"clamp_ttl", f.ClampTTL}, {"write_time", f.WriteTime},
			{"idle_ttl", f.IdleTTL != ""}, {"idle_debounce", f.IdleDebounce != nil}} {
			if o.set {
				return bad(o.key, "sequence takes only versions")
			}
		}
		if f.Versions < 1 {
			return bad("versions", "sequence needs versions >= 1")
		}
		p = strategy.Sequence(f.Versions)
	case "unmanaged":
		if f != (Family{Strategy: "unmanaged"}) {
			return bad("strategy", "unmanaged takes no options")
		}
		p = strategy.Unmanaged()
	case "":
		return bad("strategy", "missing: want one-second, default-expiry, sequence or unmanaged")
	default:
		return bad("strategy", "%q: want one-second, default-expiry, sequence or unmanaged", f.Strategy)
	}
	if err := p.Validate(); err != nil {
		return strategy.Policy{}, f.keyOf(err), err
	}
	return p, "", nil
}

// keyOf is the key of the entry that a policy's validation error is
// about: the parameter its *strategy.PolicyError names, in the file's
// words.
func (f Family) keyOf(err error) string {
	var pe *strategy.PolicyError
	if !errors.As(err, &pe) {
		return "strategy"
	}
	switch pe.Param {
	case strategy.ParamDefaultTTL:
		if f.Strategy == "default-expiry" {
			return "ttl"
		}
		return "default_ttl"
	case strategy.ParamVersions:
		return "versions"
	case strategy.ParamMaxVersions:
		return "max_versions"
	case strategy.ParamIdleTTL:
		return "idle_ttl"
	case strategy.ParamIdleDebounce:
		return "idle_debounce"
	case strategy.ParamMaxTTL:
		return "max_ttl"
	case strategy.ParamOverMaxTTL:
		return "clamp_ttl"
	}
	return "strategy"
}

// ParseDuration reads the file's durations: Go durations (time.ParseDuration)
// with days ("d", 24h) and weeks ("w", 7d) as further units, in any
// combination: "90s", "1h30m", "1d12h", "2w", "1w2d3h", "1.5d".
func ParseDuration(s string) (time.Duration, error) {
	d, err := str2duration.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bttl: invalid duration %q: want a Go duration such as 90s or 1h30m, days and weeks allowed (1d12h, 2w)", s)
	}
	return d, nil
}
