package migratejob

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTTLRule(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		in   string
		want TTLRule
	}{
		{"ttl=30d", TTLRule{TTL: 30 * day}},
		{"prefix=user#,ttl=7d", TTLRule{Prefix: "user#", TTL: 7 * day}},
		{"column=session,prefix=u,ttl=1h30m", TTLRule{Prefix: "u", Column: "session", TTL: 90 * time.Minute}},
		{`column="a,b=c",ttl=2w`, TTLRule{Column: "a,b=c", TTL: 14 * day}},
		{`prefix="x\"y",ttl=1ms`, TTLRule{Prefix: `x"y`, TTL: time.Millisecond}},
	} {
		got, err := ParseTTLRule(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
		back, err := ParseTTLRule(got.String())
		require.NoError(t, err, "String() of %q is %q", c.in, got.String())
		assert.Equal(t, got, back, "round trip of %q", c.in)
	}
	for _, in := range []string{
		"", "30d", "ttl=", "ttl=soon", "ttl=0", "ttl=-1h", "ttl=1500us", "prefix=a", "ttl=1h,ttl=2h",
		"prefix=,ttl=1h", "column=,ttl=1h", "ttl=1h,", "colour=red,ttl=1h", `column="a,ttl=1h`,
		`column="a"b,ttl=1h`, "column=a=b,ttl=1h", ",ttl=1h",
	} {
		_, err := ParseTTLRule(in)
		require.Error(t, err, "%q", in)
		assert.ErrorIs(t, err, ErrInvalidTTLRule, "%q", in)
		var re *TTLRuleError
		assert.ErrorAs(t, err, &re, "%q", in)
	}
}

func TestTTLRulesValidateAndMatch(t *testing.T) {
	h := time.Hour
	rules := TTLRules{
		{Prefix: "user#", Column: "session", TTL: h},
		{Prefix: "user#", TTL: 2 * h},
		{Column: "session", TTL: 3 * h},
		{TTL: 4 * h},
	}
	require.NoError(t, rules.Validate())
	for _, c := range []struct {
		row, col string
		want     time.Duration
	}{
		{"user#1", "session", h}, {"user#1", "name", 2 * h}, {"order#1", "session", 3 * h}, {"order#1", "x", 4 * h},
	} {
		got, ok := rules.ttlFor(c.row, c.col)
		assert.True(t, ok)
		assert.Equal(t, c.want, got, "%s %s", c.row, c.col)
	}
	for name, rs := range map[string]TTLRules{
		"empty":          nil,
		"no catch-all":   {{Prefix: "a", TTL: h}},
		"shadowed":       {{Prefix: "a", TTL: h}, {Prefix: "ab", TTL: h}, {TTL: h}},
		"after all":      {{TTL: h}, {Prefix: "a", TTL: h}},
		"duplicate":      {{Column: "c", TTL: h}, {Column: "c", TTL: 2 * h}, {TTL: h}},
		"sub-ms":         {{TTL: h + time.Microsecond}},
		"zero":           {{TTL: 0}},
		"column shadows": {{Column: "c", TTL: h}, {Prefix: "p", Column: "c", TTL: h}, {TTL: h}},
	} {
		err := rs.Validate()
		var re *TTLRuleError
		assert.True(t, errors.As(err, &re) && errors.Is(err, ErrInvalidTTLRule), "%s: %v", name, err)
	}
}
