package ttlclient_test

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

// rpcCounter counts the data RPCs that reach the server.
type rpcCounter struct{ n atomic.Int64 }

func (c *rpcCounter) options() []grpc.ServerOption {
	isData := func(method string) bool { return strings.HasPrefix(method, "/google.bigtable.v2.Bigtable/") }
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if isData(info.FullMethod) && !strings.HasSuffix(info.FullMethod, "/PingAndWarm") {
				c.n.Add(1)
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if isData(info.FullMethod) {
				c.n.Add(1)
			}
			return h(srv, ss)
		}),
	}
}

func newCountingEnv(t *testing.T, schema strategy.Schema) (*env, *rpcCounter) {
	t.Helper()
	counter := &rpcCounter{}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{ServerOptions: counter.options()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	schema["onedef"] = strategy.OneSecond(strategy.WithDefaultTTL(time.Minute))
	tbl, err := h.Table(context.Background(), "t", schema)
	require.NoError(t, err)
	return &env{h: h, tbl: tbl, ctx: context.Background()}, counter
}

type guardCase struct {
	name   string
	want   error
	family string
	row    string // default "row"
	clock  time.Time
	build  func(m *ttlclient.Mutation)
}

// rowKey is the case's row: "row" by default, "" for "-".
func (c guardCase) rowKey() string {
	switch c.row {
	case "":
		return "row"
	case "-":
		return ""
	}
	return c.row
}

func guardCases() []guardCase {
	set := func(fam string, ts bigtable.Timestamp, opts ...cellOpt) func(*ttlclient.Mutation) {
		return func(m *ttlclient.Mutation) { setCell(m, fam, "c", ts, []byte("v"), opts...) }
	}
	nearMax := time.UnixMicro(int64(strategy.MaxTimestamp) - int64(time.Hour/time.Microsecond))
	return append([]guardCase(nil), []guardCase{
		{name: "server timestamp on one-second family", want: strategy.ErrServerTimestamp, family: famOne, build: set(famOne, bigtable.ServerTime)},
		{name: "server timestamp on sequence family", want: strategy.ErrServerTimestamp, family: famSeq, build: set(famSeq, bigtable.ServerTime)},
		{name: "real timestamp on one-second family", want: strategy.ErrAlreadyExpired, family: famOne, build: set(famOne, 1_700_000_000_000_000)},
		{name: "explicit expired timestamp on default-expiry family", want: strategy.ErrAlreadyExpired, family: famDef, build: set(famDef, 1000)},
		{name: "zero TTL", want: strategy.ErrInvalidTTL, family: famDef, build: set(famDef, bigtable.ServerTime, withTTL(0))},
		{name: "negative TTL", want: strategy.ErrInvalidTTL, family: famOne, build: set(famOne, bigtable.ServerTime, withTTL(-time.Second))},
		{name: "TTL below timestamp precision", want: strategy.ErrInvalidTTL, family: famOne, build: set(famOne, bigtable.ServerTime, withTTL(999*time.Microsecond))},
		{name: "NaN-like TTL from a float conversion", want: strategy.ErrInvalidTTL, family: famDef, build: set(famDef, bigtable.ServerTime, withTTL(time.Duration(math.Inf(1))))},
		{name: "TTL overflowing int64", want: strategy.ErrTimestampOverflow, family: famOne, clock: nearMax, build: set(famOne, bigtable.ServerTime, withTTL(math.MaxInt64))},
		{name: "default-expiry timestamp before the epoch", want: strategy.ErrBeforeEpoch, family: famDef, clock: time.Unix(60, 0), build: set(famDef, bigtable.ServerTime, withTTL(time.Second))},
		{name: "negative explicit timestamp", want: strategy.ErrBeforeEpoch, family: famDef, build: set(famDef, -5000)},
		{name: "sequence zero", want: strategy.ErrInvalidSequence, family: famSeq, build: set(famSeq, bigtable.ServerTime, withSeq(0))},
		{name: "sequence negative", want: strategy.ErrInvalidSequence, family: famSeq, build: set(famSeq, bigtable.ServerTime, withSeq(-3))},
		{name: "sequence overflowing", want: strategy.ErrInvalidSequence, family: famSeq, build: set(famSeq, bigtable.ServerTime, withSeq(math.MaxInt64))},
		{name: "sequence timestamp not a multiple of 1000", want: strategy.ErrInvalidSequence, family: famSeq, build: set(famSeq, 2500)},
		{name: "TTL on sequence family", want: strategy.ErrWrongCellOption, family: famSeq, build: set(famSeq, bigtable.ServerTime, withTTL(time.Hour))},
		{name: "sequence on age family", want: strategy.ErrWrongCellOption, family: famDef, build: set(famDef, bigtable.ServerTime, withSeq(1))},
		{name: "AddToCell on managed family", want: ttlclient.ErrServerAssignedTimestamp, family: famDef, build: func(m *ttlclient.Mutation) {
			m.AddIntToCell(famDef, "c", 0, 1)
		}},
		{name: "MergeToCell on managed family", want: ttlclient.ErrServerAssignedTimestamp, family: famOne, build: func(m *ttlclient.Mutation) {
			m.MergeBytesToCell(famOne, "c", 0, []byte("x"))
		}},
		{name: "family not in schema", want: ttlclient.ErrUnknownFamily, family: "nope", build: set("nope", 1000)},
		{name: "empty family", want: ttlclient.ErrUnknownFamily, build: set("", 1000)},
		{name: "empty row key", want: ttlclient.ErrEmptyRowKey, row: "-", build: set(famPlain, 1000)},
		{name: "row key over 4 KiB", want: ttlclient.ErrRowKeyTooLong, row: strings.Repeat("k", ttlclient.MaxRowKeyBytes+1), build: set(famPlain, 1000)},
		{name: "no operations", want: ttlclient.ErrEmptyMutation, build: func(*ttlclient.Mutation) {}},
		{name: "bad delete range", want: ttlclient.ErrInvalidTimestampRange, family: famDef, build: func(m *ttlclient.Mutation) {
			m.DeleteTimestampRange(famDef, "c", 5000, 2000)
		}},
		{name: "sub-millisecond delete range", want: ttlclient.ErrTimestampGranularity, family: famPlain, build: func(m *ttlclient.Mutation) {
			m.DeleteTimestampRange(famPlain, "c", 1500, 2500)
		}},
		// A valid cell before the refused one: nothing of the row is written.
		{name: "refusal after a valid cell", want: strategy.ErrServerTimestamp, family: famOne, build: func(m *ttlclient.Mutation) {
			m.Set(famPlain, "ok", 1000, []byte("v"))
			m.Set(famOne, "c", bigtable.ServerTime, []byte("v"))
		}},
	}...)
}

// Acceptance 6: every guardrail refuses with its sentinel before any RPC,
// and nothing of the row is written.
func TestGuardrailsRefuseBeforeAnyRPC(t *testing.T) {
	for _, c := range guardCases() {
		t.Run(c.name, func(t *testing.T) {
			e, counter := newCountingEnv(t, mixedSchema())
			if !c.clock.IsZero() {
				e.h.Clock.Set(c.clock)
			}
			row := c.rowKey()
			m := ttlclient.NewMutation()
			c.build(m)
			before := counter.n.Load()
			err := e.tbl.Apply(e.ctx, row, m)
			require.Error(t, err)
			assert.ErrorIs(t, err, c.want)
			var ce *ttlclient.CellError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "t", ce.Table)
			assert.Equal(t, c.family, ce.Family)
			assert.Equal(t, before, counter.n.Load(), "a refused write sent an RPC")
			assertTableEmpty(t, e)
		})
	}
}

