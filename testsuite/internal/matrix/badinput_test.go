package matrix_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// dataCalls counts the Bigtable data RPCs that reach the server.
type dataCalls struct{ n atomic.Int64 }

func (c *dataCalls) options() []grpc.ServerOption {
	count := func(method string) {
		if strings.HasPrefix(method, "/google.bigtable.v2.Bigtable/") && !strings.HasSuffix(method, "/PingAndWarm") {
			c.n.Add(1)
		}
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			count(info.FullMethod)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			count(info.FullMethod)
			return h(srv, ss)
		}),
	}
}

// nanLike are durations that float conversions produce from NaN, the
// infinities and out-of-range values (implementation-defined in Go; on
// amd64 they all become math.MinInt64).
func nanLike() map[string]time.Duration {
	conv := func(f float64) time.Duration { return time.Duration(f) }
	return map[string]time.Duration{
		"NaN":   conv(math.NaN()),
		"+Inf":  conv(math.Inf(1)),
		"-Inf":  conv(math.Inf(-1)),
		"1e300": conv(1e300),
		"NaN seconds": func() time.Duration {
			secs := math.NaN()
			//lint:ignore SA4012 a NaN product is the input under test
			return time.Duration(secs * float64(time.Second))
		}(),
	}
}

// Acceptance 4 (bad input): hostile inputs through the public API, in
// Apply, ApplyBulk and a conditional mutation's branch: each is refused
// with a typed error (sentinel and *ttlclient.CellError) and no RPC is
// sent, so the raw client sees an empty table.
func TestBadInputRefusedBeforeAnyRPC(t *testing.T) {
	calls := &dataCalls{}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{ServerOptions: calls.options()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	schema := strategy.Schema{
		"one":   strategy.OneSecond(),
		"def":   strategy.DefaultExpiry(time.Hour),
		"seq":   strategy.Sequence(3),
		"plain": strategy.Unmanaged(),
	}
	tbl := h.MustTable(t, "bad", schema)
	ctx := context.Background()
	huge := make([]byte, ttlclient.MaxValueBytes+1)
	endOfTime := time.UnixMicro(int64(strategy.MaxTimestamp) - int64(time.Minute/time.Microsecond))

	type bad struct {
		name  string
		row   string // default "row"
		clock time.Time
		build func(m *ttlclient.Mutation) // nil: a nil mutation
		want  error
	}
	set := func(fam string, ts bigtable.Timestamp, value []byte) func(*ttlclient.Mutation) {
		return func(m *ttlclient.Mutation) { m.Set(fam, "c", ts, value) }
	}
	setTTL := func(fam string, ttl time.Duration) func(*ttlclient.Mutation) {
		return func(m *ttlclient.Mutation) { m.SetTTL(fam, "c", ttl, []byte("v")) }
	}
	setVersion := func(fam string, seq int64) func(*ttlclient.Mutation) {
		return func(m *ttlclient.Mutation) { m.SetVersion(fam, "c", seq, []byte("v")) }
	}
	v := []byte("v")
	const noRow = "\x00none"
	cases := []bad{
		{name: "empty family", build: set("", 1000, v), want: ttlclient.ErrUnknownFamily},
		{name: "unknown family", build: set("nope", 1000, v), want: ttlclient.ErrUnknownFamily},
		{name: "empty row key", row: noRow, build: set("plain", 1000, v), want: ttlclient.ErrEmptyRowKey},
		{name: "row key over 4 KiB", row: strings.Repeat("k", ttlclient.MaxRowKeyBytes+1), build: set("plain", 1000, v), want: ttlclient.ErrRowKeyTooLong},
		{name: "value over 100 MiB", build: set("def", bigtable.ServerTime, huge), want: ttlclient.ErrValueTooLarge},
		{name: "TTL of 0", build: setTTL("def", 0), want: strategy.ErrInvalidTTL},
		{name: "negative TTL", build: setTTL("one", -time.Hour), want: strategy.ErrInvalidTTL},
		{name: "huge TTL overflowing the timestamp", clock: endOfTime, build: setTTL("one", math.MaxInt64), want: strategy.ErrTimestampOverflow},
		{name: "math.MaxInt64 sequence", build: setVersion("seq", math.MaxInt64), want: strategy.ErrInvalidSequence},
		{name: "math.MinInt64 sequence", build: setVersion("seq", math.MinInt64), want: strategy.ErrInvalidSequence},
		{name: "nil mutation", want: ttlclient.ErrNilMutation},
		{name: "mutation with no operations", build: func(*ttlclient.Mutation) {}, want: ttlclient.ErrEmptyMutation},
	}
	for name, d := range nanLike() {
		c := bad{name: "TTL from a " + name + " conversion", build: setTTL("def", d), want: strategy.ErrInvalidTTL}
		if d >= time.Millisecond {
			// A platform that saturates to math.MaxInt64 instead: a
			// 292-year TTL is valid today, so check it where it overflows.
			c.clock, c.want = endOfTime, strategy.ErrTimestampOverflow
		}
		cases = append(cases, c)
	}
	// The operations' own checks behind a valid first operation: nothing of
	// the row is sent.
	for _, c := range cases {
		if c.build == nil || c.want == ttlclient.ErrEmptyMutation || c.row != "" || !c.clock.IsZero() {
			continue
		}
		inner := c.build
		cases = append(cases, bad{name: c.name + " after a valid cell", want: c.want, build: func(m *ttlclient.Mutation) {
			m.Set("plain", "ok", 1000, v)
			inner(m)
		}})
	}

	realNow := h.Clock.Now()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := c.row
			switch row {
			case "":
				row = "row"
			case noRow:
				row = ""
			}
			var mut *ttlclient.Mutation
			if c.build != nil {
				mut = ttlclient.NewMutation()
				c.build(mut)
			}
			h.Clock.Set(realNow)
			if !c.clock.IsZero() {
				h.Clock.Set(c.clock)
			}
			before := calls.n.Load()

			err := tbl.Apply(ctx, row, mut)
			requireTyped(t, err, c.want)

			errs, err := tbl.ApplyBulk(ctx, []string{row}, []*ttlclient.Mutation{mut})
			require.NoError(t, err, "a refused row is reported per row")
			require.Len(t, errs, 1)
			requireTyped(t, errs[0], c.want)

			if mut != nil && c.want != ttlclient.ErrEmptyMutation {
				// As a conditional mutation's false branch.
				requireTyped(t, tbl.Apply(ctx, row, ttlclient.NewCondMutation(nil, nil, mut)), c.want)
			}
			require.Equal(t, before, calls.n.Load(), "a refused call sent an RPC")
		})
	}
	h.Clock.Set(realNow)
	n := 0
	require.NoError(t, tbl.Raw().ReadRows(ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { n++; return true }))
	assert.Zero(t, n, "the raw client sees rows: something was written")

	// A schema with an intersection rule: no read filter reproduces one.
	t.Run("schema with an intersection rule", func(t *testing.T) {
		require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "inter", ColumnFamilies: map[string]bigtable.Family{
			"def": {GCPolicy: bigtable.IntersectionPolicy(bigtable.MaxAgePolicy(time.Hour), bigtable.MaxVersionsPolicy(2))},
		}}))
		_, err := h.Client.Open(context.Background(), "inter", strategy.Schema{"def": strategy.DefaultExpiry(time.Hour)})
		assert.ErrorIs(t, err, strategy.ErrUnsupportedGCRule)
	})
}

func requireTyped(t *testing.T, err, want error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, want)
	var ce *ttlclient.CellError
	require.True(t, errors.As(err, &ce), "not a *ttlclient.CellError: %v", err)
	require.Equal(t, "bad", ce.Table)
}
