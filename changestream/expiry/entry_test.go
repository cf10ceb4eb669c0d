package expiry

import (
	"math/rand/v2"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"
)

// An index qualifier gives back its family, column, timestamp and row key,
// whatever bytes they hold (empty, 0xFF, NULs); a qualifier this package
// did not write is refused, not misread.
func TestEntryRoundTrip(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	bytes := func() string {
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	for i := 0; i < 2000; i++ {
		e := entry{family: bytes(), column: bytes(), ts: bigtable.Timestamp(rng.Int64()), row: bytes()}
		got, err := parseEntry(e.qualifier())
		require.NoError(t, err)
		require.Equal(t, e, got)
	}
	for _, q := range []string{"", "\x05ab", "\x01a\x01b1234567", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"} {
		_, err := parseEntry(q)
		require.ErrorIs(t, err, ErrBadEntry, "%q", q)
	}
}
