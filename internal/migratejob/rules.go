package migratejob

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/xhit/go-str2duration/v2"
)

// TTLRule gives a TTL to the cells of rows whose key starts with Prefix
// ("" any row) in column Column (a qualifier; "" any column). Used for
// cells written with real timestamps, which carry no TTL of their own.
type TTLRule struct {
	Prefix string
	Column string
	TTL    time.Duration
}

func (r TTLRule) String() string {
	var parts []string
	if r.Prefix != "" {
		parts = append(parts, "prefix="+quoteIfNeeded(r.Prefix))
	}
	if r.Column != "" {
		parts = append(parts, "column="+quoteIfNeeded(r.Column))
	}
	return strings.Join(append(parts, "ttl="+r.TTL.String()), ",")
}

func quoteIfNeeded(s string) string {
	if strings.ContainsAny(s, `,="`) || strconv.Quote(s) != `"`+s+`"` {
		return strconv.Quote(s)
	}
	return s
}

func (r TTLRule) matches(row, column string) bool {
	return strings.HasPrefix(row, r.Prefix) && (r.Column == "" || r.Column == column)
}

// covers reports whether r matches every cell o matches: then o, after r,
// can never apply.
func (r TTLRule) covers(o TTLRule) bool {
	return strings.HasPrefix(o.Prefix, r.Prefix) && (r.Column == "" || r.Column == o.Column)
}

// TTLRules are tried in order; the first that matches a cell gives its TTL.
// A cell no rule matches is not migrated (Validate requires a last rule
// matching every cell, so none is left out by accident).
type TTLRules []TTLRule

// Validate refuses rules that cannot all apply: a TTL below 1ms or not a
// whole number of milliseconds (timestamps are whole milliseconds), a rule
// that an earlier one shadows (it could never match first), and a list
// whose last rule does not match every cell (add a rule with only a TTL).
func (rs TTLRules) Validate() error {
	if len(rs) == 0 {
		return &TTLRuleError{Rule: "(none)", Reason: "at least one rule is needed: cells with real timestamps carry no TTL"}
	}
	for i, r := range rs {
		name := fmt.Sprintf("rule %d (%s)", i+1, r)
		if r.TTL < time.Millisecond || r.TTL%time.Millisecond != 0 {
			return &TTLRuleError{Rule: name, Reason: fmt.Sprintf("TTL %s must be a positive whole number of milliseconds", r.TTL)}
		}
		for j := 0; j < i; j++ {
			if rs[j].covers(r) {
				return &TTLRuleError{Rule: name, Reason: fmt.Sprintf("never applies: rule %d (%s) matches every cell it matches", j+1, rs[j])}
			}
		}
	}
	if last := rs[len(rs)-1]; last.Prefix != "" || last.Column != "" {
		return &TTLRuleError{Rule: fmt.Sprintf("rule %d (%s)", len(rs), last),
			Reason: "the last rule must match every cell (a rule with only a TTL), so that no cell is left without one"}
	}
	return nil
}

// ttlFor is the TTL the first matching rule gives a cell of row in column
// (a qualifier), false when none matches.
func (rs TTLRules) ttlFor(row, column string) (time.Duration, bool) {
	for _, r := range rs {
		if r.matches(row, column) {
			return r.TTL, true
		}
	}
	return 0, false
}

// ParseTTLRule reads a rule as the command line gives it: comma-separated
// key=value pairs, each key at most once, ttl required:
//
//	ttl=30d
//	prefix=user#,ttl=7d
//	prefix=user#,column=session,ttl=12h
//	column="a,b",ttl=1h     (a value with a comma, '=' or '"' is Go-quoted)
//
// Durations are Go durations with days (d) and weeks (w). Only one rule is
// parsed: TTLRules.Validate checks a list.
func ParseTTLRule(s string) (TTLRule, error) {
	bad := func(format string, a ...any) (TTLRule, error) {
		return TTLRule{}, &TTLRuleError{Rule: strconv.Quote(s), Reason: fmt.Sprintf(format, a...)}
	}
	var r TTLRule
	seen := map[string]bool{}
	rest := s
	for {
		key, after, ok := strings.Cut(rest, "=")
		if !ok {
			return bad("want key=value pairs separated by commas (keys: prefix, column, ttl), got %q", rest)
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				return bad("unterminated quoted value %s", after)
			}
			val, _ = strconv.Unquote(q)
			after = after[len(q):]
			if after != "" && !strings.HasPrefix(after, ",") {
				return bad("a comma must follow the quoted value %s", q)
			}
			rest = strings.TrimPrefix(after, ",")
		} else {
			val, rest, _ = strings.Cut(after, ",")
			if strings.ContainsAny(val, `="`) {
				return bad("value %q holds '=' or '\"': quote it", val)
			}
		}
		if seen[key] {
			return bad("%s given twice", key)
		}
		seen[key] = true
		switch key {
		case "prefix":
			if val == "" {
				return bad("empty prefix (leave prefix out to match every row)")
			}
			r.Prefix = val
		case "column":
			if val == "" {
				return bad("empty column (leave column out to match every column)")
			}
			r.Column = val
		case "ttl":
			d, err := str2duration.ParseDuration(val)
			if err != nil {
				return bad("ttl %q: want a duration such as 30d, 12h or 90m", val)
			}
			if d < time.Millisecond || d%time.Millisecond != 0 {
				return bad("ttl %s must be a positive whole number of milliseconds", d)
			}
			r.TTL = d
		default:
			return bad("unknown key %q (keys: prefix, column, ttl)", key)
		}
		if rest == "" && !strings.HasSuffix(s, ",") {
			break
		}
		if rest == "" {
			return bad("trailing comma")
		}
	}
	if !seen["ttl"] {
		return bad("ttl is required")
	}
	return r, nil
}

// strings is each rule's String (nil for none), as a Job records them.
func (rs TTLRules) strings() []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.String())
	}
	return out
}
