package wireguard_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// Row keys and qualifiers in the guard's refusals
// (docs/design.md#keys-in-messages) (issue 30 item 7).

const (
	secretRow = "alice@example.com"
	secretCol = "bob@example.com"
)

var keysSchema = strategy.Schema{
	"one": strategy.OneSecond(),
	"seq": strategy.Sequence(2),
	"wt":  strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime()),
}

// keysTable is table "keys" of an in-process server, through a plain
// client carrying a guard made with opts.
func keysTable(t *testing.T, opts ...wireguard.Option) (*bigtable.Table, *bttestharness.Harness) {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", "") // the client dials the in-process server with the guard's dial options
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	require.NoError(t, h.CreateTable(context.Background(), "keys", keysSchema))
	g, err := wireguard.New(map[string]strategy.Schema{"keys": keysSchema}, append([]wireguard.Option{wireguard.WithClock(h.Clock)}, opts...)...)
	require.NoError(t, err)
	return guardedClient(t, h.Addr, g).Open("keys"), h
}

// guardRefusals provokes a refusal naming row and column through each
// method the guard checks, and returns them by method.
func guardRefusals(t *testing.T, tbl *bigtable.Table, h *bttestharness.Harness, row, column string) map[string]error {
	t.Helper()
	ctx := context.Background()
	out := map[string]error{}
	bad := bigtable.NewMutation()
	bad.Set("seq", column, 0, []byte("v")) // sequence 0
	out["MutateRow"] = tbl.Apply(ctx, row, bad)

	fine := bigtable.NewMutation()
	fine.Set("seq", "c", 1000, []byte("v"))
	errs, err := tbl.ApplyBulk(ctx, []string{"fine", row}, []*bigtable.Mutation{fine, bad})
	if err == nil {
		require.Len(t, errs, 2)
		err = errs[1]
	}
	out["MutateRows"] = err

	out["CheckAndMutateRow"] = tbl.Apply(ctx, row, bigtable.NewCondMutation(bigtable.PassAllFilter(), bad, nil))

	rmw := bigtable.NewReadModifyWrite()
	rmw.Increment("one", column, 1)
	_, out["ReadModifyWriteRow"] = tbl.ApplyReadModifyWrite(ctx, row, rmw)

	reserved := bigtable.NewMutation()
	reserved.Set("wt", "\xff\xff"+column, bigtable.Time(h.Clock.Now().Add(time.Minute)), []byte("v"))
	out["reserved column"] = tbl.Apply(ctx, row, reserved)
	return out
}

// guardTexts is every text of a refusal a caller could log: the error,
// the status message and the status proto with its details.
func guardTexts(t *testing.T, err error) string {
	t.Helper()
	require.Error(t, err)
	st, ok := status.FromError(err)
	require.True(t, ok, "a gRPC status: %v", err)
	return err.Error() + "\n" + st.Message() + "\n" + prototext.Format(st.Proto())
}

func TestGuardRefusalsShowKeysQuotedAndCut(t *testing.T) {
	tbl, h := keysTable(t)
	for name, err := range guardRefusals(t, tbl, h, secretRow, secretCol) {
		txt := guardTexts(t, err)
		assert.Contains(t, txt, "row "+strconv.Quote(secretRow), name)
		assert.Contains(t, status.Convert(err).Message(), "column "+strconv.Quote(strings.TrimPrefix(columnIn(name), "x")), name)
	}

	forged := "u1\nlevel=ERROR msg=forged"
	for name, err := range guardRefusals(t, tbl, h, forged, "c\"\n\x00") {
		msg := status.Convert(err).Message()
		assert.NotContains(t, msg, "\n", name)
		assert.Contains(t, msg, `row "u1\nlevel=ERROR msg=forged"`, name)
		assert.Contains(t, msg, `\"\n\x00"`, name)
		assert.NotContains(t, guardTexts(t, err), "\x00", name)
	}

	long := strings.Repeat("k", 10<<10)
	for name, err := range guardRefusals(t, tbl, h, long, long) {
		msg := status.Convert(err).Message()
		assert.Contains(t, msg, `row "`+strings.Repeat("k", 64)+`"...(10240 bytes)`, name)
		assert.Less(t, len(guardTexts(t, err)), 2000, name)
	}
}

// columnIn is the column guardRefusals' refusal name names: the reserved
// one starts with 0xFF 0xFF, which the message escapes.
func columnIn(name string) string {
	if name == "reserved column" {
		return "x" + "\xff\xff" + secretCol
	}
	return "x" + secretCol
}

func TestGuardWithKeyRedactionKeepsKeysOutOfRefusals(t *testing.T) {
	hashKey := []byte("the team's secret")
	tbl, h := keysTable(t, wireguard.WithKeyRedaction(hashKey))
	refusals := guardRefusals(t, tbl, h, secretRow, secretCol)
	require.Len(t, refusals, 5)
	for name, err := range refusals {
		txt := guardTexts(t, err)
		for _, secret := range []string{"alice", "bob"} {
			assert.NotContains(t, txt, secret, name)
		}
		assert.Contains(t, status.Convert(err).Message(), "row [redacted 17 bytes hmac:", name)
		assert.Contains(t, txt, "column [redacted ", name)
	}
	// The same key gives the same tag in every refusal, and the same as
	// a ttlclient refusal under the same hash key would show (one
	// formatter, internal/keytext).
	tagOf := func(err error) string {
		msg := status.Convert(err).Message()
		i := strings.Index(msg, "row [redacted ")
		require.GreaterOrEqual(t, i, 0)
		return msg[i : i+strings.Index(msg[i:], "]")+1]
	}
	assert.Equal(t, tagOf(refusals["MutateRow"]), tagOf(refusals["ReadModifyWriteRow"]))
	other := guardRefusals(t, tbl, h, "carol@example.com", secretCol)
	assert.NotEqual(t, tagOf(refusals["MutateRow"]), tagOf(other["MutateRow"]))
}

// The PreconditionFailure detail (which the bigtable client drops, but a
// gRPC caller of the interceptor sees) follows the same choice.
func TestGuardRefusalDetailFollowsTheKeyChoice(t *testing.T) {
	refuse := func(opts ...wireguard.Option) *errdetails.PreconditionFailure_Violation {
		g, err := wireguard.New(map[string]strategy.Schema{"keys": keysSchema}, opts...)
		require.NoError(t, err)
		req := &btpb.MutateRowRequest{TableName: "projects/p/instances/i/tables/keys", RowKey: []byte(secretRow),
			Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: "seq", ColumnQualifier: []byte(secretCol + "\n"), TimestampMicros: 0}}}}}
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			t.Fatal("a refused request was sent")
			return nil
		}
		err = g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/MutateRow", req, &btpb.MutateRowResponse{}, nil, invoker)
		st := status.Convert(err)
		require.Len(t, st.Details(), 2, "a PreconditionFailure, then the ErrorInfo of the refusal registry")
		pf, ok := st.Details()[0].(*errdetails.PreconditionFailure)
		require.True(t, ok)
		require.Len(t, pf.Violations, 1)
		return pf.Violations[0]
	}
	v := refuse()
	assert.Equal(t, `keys/seq:"bob@example.com\n"`, v.Subject)

	v = refuse(wireguard.WithKeyRedaction([]byte("k")))
	assert.Regexp(t, `^keys/seq:\[redacted 16 bytes hmac:[0-9a-f]{12}\]$`, v.Subject)
	assert.NotContains(t, prototext.Format(v), "bob")
	assert.NotContains(t, prototext.Format(v), "alice")
}
