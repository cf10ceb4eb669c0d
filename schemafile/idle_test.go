package schemafile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
)

func TestIdleKeysAccepted(t *testing.T) {
	for _, c := range []struct {
		name string
		doc  string
		json bool
		want strategy.Policy
	}{
		{name: "one-second idle_ttl", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 30m}}}",
			want: strategy.OneSecond(strategy.WithIdleTTL(30*time.Minute, strategy.DefaultIdleDebounce))},
		{name: "default-expiry idle_ttl and debounce", doc: "tables: {t: {f: {strategy: default-expiry, ttl: 1d, idle_ttl: 2d, idle_debounce: 0.25}}}",
			want: strategy.DefaultExpiry(24*time.Hour, strategy.WithIdleTTL(48*time.Hour, 0.25))},
		{name: "debounce 0", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 1h, idle_debounce: 0}}}",
			want: strategy.OneSecond(strategy.WithIdleTTL(time.Hour, 0))},
		{name: "debounce .5", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 1h, idle_debounce: .5}}}",
			want: strategy.OneSecond(strategy.WithIdleTTL(time.Hour, 0.5))},
		{name: "JSON", json: true, doc: `{"tables": {"t": {"f": {"strategy": "one-second", "idle_ttl": "1w", "idle_debounce": 0.1}}}}`,
			want: strategy.OneSecond(strategy.WithIdleTTL(7*24*time.Hour, strategy.DefaultIdleDebounce))},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := schemafile.Parse([]byte(c.doc), c.json)
			require.NoError(t, err)
			assert.Equal(t, map[string]strategy.Schema{"t": {"f": c.want}}, got)
		})
	}
}

func TestIdleKeysRefused(t *testing.T) {
	for _, c := range []struct {
		name, doc, key, msg string
		json                bool
	}{
		{name: "debounce 1", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 1h, idle_debounce: 1}}}", key: "idle_debounce", msg: "in [0, 1)"},
		{name: "debounce 1.5", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 1h, idle_debounce: 1.5}}}", key: "idle_debounce", msg: "in [0, 1)"},
		{name: "negative debounce", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 1h, idle_debounce: -0.1}}}", key: "idle_debounce", msg: "decimal fraction"},
		{name: "debounce exponent", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 1h, idle_debounce: 1e-1}}}", key: "idle_debounce", msg: "decimal fraction"},
		{name: "debounce NaN", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 1h, idle_debounce: .nan}}}", key: "idle_debounce", msg: "decimal fraction"},
		{name: "debounce string", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 1h, idle_debounce: '0.1'}}}", key: "idle_debounce", msg: "decimal fraction"},
		{name: "debounce as a duration", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 1d, idle_debounce: 24h}}}", key: "idle_debounce", msg: "decimal fraction"},
		{name: "debounce without idle_ttl", doc: "tables: {t: {f: {strategy: one-second, idle_debounce: 0.1}}}", key: "idle_debounce", msg: "needs idle_ttl"},
		{name: "idle_ttl zero", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 0s}}}", key: "idle_ttl", msg: "must be positive"},
		{name: "idle_ttl below 1ms", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 10us}}}", key: "idle_ttl", msg: "at least 1ms"},
		{name: "idle_ttl bare number", doc: "tables: {t: {f: {strategy: one-second, idle_ttl: 30}}}", key: "idle_ttl", msg: "invalid duration"},
		{name: "over max_ttl", doc: "tables: {t: {f: {strategy: one-second, max_ttl: 1h, idle_ttl: 2h}}}", key: "idle_ttl", msg: "over max_ttl"},
		{name: "over max_ttl, clamped", doc: "tables: {t: {f: {strategy: one-second, max_ttl: 1h, clamp_ttl: true, idle_ttl: 2h}}}", key: "idle_ttl", msg: "over max_ttl"},
		{name: "sequence", doc: "tables: {t: {f: {strategy: sequence, versions: 2, idle_ttl: 1h}}}", key: "idle_ttl", msg: "sequence takes only versions"},
		{name: "unmanaged", doc: "tables: {t: {f: {strategy: unmanaged, idle_ttl: 1h}}}", key: "strategy", msg: "unmanaged takes no options"},
		{name: "wrong case", doc: "tables: {t: {f: {strategy: one-second, Idle_TTL: 1h}}}", key: "Idle_TTL", msg: `did you mean "idle_ttl"?`},
		{name: "JSON debounce string", json: true, doc: `{"tables": {"t": {"f": {"strategy": "one-second", "idle_ttl": "1h", "idle_debounce": "0.1"}}}}`, key: "idle_debounce", msg: "decimal fraction"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := schemafile.Parse([]byte(c.doc), c.json)
			require.Error(t, err)
			var fe *schemafile.Error
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, c.key, fe.Key)
			assert.Contains(t, err.Error(), c.msg)
			assert.ErrorIs(t, err, schemafile.ErrInvalidFile)
		})
	}
}
