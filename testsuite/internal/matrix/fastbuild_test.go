package matrix_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/matrix"
)

// ttlclient builds a plain Mutation's request from its changes directly
// (rules.Table.StampOps, then rules.SendOps: one call of the client's
// own methods per change) unless StampOps says the rules add to the row;
// the general path (rules.Protos, StampOwned, Complete, ToBigtable) is
// what a conditional branch and a completed row take. For random rows of
// every option column's schema (with and without unlisted families), the
// fast path must give what the general path gives: the same refusal, or
// the same request on the wire, byte for byte; and when StampOps says
// nothing is added, Complete adds nothing.
func TestFastBuildSendsWhatTheGeneralPathSends(t *testing.T) {
	seed, _ := settings(t)
	t.Logf("seed %d (replay with BTTL_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	capture := newCaptureClient(t)
	now := time.UnixMicro(1_800_000_000_123_456)
	unmanaged := strategy.Unmanaged()

	var fast, general, refused, overLimit int
	for _, opt := range matrix.FamilyOptions {
		schema, fams, _ := matrix.MatrixSchema(opt)
		for _, unlisted := range []*strategy.Policy{nil, &unmanaged} {
			tbl, err := rules.NewTable("t", schema, unlisted, rules.ModeClient, nil)
			require.NoError(t, err, opt.Name)
			for row := range 200 {
				ops := randomOps(rng, fams)
				// One row in four under a request limit of 3 mutations, so
				// both paths' limit (StampOps' and Complete's) refuse some
				// rows of the draw (a clean row has 1 to 6 changes) and pass others.
				limited := rng.IntN(4) == 0
				restore := func() {}
				if limited {
					restore = rules.SetRequestLimitForTest(3)
				}
				name := func() string {
					return fmt.Sprintf("%s (unlisted %v, limited %v) row %d", opt.Name, unlisted != nil, limited, row)
				}

				sent := make([]bigtable.Timestamp, len(ops))
				complete, fr := tbl.StampOps(now, ops, sent)

				ps := rules.Protos(ops)
				gr := tbl.StampOwned(now, ps.Mutations, ps.Intents)
				var out []*btpb.Mutation
				if gr == nil {
					out, gr = tbl.Complete(now, ps.Mutations)
				}
				switch {
				case fr != nil:
					refused++
					if errors.Is(fr.Err, rules.ErrTooManyMutations) {
						overLimit++
					}
					require.NotNil(t, gr, "%s: the fast path refused %v, the general path did not (ops %+v)", name(), fr, ops)
					assert.Equal(t, gr.Err.Error(), fr.Err.Error(), name())
					assert.Same(t, gr.Reason, fr.Reason, name())
					assert.Equal(t, gr.Index, fr.Index, name())
					assert.Equal(t, gr.Family, fr.Family, name())
					assert.Equal(t, gr.Named, fr.Named, name())
					assert.Equal(t, string(gr.Column), string(fr.Column), name())
					assert.Equal(t, gr.Timestamp, fr.Timestamp, name())
					assert.Equal(t, gr.TTL, fr.TTL, name())
					assert.Equal(t, gr.Seq, fr.Seq, name())
				case complete:
					general++ // ttlclient sends the general path's request: nothing to compare
				default:
					fast++
					require.Nil(t, gr, "%s: the general path refused %v, the fast path did not (ops %+v)", name(), gr, ops)
					require.True(t, rules.Same(out, ps.Mutations), "%s: StampOps said nothing is added, Complete added %d", name(), len(out)-len(ops))
					for i, m := range ps.Mutations {
						if s := m.GetSetCell(); s != nil {
							assert.Equal(t, bigtable.Timestamp(s.GetTimestampMicros()), sent[i], "%s: change %d", name(), i)
						}
					}
					want := capture.sent(t, rules.ToBigtable(out))
					got := capture.sent(t, rules.SendOps(ops, sent))
					require.Equal(t, want, got, "%s: the requests differ (ops %+v)", name(), ops)
				}
				ps.Release()
				restore()
			}
		}
	}
	t.Logf("%d rows by the fast path, %d completed by the general path, %d refused (%d over the request limit)", fast, general, refused, overLimit)
	// The draw must exercise all three, or the test compares nothing.
	assert.Positive(t, fast)
	assert.Positive(t, general)
	assert.Positive(t, refused)
	assert.Positive(t, overLimit)
}

// randomOps is a row of 1 to 12 changes over fams, every kind; one row
// in three is dirty: a family no schema names, reserved qualifiers,
// timestamps and intents valid or not. A clean row is mostly accepted.
func randomOps(rng *rand.Rand, fams []string) []rules.Op {
	dirty := rng.IntN(3) == 0
	pick := func(xs ...string) string {
		if !dirty {
			xs = xs[:3]
		}
		return xs[rng.IntN(len(xs))]
	}
	fam := func() string {
		if dirty && rng.IntN(12) == 0 {
			return "nosuchfamily"
		}
		return fams[rng.IntN(len(fams))]
	}
	ts := func() bigtable.Timestamp {
		if !dirty {
			return [...]bigtable.Timestamp{bigtable.ServerTime, 7000, 1_800_000_000_000_000 + 1000*bigtable.Timestamp(rng.Int64N(3_000_000))}[rng.IntN(3)]
		}
		switch rng.IntN(6) {
		case 0:
			return bigtable.ServerTime
		case 1:
			return bigtable.Timestamp(rng.Int64N(1 << 40)) // any microsecond
		case 2:
			return -1000 * bigtable.Timestamp(rng.IntN(3)+2)
		case 3:
			return 7000 // sequence 7
		default:
			// Around now, whole milliseconds: live, expired, far ahead.
			return bigtable.Timestamp(1_800_000_000_000_000 + 1000*(rng.Int64N(20_000_000)-5_000_000))
		}
	}
	n := 1 + rng.IntN(12)
	if !dirty {
		n = 1 + rng.IntN(6)
	}
	ops := make([]rules.Op, 0, n)
	for range n {
		col := pick("a", "b", "longer-qualifier", "", "\x00wt", strategy.ReservedQualifierStart+"x", strategy.WriteTimePrefix+"a")
		o := rules.Op{Family: fam(), Column: col}
		switch k := rng.IntN(20); {
		case k < 9:
			o.Kind, o.TS, o.Value = rules.OpSet, ts(), []byte(pick("v", "", "value"))
			switch rng.IntN(4) {
			case 0:
				o.TS, o.Intent, o.Arg = bigtable.ServerTime, rules.IntentTTL, int64(time.Duration(rng.Int64N(int64(10*time.Second)))-time.Second)
				if !dirty {
					o.Arg = int64(time.Millisecond + time.Duration(rng.Int64N(int64(time.Second))))
				}
			case 1:
				o.TS, o.Intent, o.Arg = bigtable.ServerTime, rules.IntentSequence, rng.Int64N(20)-2
				if !dirty {
					o.Arg = rng.Int64N(10)
				}
			}
		case k < 11:
			o.Kind = rules.OpDeleteColumn
		case k < 13:
			o.Kind, o.TS, o.Arg = rules.OpDeleteRange, ts(), int64(ts())
			if o.TS < 0 && rng.IntN(2) == 0 {
				o.TS = 0
			}
		case k < 15:
			o.Kind, o.Column = rules.OpDeleteFamily, ""
		case k < 16:
			o.Kind, o.Family, o.Column = rules.OpDeleteRow, "", ""
		case k < 18:
			o.Kind, o.TS, o.Arg = rules.OpAddInt, ts(), rng.Int64N(100)
		default:
			o.Kind, o.TS, o.Value = rules.OpMergeBytes, ts(), []byte("m")
		}
		ops = append(ops, o)
	}
	return ops
}

// captureClient is a bigtable client whose connection sends nothing: its
// interceptor keeps each MutateRow request and fails the call
// (FailedPrecondition, which the client does not retry).
type captureClient struct {
	tbl  *bigtable.Table
	mu   sync.Mutex
	last []byte
}

func newCaptureClient(t *testing.T) *captureClient {
	c := &captureClient{}
	intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*btpb.MutateRowRequest); ok {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&btpb.MutateRowRequest{Mutations: r.GetMutations()})
			if err != nil {
				return err
			}
			c.mu.Lock()
			c.last = b
			c.mu.Unlock()
			return status.Error(codes.FailedPrecondition, "captured")
		}
		return status.Error(codes.Unimplemented, "capture only")
	}
	conn, err := grpc.NewClient("passthrough:///capture", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(intercept), grpc.WithStreamInterceptor(func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, grpc.Streamer, ...grpc.CallOption) (grpc.ClientStream, error) {
			return nil, status.Error(codes.Unimplemented, "capture only")
		}))
	require.NoError(t, err)
	client, err := bigtable.NewClientWithConfig(context.Background(), "p", "i",
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(conn), option.WithoutAuthentication())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	c.tbl = client.Open("t")
	return c
}

// sent is the mutations of the MutateRow request m is sent as, marshalled.
func (c *captureClient) sent(t *testing.T, m *bigtable.Mutation) []byte {
	t.Helper()
	c.mu.Lock()
	c.last = nil
	c.mu.Unlock()
	err := c.tbl.Apply(context.Background(), "row", m)
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	c.mu.Lock()
	defer c.mu.Unlock()
	require.NotNil(t, c.last, "no request captured")
	return c.last
}
