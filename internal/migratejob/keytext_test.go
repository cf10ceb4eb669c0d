package migratejob_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	migrate "github.com/bttl/bttl/internal/migratejob"
	"github.com/bttl/bttl/strategy"
)

// A failed move names its row and column as every bttl message does
// (internal/keytext): quoted, so a newline in a key cannot forge a log line,
// and cut, so a 4 KiB key does not flood it (issue 30 item 7).
func TestMigrateErrorQuotesAndCutsTheKeys(t *testing.T) {
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"f": strategy.Unmanaged()}))
	refuse := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/google.bigtable.v2.Bigtable/CheckAndMutateRow" {
			return status.Error(codes.PermissionDenied, "no")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c, err := h.DialDataClient(ctx, grpc.WithUnaryInterceptor(refuse))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	tbl := c.Open("t")

	now := h.Clock.Now()
	row := "u1\nlevel=ERROR msg=forged" + strings.Repeat("k", 4000)
	col := "c\x00\n"
	m := bigtable.NewMutation()
	m.Set("f", col, bigtable.Time(now.Add(-time.Hour)), []byte("v"))
	require.NoError(t, tbl.Apply(ctx, row, m))

	h.Clock.Set(now.Add(time.Second))
	mg, err := migrate.New(tbl, "t", inPlace(now, 30*day), migrate.WithClock(h.Clock))
	require.NoError(t, err)
	_, err = mg.Run(ctx)
	require.Error(t, err)
	msg := err.Error()
	assert.Equal(t, 1, strings.Count(msg, "bttl: "), "one prefix (docs/design.md#errors): %s", msg)
	assert.Contains(t, msg, `: migrate row "u1\nlevel=ERROR msg=forged`+strings.Repeat("k", 64-len("u1\nlevel=ERROR msg=forged"))+`"...(`+strconv.Itoa(len(row))+` bytes), 1 cell(s) from column "c\x00\n"`)
	assert.NotContains(t, msg, "\n")
	assert.NotContains(t, msg, strings.Repeat("k", 100))
	assert.Equal(t, codes.PermissionDenied, status.Code(err), "the cause is kept")
}