// Unmanaged writes, ReadModifyWrite and nil mutations have their own paths.
func TestGuardrailsOnOtherEntryPoints(t *testing.T) {
	e, counter := newCountingEnv(t, mixedSchema())
	before := counter.n.Load()

	err := e.tbl.Apply(e.ctx, "row", nil)
	assert.ErrorIs(t, err, ttlclient.ErrNilMutation)

	for _, fam := range []string{famOne, famDef, famSeq} {
		rmw := ttlclient.NewReadModifyWrite()
		rmw.AppendValue(fam, "c", []byte("x"))
		_, err = e.tbl.ApplyReadModifyWrite(e.ctx, "row", rmw)
		assert.ErrorIs(t, err, ttlclient.ErrServerAssignedTimestamp, fam)
		var ce *ttlclient.CellError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, fam, ce.Family)
	}
	rmw := ttlclient.NewReadModifyWrite()
	rmw.Increment("nope", "c", 1)
	_, err = e.tbl.ApplyReadModifyWrite(e.ctx, "row", rmw)
	assert.ErrorIs(t, err, ttlclient.ErrUnknownFamily)

	inner := ttlclient.NewCondMutation(nil, ttlclient.NewMutation(), nil)
	err = e.tbl.Apply(e.ctx, "row", ttlclient.NewCondMutation(nil, inner, nil))
	assert.ErrorIs(t, err, ttlclient.ErrNestedCondition)

	// Both branches of a conditional mutation are checked.
	bad := ttlclient.NewMutation()
	bad.Set(famOne, "c", bigtable.ServerTime, []byte("v"))
	ok := ttlclient.NewMutation()
	ok.Set(famPlain, "c", 1000, []byte("v"))
	err = e.tbl.Apply(e.ctx, "row", ttlclient.NewCondMutation(nil, ok, bad))
	assert.ErrorIs(t, err, strategy.ErrServerTimestamp)

	assert.Equal(t, before, counter.n.Load(), "a refused call sent an RPC")
	assertTableEmpty(t, e)

	// The family default makes Auto valid on a one-second family.
	m := ttlclient.NewMutation()
	m.Set("onedef", "c", bigtable.ServerTime, []byte("v"))
	require.NoError(t, e.tbl.Apply(e.ctx, "row", m))
	assert.Equal(t, bigtable.Timestamp(e.h.Clock.Now().Add(time.Minute).UnixMicro()), e.storedTimestamp(t, "row", "onedef", "c"))
}

