package expiry_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/strategy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handWrite stores a one-second cell of family s at ts and returns the
// change the stream would give for it.
func handWrite(t *testing.T, r *rig, row string, ts bigtable.Timestamp) changestream.Change {
	m := bigtable.NewMutation()
	m.Set("s", "c", ts, []byte("v"))
	require.NoError(t, r.client.Open("t").Apply(context.Background(), row, m))
	return changestream.Change{Table: "t", Type: changestream.User, RowKey: []byte(row), CommitTime: r.clock.Now(),
		Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
			FamilyName: "s", ColumnQualifier: []byte("c"), TimestampMicros: int64(ts)}}}}}
}

// Two workers share the buckets: each takes its own at once; the other's
// only once they have been due for a lease (its worker is down); a bucket
// whose lease a killed worker holds waits until that lease lapses, then is
// taken over and announced.
func TestTakeover(t *testing.T) {
	ctx := context.Background()
	schema := strategy.Schema{"s": strategy.OneSecond()}
	r := newRig(t, schema)
	var got []string
	cb := func(ctx context.Context, e expiry.Event) error {
		got = append(got, string(e.RowKey))
		return nil
	}
	opts := func(i int) []expiry.Option {
		return []expiry.Option{expiry.WithClock(r.clock), expiry.WithWorker(i, 2), expiry.WithLease(10 * time.Second)}
	}
	w0, err := expiry.New(r.client, "t", schema, "idx", r.store(), cb, opts(0)...)
	require.NoError(t, err)
	w1, err := expiry.New(r.client, "t", schema, "idx", r.store(), cb, opts(1)...)
	require.NoError(t, err)

	// Bucket numbers (seconds) even and odd: worker 0's and worker 1's.
	even := t0.Add(2 * time.Second)
	odd := t0.Add(3 * time.Second)
	require.NoError(t, w0.Handle(ctx, handWrite(t, r, "even", bigtable.Time(even))))
	require.NoError(t, w0.Handle(ctx, handWrite(t, r, "odd", bigtable.Time(odd))))
	r.clock.Advance(5 * time.Second)
	n, err := w0.Poll(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"even"}, got, "worker 0 leaves worker 1's bucket while it may be up")
	r.clock.Advance(9 * time.Second) // odd has been due 11 s, past a lease
	n, err = w0.Poll(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"even", "odd"}, got, "taken over once due for a lease")

	// A worker killed holding a bucket's lease: the callback kills it.
	got = nil
	at := t0.Add(16 * time.Second) // an even bucket: worker 0's
	require.NoError(t, w0.Handle(ctx, handWrite(t, r, "held", bigtable.Time(at))))
	r.clock.Advance(at.Add(time.Second).Sub(r.clock.Now()))
	pctx, kill := context.WithCancel(ctx)
	dying, err := expiry.New(r.client, "t", schema, "idx", r.store(), func(ctx context.Context, e expiry.Event) error {
		kill()
		return ctx.Err()
	}, append(opts(0), expiry.WithOwner("dying"))...)
	require.NoError(t, err)
	_, err = dying.Poll(pctx)
	require.Error(t, err)
	for _, w := range []*expiry.Notifier{w0, w1} {
		n, err := w.Poll(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "the lease is the killed worker's")
	}
	r.clock.Advance(10 * time.Second)
	n, err = w0.Poll(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"held"}, got)
	n, err = w0.Poll(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "acknowledged: its entry is gone")
}

// Every call is bounded: against a server that no longer answers, Poll
// returns an error naming the index within its RPC timeout.
func TestPollBounded(t *testing.T) {
	schema := strategy.Schema{"s": strategy.OneSecond()}
	r := newRig(t, schema)
	nt, err := expiry.New(r.client, "t", schema, "idx", r.store(), r.record, expiry.WithClock(r.clock), expiry.WithRPCTimeout(300*time.Millisecond))
	require.NoError(t, err)
	r.srv.Close()
	start := time.Now()
	_, err = nt.Poll(context.Background())
	var xe *expiry.Error
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, "idx", xe.Table)
	assert.Less(t, time.Since(start), 10*time.Second)
}
