package schemafile

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/streamconf"
	"github.com/bttl/bttl/strategy"
)

// Bigtable's naming rules, from the admin API: a table ID matches
// [_a-zA-Z0-9][-_.a-zA-Z0-9]* and has at most 50 characters (Table.name,
// CreateTableRequest.table_id); a family name matches [-_.a-zA-Z0-9]+ and
// has at most 64 (Family.name).
var (
	tableIDPattern    = regexp.MustCompile(`^[_a-zA-Z0-9][-_.a-zA-Z0-9]*$`)
	familyNamePattern = regexp.MustCompile(`^[-_.a-zA-Z0-9]+$`)
)

const (
	maxTableIDLen    = 50
	maxFamilyNameLen = 64
	// maxVersions is the largest versions or max_versions value: Bigtable's
	// max-versions GC rule is a 32-bit integer.
	maxVersions = math.MaxInt32
)

var familyKeys = []string{"strategy", "ttl", "default_ttl", "versions", "max_versions", "single_value", "max_ttl", "clamp_ttl", "write_time", "idle_ttl", "idle_debounce"}

// build gives the tree its meaning, checking everything but the policies'
// combination rules (Family.policy) in file order.
func build(root *node) (map[string]Table, *Error) {
	if root == nil || root.kind == kindNull {
		return nil, &Error{Offset: -1, Err: errors.New("empty schema file: it needs a \"tables\" mapping")}
	}
	if root.kind != kindMap {
		return nil, errAt(root.at, fmt.Errorf("want a mapping with the key \"tables\", not %s", root.kind))
	}
	var tables *node
	var streams *entry
	for i, e := range root.entries {
		switch e.key {
		case "tables":
			tables = e.val
		case ChangeStreamKey:
			streams = &root.entries[i]
		default:
			return nil, unknownKey(e, []string{"tables", ChangeStreamKey})
		}
	}
	if tables == nil || tables.kind == kindNull || (tables.kind == kindMap && len(tables.entries) == 0) {
		at := root.at
		if tables != nil {
			at = tables.at
		}
		return nil, errAt(at, errors.New("no tables"))
	}
	if tables.kind != kindMap {
		return nil, errAt(tables.at, fmt.Errorf("tables: want a mapping of table IDs, not %s", tables.kind))
	}
	out := make(map[string]Table, len(tables.entries))
	for _, t := range tables.entries {
		tb, err := buildTable(t)
		if err != nil {
			err.Table = t.key
			return nil, err
		}
		out[t.key] = tb
	}
	if streams != nil {
		if err := buildChangeStreams(*streams, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// buildChangeStreams reads change_stream_retention: a mapping of table IDs
// of the file to a retention between 1 and 7 days (Bigtable's bounds,
// internal/streamconf) or "off".
func buildChangeStreams(e entry, tables map[string]Table) *Error {
	m := e.val
	if m.kind != kindMap {
		return &Error{Line: m.at.line, Column: m.at.col, Offset: m.at.off, Key: ChangeStreamKey,
			Err: fmt.Errorf("want a mapping of table IDs to a retention (1d to 7d) or \"off\", not %s", m.kind)}
	}
	for _, t := range m.entries {
		at := t.val.at
		bad := func(err error) *Error {
			return &Error{Line: at.line, Column: at.col, Offset: at.off, Table: t.key, Key: ChangeStreamKey, Err: err}
		}
		tb, ok := tables[t.key]
		if !ok {
			at = t.at
			return bad(errors.New("table not under tables: the change stream is set for the file's tables only"))
		}
		var cs ChangeStream
		if t.val.kind == kindString && t.val.text == "off" {
			tb.ChangeStream = &cs
			tables[t.key] = tb
			continue
		}
		text, err := durationValue(t.val)
		if err != nil {
			return bad(fmt.Errorf("%w, or \"off\"", err))
		}
		d, err := ParseDuration(text)
		if err == nil {
			err = streamconf.Check(d)
		}
		if err != nil {
			return bad(errors.New(bttlerr.Trim(err.Error())))
		}
		cs.Retention = d.Truncate(time.Microsecond)
		tb.ChangeStream = &cs
		tables[t.key] = tb
	}
	return nil
}

func buildTable(t entry) (Table, *Error) {
	if err := checkName("table ID", t.key, tableIDPattern, "[_a-zA-Z0-9][-_.a-zA-Z0-9]*", maxTableIDLen); err != nil {
		return Table{}, errAt(t.at, err)
	}
	fams := t.val
	if fams.kind == kindNull || (fams.kind == kindMap && len(fams.entries) == 0) {
		return Table{}, errAt(t.at, errors.New("no families"))
	}
	if fams.kind != kindMap {
		return Table{}, errAt(fams.at, fmt.Errorf("want a mapping of column families, not %s", fams.kind))
	}
	out := Table{Schema: make(strategy.Schema, len(fams.entries))}
	for _, f := range fams.entries {
		p, err := buildFamily(f)
		if err != nil {
			err.Family = f.key
			return Table{}, err
		}
		if f.key == UnlistedKey {
			out.Unlisted = &p
			continue
		}
		out.Schema[f.key] = p
	}
	return out, nil
}

func buildFamily(f entry) (strategy.Policy, *Error) {
	unlisted := f.key == UnlistedKey
	if err := checkName("family name", f.key, familyNamePattern, "[-_.a-zA-Z0-9]+", maxFamilyNameLen); err != nil && !unlisted {
		return strategy.Policy{}, errAt(f.at, err)
	}
	if f.val.kind == kindNull {
		return strategy.Policy{}, &Error{Line: f.at.line, Column: f.at.col, Offset: f.at.off, Key: "strategy",
			Err: fmt.Errorf("%w: missing", strategy.ErrInvalidPolicy)}
	}
	if f.val.kind != kindMap {
		return strategy.Policy{}, errAt(f.val.at, fmt.Errorf("want a mapping with a strategy, not %s", f.val.kind))
	}
	var fam Family
	where := map[string]pos{}
	for _, e := range f.val.entries {
		where[e.key] = e.val.at
		keyErr := func(err error) (strategy.Policy, *Error) {
			return strategy.Policy{}, &Error{Line: e.val.at.line, Column: e.val.at.col, Offset: e.val.at.off, Key: e.key, Err: err}
		}
		var err error
		switch e.key {
		case "strategy":
			fam.Strategy, err = stringValue(e.val)
		case "ttl":
			fam.TTL, err = durationValue(e.val)
		case "default_ttl":
			fam.DefaultTTL, err = durationValue(e.val)
		case "versions":
			fam.Versions, err = intValue(e.val)
		case "max_versions":
			fam.MaxVersions, err = intValue(e.val)
		case "single_value":
			fam.SingleValue, err = boolValue(e.val)
		case "max_ttl":
			fam.MaxTTL, err = durationValue(e.val)
		case "clamp_ttl":
			fam.ClampTTL, err = boolValue(e.val)
		case "write_time":
			fam.WriteTime, err = boolValue(e.val)
		case "idle_ttl":
			fam.IdleTTL, err = durationValue(e.val)
		case "idle_debounce":
			var v float64
			if v, err = fractionValue(e.val); err == nil {
				fam.IdleDebounce = &v
			}
		default:
			return strategy.Policy{}, unknownKey(e, familyKeys)
		}
		if err != nil {
			return keyErr(err)
		}
	}
	p, key, err := fam.policy()
	switch {
	case err == nil && unlisted:
		if p != strategy.Unmanaged() {
			key = "strategy"
			err = fmt.Errorf("%w: %q (the families the schema does not name) takes strategy unmanaged with no option, not %s", strategy.ErrInvalidPolicy, UnlistedKey, fam.Strategy)
		}
	case err == nil:
		// Also strategy's own rules for a schema (family names included).
		err = strategy.Schema{f.key: p}.Validate()
	}
	if err != nil {
		at, ok := where[key]
		if !ok {
			at = f.at
		}
		return strategy.Policy{}, &Error{Line: at.line, Column: at.col, Offset: at.off, Key: key, Err: err}
	}
	return p, nil
}

func checkName(what, name string, pattern *regexp.Regexp, rule string, maxLen int) error {
	if !pattern.MatchString(name) {
		return fmt.Errorf("invalid %s %q: Bigtable's rule is %s", what, name, rule)
	}
	if len(name) > maxLen {
		return fmt.Errorf("invalid %s %q: %d characters, Bigtable allows at most %d", what, name, len(name), maxLen)
	}
	return nil
}

func unknownKey(e entry, known []string) *Error {
	msg := fmt.Sprintf("unknown key (known keys: %s)", strings.Join(known, ", "))
	for _, k := range known {
		if strings.EqualFold(k, e.key) {
			msg = fmt.Sprintf("unknown key: keys are case-sensitive, did you mean %q?", k)
		}
	}
	return &Error{Line: e.at.line, Column: e.at.col, Offset: e.at.off, Key: e.key, Err: errors.New(msg)}
}

func stringValue(n *node) (string, error) {
	if n.kind != kindString {
		return "", fmt.Errorf("want a string, not %s", n.kind)
	}
	return n.text, nil
}

// durationValue takes the text of a duration; ParseDuration checks it
// later, a bare number included ("missing unit").
func durationValue(n *node) (string, error) {
	if n.kind != kindString && n.kind != kindNumber {
		return "", fmt.Errorf("want a duration such as 90s, 1h30m or 1d12h, not %s", n.kind)
	}
	if n.text == "" {
		return "", errors.New("want a duration such as 90s, 1h30m or 1d12h, not an empty string")
	}
	return n.text, nil
}

var decimalInt = regexp.MustCompile(`^[-+]?[0-9]+$`)

// intValue reads a decimal integer exactly as written: no fraction, no
// exponent, no other base, and no leading zero (YAML 1.1 reads 017 as
// octal 15, YAML 1.2 as 17: refused rather than guessed).
func intValue(n *node) (int, error) {
	if n.kind != kindNumber {
		return 0, fmt.Errorf("want a whole number, not %s", n.kind)
	}
	s := n.text
	if !decimalInt.MatchString(s) {
		return 0, fmt.Errorf("want a whole number in decimal, not %s", s)
	}
	digits := strings.TrimLeft(s, "+-")
	if len(digits) > 1 && digits[0] == '0' {
		return 0, fmt.Errorf("%s has a leading zero (octal in YAML 1.1): write it without", s)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v > maxVersions {
		return 0, fmt.Errorf("%w: %s is out of range: at most %d (Bigtable's versions are a 32-bit integer)", strategy.ErrInvalidPolicy, s, maxVersions)
	}
	if v < 1 {
		return 0, fmt.Errorf("%w: %s is out of range: at least 1", strategy.ErrInvalidPolicy, s)
	}
	return int(v), nil
}

var decimalFraction = regexp.MustCompile(`^(0|[1-9][0-9]*)?(\.[0-9]+)?$`)

// fractionValue reads a plain decimal number such as 0.1 or 0: no sign, no
// exponent, no NaN or infinity, nothing YAML 1.1 and 1.2 would read apart.
func fractionValue(n *node) (float64, error) {
	if n.kind != kindNumber || n.text == "" || n.text == "." || !decimalFraction.MatchString(n.text) {
		return 0, fmt.Errorf("want a decimal fraction such as 0.1, not %s %q", n.kind, n.text)
	}
	v, err := strconv.ParseFloat(n.text, 64)
	if err != nil {
		return 0, fmt.Errorf("want a decimal fraction such as 0.1, not %q", n.text)
	}
	return v, nil
}

func boolValue(n *node) (bool, error) {
	if n.kind == kindBool {
		switch n.text {
		case "true", "True", "TRUE":
			return true, nil
		case "false", "False", "FALSE":
			return false, nil
		}
	}
	return false, fmt.Errorf("want true or false, not %s %q", n.kind, n.text)
}
