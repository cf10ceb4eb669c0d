// Package keytext formats row keys, column qualifiers and other caller data
// (SQL text) for the messages bttl writes: error strings, the wire guard's
// gRPC status messages and their details, log lines
// (docs/design.md#keys-in-messages). Every package prints them through it,
// so the choice is the same everywhere.
//
// By default a key is quoted as strconv.Quote does (control and invalid
// UTF-8 bytes escaped, so a key cannot break a log line or forge one) and
// cut to Limit bytes, with a marker giving the full length. With Redact,
// it is replaced by a marker holding its length and a keyed hash (HMAC-SHA256),
// so two messages about the same key can be matched without the key being
// readable. The struct fields of bttl's errors keep the full values either
// way: this is only about text.
package keytext

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Limit is how many bytes of a key a message shows.
const Limit = 64

// tagBytes is how much of the HMAC a redacted key shows: 48 bits tell
// apart the keys one incident's logs name, and reveal nothing without the
// hash key.
const tagBytes = 6

// Quote is s quoted (strconv.Quote), cut to Limit bytes: a longer s shows
// its first Limit bytes (back to a UTF-8 boundary), then `...(N bytes)`,
// outside the quotes, N its full length.
func Quote(s string) string { return QuoteN(s, Limit) }

// QuoteN is Quote with a limit of n bytes.
func QuoteN(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	cut := n
	// Back to the start of a rune, when one starts within a rune's length:
	// binary data is cut at n.
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			cut = i
			break
		}
	}
	return strconv.Quote(s[:cut]) + "...(" + strconv.Itoa(len(s)) + " bytes)"
}

// Text is the choice of how messages show keys: the zero Text quotes them
// (Quote), a Text from Redact redacts them.
type Text struct {
	redact bool
	key    []byte
}

// processKey is the hash key of Redact(nil): random, drawn once per
// process, so tags match within a process and nowhere else.
var processKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return k
})

// Redact is the Text that shows a key as `[redacted N bytes hmac:T]`: N its
// length, T the first 6 bytes (hex) of HMAC-SHA256 of the key under hashKey.
// Messages about the same key carry the same T for the same hashKey. A nil
// or empty hashKey is a random key drawn once per process: tags then match
// within the process only. There is deliberately no plain hash: a plain
// hash of a low-entropy key (an email, a user ID) is found by hashing
// guesses; a keyed one is not, while hashKey stays secret.
func Redact(hashKey []byte) Text {
	if len(hashKey) == 0 {
		return Text{redact: true}
	}
	return Text{redact: true, key: append([]byte(nil), hashKey...)}
}

// Redacts reports whether t redacts keys.
func (t Text) Redacts() bool { return t.redact }

// Key is s as t shows it.
func (t Text) Key(s string) string { return t.KeyN(s, Limit) }

// KeyN is Key with a quoting limit of n bytes.
func (t Text) KeyN(s string, n int) string {
	if !t.redact {
		return QuoteN(s, n)
	}
	key := t.key
	if key == nil {
		key = processKey()
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return "[redacted " + strconv.Itoa(len(s)) + " bytes hmac:" + hex.EncodeToString(m.Sum(nil)[:tagBytes]) + "]"
}

// Scrub replaces, in msg, each key of keys as Quote shows it with the key
// as t shows it: for the message of a wrapped error (a *filters.PinError
// in a ttlclient.CellError, say) that names a key the outer error names.
// Without redaction msg is returned as is. Empty keys are left alone.
// Longer quoted forms are replaced first: one key's may hold another's
// (keys holding '"'), and replacing the shorter inside it would leave the
// rest of the longer one in clear.
func (t Text) Scrub(msg string, keys ...string) string {
	if !t.redact {
		return msg
	}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = Quote(k)
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(quoted[order[a]]) > len(quoted[order[b]]) })
	for _, i := range order {
		if keys[i] != "" {
			msg = strings.ReplaceAll(msg, quoted[i], t.Key(keys[i]))
		}
	}
	return msg
}
