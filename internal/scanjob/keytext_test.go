package scanjob_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// Ranges and shard keys in scan's messages show keys as every bttl message
// does (internal/keytext): quoted and cut (issue 30 item 7).
func TestScanMessagesQuoteAndCutKeys(t *testing.T) {
	long := strings.Repeat("k", 10<<10)
	r := scan.Range{Start: "a\nb", End: long}
	assert.Equal(t, `["a\nb", "`+strings.Repeat("k", 64)+`"...(10240 bytes))`, r.String())
	assert.Equal(t, `["", end)`, scan.Range{}.String())

	// Unsorted shard keys, refused before any RPC (no table needed).
	_, err := scan.Run(context.Background(), nil, "t", func(context.Context, bigtable.Row) error { return nil },
		scan.WithShard(0, 3), scan.WithShardKeys("b\x00\n", "a"))
	require.ErrorIs(t, err, scan.ErrOption)
	var oe *scan.OptionError
	require.True(t, errors.As(err, &oe))
	assert.Contains(t, err.Error(), `"a" does not sort after "b\x00\n"`)
	assert.NotContains(t, err.Error(), "\n")
}
