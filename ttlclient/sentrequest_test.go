package ttlclient_test

import (
	"bytes"
	"cloud.google.com/go/bigtable"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/ttlclient"
)

// keepingInterceptor keeps every write request the client sends, as an
// asynchronous audit logger or payload tracer would: it marshals the
// request when it is sent, then again in a goroutine of its own while the
// caller goes on, and once more at the end (check).
type keepingInterceptor struct {
	mu   sync.Mutex
	kept []keptRequest
	wg   sync.WaitGroup
}

type keptRequest struct {
	msg    proto.Message
	atSend []byte
	async  []byte // the goroutine's marshalling
}

var deterministic = proto.MarshalOptions{Deterministic: true}

func (k *keepingInterceptor) keep(method string, req any) {
	m, ok := req.(proto.Message)
	if !ok || !(strings.HasSuffix(method, "/MutateRow") || strings.HasSuffix(method, "/MutateRows")) {
		return
	}
	b, err := deterministic.Marshal(m)
	if err != nil {
		panic(err)
	}
	k.mu.Lock()
	i := len(k.kept)
	k.kept = append(k.kept, keptRequest{msg: m, atSend: b})
	k.mu.Unlock()
	// No synchronisation with the caller until check: under -race, a write
	// to the request after it was sent races with this read.
	k.wg.Go(func() {
		again, err := deterministic.Marshal(m)
		if err != nil {
			panic(err)
		}
		k.mu.Lock()
		k.kept[i].async = again
		k.mu.Unlock()
	})
}

func (k *keepingInterceptor) dialOptions() []grpc.DialOption {
	return observeCalls(nil, k.keep)
}

// check waits for the goroutines and requires every kept request to
// marshal, in its goroutine and now, to exactly the bytes it had when sent.
// It returns the cell timestamps sent, request by request.
func (k *keepingInterceptor) check(t *testing.T) [][]int64 {
	t.Helper()
	k.wg.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	var stamps [][]int64
	for i, r := range k.kept {
		now, err := deterministic.Marshal(r.msg)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(r.atSend, r.async), "request %d changed after it was sent (marshalled in the interceptor's goroutine)", i)
		assert.True(t, bytes.Equal(r.atSend, now), "request %d changed after it was sent (marshalled at the end)", i)
		var ts []int64
		collect := func(ms []*btpb.Mutation) {
			for _, m := range ms {
				if c := m.GetSetCell(); c != nil {
					ts = append(ts, c.TimestampMicros)
				}
			}
		}
		switch req := r.msg.(type) {
		case *btpb.MutateRowRequest:
			collect(req.Mutations)
		case *btpb.MutateRowsRequest:
			for _, e := range req.Entries {
				collect(e.Mutations)
			}
		}
		stamps = append(stamps, ts)
	}
	return stamps
}

// A request once sent never changes: the same Mutation applied again, one
// Apply after another, in one ApplyBulk twice and from several goroutines
// at once, while an interceptor keeps every request and marshals it
// asynchronously. Before the fix the second Apply wrote its timestamps into
// the cells the first had sent (-race reports the write against the
// interceptor's goroutine; without -race the bytes differ).
func TestSentRequestNeverChanges(t *testing.T) {
	k := &keepingInterceptor{}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{DialOptions: k.dialOptions()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	tbl := h.MustTable(t, "t", mixedSchema())
	ctx := context.Background()

	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "c", time.Hour, []byte("v"))
	m.Set(famDef, "d", bigtable.ServerTime, []byte("w"))
	m.Set(famPlain, "p", 5000, []byte("x"))

	require.NoError(t, tbl.Apply(ctx, "r1", m))
	h.Clock.Advance(time.Second)
	require.NoError(t, tbl.Apply(ctx, "r2", m))
	h.Clock.Advance(time.Second)
	errs, err := tbl.ApplyBulk(ctx, []string{"r3", "r4"}, []*ttlclient.Mutation{m, m})
	require.NoError(t, err)
	require.Nil(t, errs)
	var wg sync.WaitGroup
	for g := range 4 {
		h.Clock.Advance(time.Second)
		wg.Go(func() { assert.NoError(t, tbl.Apply(ctx, "g"+string(rune('0'+g)), m)) })
	}
	wg.Wait()

	stamps := k.check(t)
	require.Len(t, stamps, 7, "MutateRow x2, MutateRows x1, MutateRow x4")
	// The test can fail: the first request's timestamps are not the ones
	// later Applies computed.
	assert.NotEqual(t, stamps[0][0], stamps[1][0], "the second Apply computed other timestamps")
	assert.Equal(t, []int64{5000}, stamps[0][2:], "the unmanaged cell keeps the caller's timestamp")
}