// Acceptance 6 (ApplyBulk): refused rows come back in the per-row errors,
// valid rows are written unchanged.
func TestApplyBulkRefusesOnlyBadRows(t *testing.T) {
	schema := mixedSchema()
	schema["onedef"] = strategy.OneSecond(strategy.WithDefaultTTL(time.Minute)) // as in newCountingEnv
	e := newEnv(t, schema)
	cases := guardCases()
	var keys []string
	var muts []*ttlclient.Mutation
	var wants []error
	for i, c := range cases {
		if !c.clock.IsZero() || c.row != "" {
			continue // needs its own clock or row key
		}
		good := ttlclient.NewMutation()
		good.Set(famDef, "c", bigtable.ServerTime, []byte("good"))
		keys = append(keys, "good"+string(rune('a'+i)))
		muts = append(muts, good)
		wants = append(wants, nil)

		bad := ttlclient.NewMutation()
		c.build(bad)
		keys = append(keys, "bad"+string(rune('a'+i)))
		muts = append(muts, bad)
		wants = append(wants, c.want)
	}
	keys = append(keys, "cond")
	muts = append(muts, ttlclient.NewCondMutation(nil, ttlclient.NewMutation(), nil))
	wants = append(wants, ttlclient.ErrConditionalInBulk)
	keys = append(keys, "nil")
	muts = append(muts, nil)
	wants = append(wants, ttlclient.ErrNilMutation)

	errs, err := e.tbl.ApplyBulk(e.ctx, keys, muts)
	require.NoError(t, err)
	require.Len(t, errs, len(keys))
	for i, want := range wants {
		if want == nil {
			assert.NoError(t, errs[i], keys[i])
			r, err := e.h.Stored(e.ctx, "t", keys[i])
			require.NoError(t, err)
			assert.Len(t, r[famDef], 1, keys[i])
			continue
		}
		assert.ErrorIs(t, errs[i], want, keys[i])
		r, err := e.h.Stored(e.ctx, "t", keys[i])
		require.NoError(t, err)
		assert.Nil(t, r, "refused row %s was written", keys[i])
	}

	// All rows valid: a nil slice, like the raw client.
	good := ttlclient.NewMutation()
	good.Set(famPlain, "c", 1000, []byte("v"))
	errs, err = e.tbl.ApplyBulk(e.ctx, []string{"x", "y"}, []*ttlclient.Mutation{good, good})
	require.NoError(t, err)
	assert.Nil(t, errs)

	_, err = e.tbl.ApplyBulk(e.ctx, []string{"x"}, nil)
	assert.Error(t, err)
}

func assertTableEmpty(t *testing.T, e *env) {
	t.Helper()
	n := 0
	require.NoError(t, e.tbl.Raw().ReadRows(e.ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool {
		n++
		return true
	}))
	assert.Zero(t, n, "the table holds rows")
}

func TestCellErrorNamesTheCell(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := ttlclient.NewMutation()
	m.SetVersion(famSeq, "body", -2, []byte("v"))
	err := e.tbl.Apply(e.ctx, "doc-1", m)
	var ce *ttlclient.CellError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, int64(-2), ce.Sequence)
	msg := err.Error()
	for _, part := range []string{`table "t"`, `row "doc-1"`, `family "seq"`, `column "body"`, "sequence -2", "invalid sequence"} {
		assert.Contains(t, msg, part)
	}
}

func TestOpenRejectsBadSchema(t *testing.T) {
	h := bttestharness.New(t)
	for name, schema := range map[string]strategy.Schema{
		"zero versions":         {"s": strategy.Sequence(0)},
		"default TTL not in ms": {"d": strategy.DefaultExpiry(1500 * time.Microsecond)},
		"bad family name":       {"a b": strategy.OneSecond()},
		"max TTL under D":       {"d": strategy.DefaultExpiry(2*time.Hour, strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger))},
	} {
		_, err := h.Client.Open(context.Background(), "t", schema)
		assert.ErrorIs(t, err, strategy.ErrInvalidPolicy, name)
	}
}
