package keytext

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuoteEscapesAndKeepsShortKeys(t *testing.T) {
	assert.Equal(t, `"user#1"`, Quote("user#1"))
	assert.Equal(t, `""`, Quote(""))
	// A newline cannot end a log line, nor a quote close the key early.
	assert.Equal(t, `"a\nlevel=ERROR msg=\"forged\""`, Quote("a\nlevel=ERROR msg=\"forged\""))
	// Binary and invalid UTF-8 bytes are escaped.
	assert.Equal(t, `"\x00\xff\xfe\x1b[31m"`, Quote("\x00\xff\xfe\x1b[31m"))
	// Unicode controls that reorder text (right-to-left override) too.
	assert.Equal(t, `"a\u202eb"`, Quote("a\u202eb"))
	// Exactly Limit bytes: not cut.
	k := strings.Repeat("k", Limit)
	assert.Equal(t, strconv.Quote(k), Quote(k))
}

func TestQuoteCutsLongKeysWithTheirLength(t *testing.T) {
	long := strings.Repeat("x", 10<<10)
	got := Quote(long)
	assert.Equal(t, strconv.Quote(strings.Repeat("x", Limit))+"...(10240 bytes)", got)
	assert.Less(t, len(got), 100)

	// A cut does not split a rune: "é" is 2 bytes, so Limit-1 ASCII bytes
	// and then "é" is cut before it.
	k := strings.Repeat("a", Limit-1) + "éé"
	assert.Equal(t, strconv.Quote(strings.Repeat("a", Limit-1))+"...(67 bytes)", Quote(k))

	// Binary data is cut at Limit.
	bin := strings.Repeat("\x80", 2*Limit)
	assert.Equal(t, strconv.Quote(strings.Repeat("\x80", Limit))+"...(128 bytes)", Quote(bin))

	assert.Equal(t, `"ab"...(5 bytes)`, QuoteN("abcde", 2))
}

func TestZeroTextQuotes(t *testing.T) {
	var tx Text
	assert.False(t, tx.Redacts())
	assert.Equal(t, Quote("user@example.com"), tx.Key("user@example.com"))
	assert.Equal(t, "row \"u\"", tx.Scrub("row \"u\"", "u"))
}

func TestRedactHidesKeysAndKeepsTagsComparable(t *testing.T) {
	key := "alice@example.com"
	a := Redact([]byte("secret"))
	require.True(t, a.Redacts())
	got := a.Key(key)
	assert.NotContains(t, got, "alice")
	assert.Regexp(t, `^\[redacted 17 bytes hmac:[0-9a-f]{12}\]$`, got)
	assert.Equal(t, got, Redact([]byte("secret")).Key(key), "same hash key, same key: same tag")
	assert.NotEqual(t, got, a.Key("bob@example.com"), "another key: another tag")
	assert.NotEqual(t, got, Redact([]byte("other")).Key(key), "another hash key: another tag")

	p := Redact(nil)
	assert.Equal(t, p.Key(key), Redact(nil).Key(key), "the process key is drawn once")
	assert.NotEqual(t, got, p.Key(key))
	assert.NotContains(t, p.Key(key), "alice")

	// The caller's hash key is copied: changing it later changes nothing.
	hk := []byte("secret")
	r := Redact(hk)
	hk[0] = 'S'
	assert.Equal(t, got, r.Key(key))
}

func TestScrubReplacesQuotedKeys(t *testing.T) {
	r := Redact([]byte("k"))
	long := strings.Repeat("z", 200)
	msg := "inner: column " + Quote("c\n1") + " of " + Quote(long) + ", family \"f\""
	got := r.Scrub(msg, "c\n1", long, "")
	assert.Equal(t, "inner: column "+r.Key("c\n1")+" of "+r.Key(long)+", family \"f\"", got)
}

// One key's quoted form may hold another's (binary keys hold '"'): each
// is replaced whole, the longer first, so no piece of either is left.
// Fails before the fix: the row, replaced first, cut the column's quoted
// form, which then stayed half in clear ("a\).
func TestScrubReplacesAKeyHoldingAnotherWhole(t *testing.T) {
	r := Redact([]byte("k"))
	row, column := `b"c`, `a"b"c`
	require.Contains(t, Quote(column), Quote(row))
	msg := "inner: column " + Quote(column)
	for _, keys := range [][]string{{row, column}, {column, row}} {
		assert.Equal(t, "inner: column "+r.Key(column), r.Scrub(msg, keys...), "keys %q", keys)
	}
}
