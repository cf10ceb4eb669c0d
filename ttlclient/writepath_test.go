package ttlclient_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// sentOps reads the operations of a *bigtable.Mutation.
func sentOps(t *testing.T, m *bigtable.Mutation) []*btpb.Mutation {
	t.Helper()
	return *ttlclient.MutationOps(m)
}

func cloneOps(ops []*btpb.Mutation) []*btpb.Mutation {
	out := make([]*btpb.Mutation, len(ops))
	for i, pb := range ops {
		out[i] = proto.Clone(pb).(*btpb.Mutation)
	}
	return out
}

// Through Table.API, an explicit timestamp on a ClampTTL family that
// implies more than the max TTL is clamped, so its cell is built anew
// although it is not a server timestamp: the room reserved for the cells
// built anew must grow for it, whatever the length of its qualifier (a
// regression: it took a later server-timestamp cell's room and panicked
// on a longer qualifier), and the caller's operations stay as they were.
func TestTableAPIClampedExplicitCellsBesideServerTimeCell(t *testing.T) {
	schema := strategy.Schema{
		famOne: strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.ClampLonger)),
		famDef: strategy.DefaultExpiry(defaultD),
	}
	for name, build := range map[string]func(m *bigtable.Mutation, far bigtable.Timestamp){
		"two clamped cells, then a server timestamp": func(m *bigtable.Mutation, far bigtable.Timestamp) {
			m.Set(famOne, "a", far, []byte("1"))
			m.Set(famOne, "a qualifier longer than the room", far, []byte("2"))
			m.Set(famDef, "b", bigtable.ServerTime, []byte("3"))
		},
		"a clamped cell between server timestamps": func(m *bigtable.Mutation, far bigtable.Timestamp) {
			m.Set(famDef, "b", bigtable.ServerTime, []byte("1"))
			m.Set(famOne, "a qualifier longer than the room", far, []byte("2"))
			m.Set(famDef, "c", bigtable.ServerTime, []byte("3"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, schema)
			far := bigtable.Time(e.h.Clock.Now().Add(10 * time.Hour)).TruncateToMilliseconds()
			m := bigtable.NewMutation()
			build(m, far)
			before := cloneOps(sentOps(t, m))
			var err error
			require.NotPanics(t, func() { err = e.tbl.API().Apply(e.ctx, "row", m) })
			require.NoError(t, err)
			clamped := bigtable.Time(e.h.Clock.Now().Add(time.Hour)).TruncateToMilliseconds()
			assert.Equal(t, clamped, e.storedTimestamp(t, "row", famOne, "a qualifier longer than the room"))
			for i, pb := range sentOps(t, m) {
				assert.True(t, proto.Equal(before[i], pb), "caller's operation %d changed", i)
			}
		})
	}
}

// One Mutation is applied by some goroutines (the first in place) while
// others send it as both branches of a conditional mutation (never in place), and the
// same *bigtable.Mutation goes through Table.API by Apply, ApplyBulk (twice
// in one call) and as a branch. Under -race: no write to a cell another
// RPC is reading; every row's cells come from one clock reading; the
// caller's *bigtable.Mutation is never written to.
func TestInPlaceCellsAndBorrowedOpsUnderConcurrentBranchesAndTableAPI(t *testing.T) {
	clock := &steppingClock{base: time.Now()}
	e := newEnv(t, mixedSchema(), ttlclient.WithClock(clock))
	api := e.tbl.API()
	m := ttlclient.NewMutation()
	m.Set(famOne, "c", ttlclient.Auto, []byte("v"), ttlclient.WithTTL(time.Hour))
	m.Set(famDef, "d", ttlclient.Auto, []byte("v"), ttlclient.WithTTL(30*time.Minute))
	raw := bigtable.NewMutation()
	raw.Set(famDef, "d", bigtable.ServerTime, []byte("r"))
	raw.Set(famPlain, "p", 7000, []byte("r"))
	raw.DeleteCellsInColumn(famPlain, "q")
	before := cloneOps(sentOps(t, raw))

	const goroutines, rounds = 6, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ownRows, rawRows []string
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				row := fmt.Sprintf("g%d-r%d", g, r)
				var own, rr []string
				switch (g + r) % 4 {
				case 0:
					assert.NoError(t, e.tbl.Apply(e.ctx, row, m))
					own = append(own, row)
				case 1:
					// An empty row never matches: the false branch, m, is written.
					cm := ttlclient.NewCondMutation(bigtable.PassAllFilter(), m, m)
					assert.NoError(t, e.tbl.Apply(e.ctx, row, cm))
					own = append(own, row)
				case 2:
					keys := []string{row + "-a", row + "-b", row + "-c"}
					errs, err := e.tbl.ApplyBulk(e.ctx, keys, []*ttlclient.Mutation{m, m, m})
					assert.NoError(t, err)
					assert.Nil(t, errs)
					own = append(own, keys...)
				case 3:
					assert.NoError(t, api.Apply(e.ctx, row+"-api", raw))
					errs, err := api.ApplyBulk(e.ctx, []string{row + "-x", row + "-y"}, []*bigtable.Mutation{raw, raw})
					assert.NoError(t, err)
					assert.Nil(t, errs)
					assert.NoError(t, api.Apply(e.ctx, row+"-cond", bigtable.NewCondMutation(bigtable.PassAllFilter(), nil, raw)))
					rr = append(rr, row+"-api", row+"-x", row+"-y", row+"-cond")
				}
				mu.Lock()
				ownRows, rawRows = append(ownRows, own...), append(rawRows, rr...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	const apart = bigtable.Timestamp(90 * time.Minute / time.Microsecond)
	for _, row := range ownRows {
		one := e.storedTimestamp(t, row, famOne, "c")
		def := e.storedTimestamp(t, row, famDef, "d")
		assert.Equal(t, apart, one-def, "row %s: both cells from one Apply's clock reading", row)
	}
	for _, row := range rawRows {
		assert.Positive(t, e.storedTimestamp(t, row, famDef, "d"), row)
		assert.Equal(t, bigtable.Timestamp(7000), e.storedTimestamp(t, row, famPlain, "p"), row)
	}
	after := sentOps(t, raw)
	require.Len(t, after, len(before))
	for i := range before {
		assert.True(t, proto.Equal(before[i], after[i]), "caller's operation %d changed: %v", i, after[i])
	}
	// m's records went out once, with the first Apply that claimed them:
	// every build since makes its cells anew.
	bm, err := e.tbl.Build("row", m)
	require.NoError(t, err)
	assert.NotSame(t, ttlclient.MutationRecord(m, 0), sentOps(t, bm)[0], "m's records sent a second time")
}

// Table.API().ApplyBulk keeps its wrapping in a sync.Pool: once the call
// has returned, the pool must not keep the caller's mutations (or their
// operations) alive.
func TestTableAPIApplyBulkPoolKeepsNoCallerMutation(t *testing.T) {
	e := newEnv(t, mixedSchema())
	api := e.tbl.API()
	var weaks []weak.Pointer[bigtable.Mutation]
	var weakOps []weak.Pointer[btpb.Mutation]
	for i := range 4 {
		func() {
			m := bigtable.NewMutation()
			m.Set(famPlain, "p", 7000, []byte("v"))
			m.Set(famDef, "d", bigtable.ServerTime, []byte("v"))
			bad := bigtable.NewMutation()
			bad.Set("nosuch", "c", 1000, []byte("v"))
			weaks = append(weaks, weak.Make(m), weak.Make(bad))
			weakOps = append(weakOps, weak.Make(sentOps(t, m)[0]))
			errs, err := api.ApplyBulk(e.ctx, []string{fmt.Sprint("r", i), fmt.Sprint("s", i)}, []*bigtable.Mutation{m, bad})
			require.NoError(t, err)
			require.Len(t, errs, 2)
			require.ErrorIs(t, errs[1], ttlclient.ErrUnknownFamily)
		}()
	}
	// One collection only: a sync.Pool keeps its objects through the
	// first (in its victim cache) and drops them at the second.
	runtime.GC()
	for i, w := range weaks {
		assert.Nil(t, w.Value(), "caller mutation %d still reachable", i)
	}
	for i, w := range weakOps {
		assert.Nil(t, w.Value(), "caller operation %d still reachable", i)
	}
}

// appendOp adds an operation the client's methods cannot make (test only).
func appendOp(t *testing.T, m *bigtable.Mutation, pb *btpb.Mutation) {
	t.Helper()
	ops := ttlclient.MutationOps(m)
	*ops = append(*ops, pb)
}

// An operation bttl does not know, after cells the write path would place
// (one to rebuild, one to share), is refused with ErrMutationUnreadable by
// Apply, ApplyBulk (that row only) and as a conditional branch, and no RPC
// is made for it: whether the check of every operation before any rule
// refuses it or, should that check miss a kind, the write path's own
// decoding does.
func TestTableAPIUnknownOperationAfterPlacedCellsSendsNothing(t *testing.T) {
	e, counter := newCountingEnv(t, mixedSchema())
	api := e.tbl.API()
	m := bigtable.NewMutation()
	m.Set(famDef, "d", bigtable.ServerTime, []byte("v"))
	m.Set(famPlain, "p", 7000, []byte("v"))
	appendOp(t, m, &btpb.Mutation{})
	before := counter.n.Load()

	err := api.Apply(e.ctx, "row", m)
	require.ErrorIs(t, err, ttlclient.ErrMutationUnreadable)
	var ce *ttlclient.CellError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "row", ce.Row)
	require.ErrorIs(t, api.Apply(e.ctx, "cond", bigtable.NewCondMutation(bigtable.PassAllFilter(), nil, m)), ttlclient.ErrMutationUnreadable)
	assert.Equal(t, before, counter.n.Load(), "a write was sent")

	good := bigtable.NewMutation()
	good.Set(famPlain, "p", 7000, []byte("v"))
	errs, err := api.ApplyBulk(e.ctx, []string{"bad", "good"}, []*bigtable.Mutation{m, good})
	require.NoError(t, err)
	require.Len(t, errs, 2)
	assert.ErrorIs(t, errs[0], ttlclient.ErrMutationUnreadable)
	assert.NoError(t, errs[1])
	assert.Empty(t, e.stored(t, "bad"))
	assert.Empty(t, e.stored(t, "row"))
	assert.Empty(t, e.stored(t, "cond"))
	assert.Len(t, e.stored(t, "good"), 1)
}

// docs/design.md#tableapi: a mutation holding an op kind bttl does not
// know fails with ErrMutationUnreadable, whatever else it holds: every
// operation is read before any rule is checked, so a refusable operation
// before the unknown one does not decide the error.
func TestTableAPIUnknownOperationIsUnreadableWhateverPrecedesIt(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := bigtable.NewMutation()
	m.Set("nosuch", "c", 7000, []byte("v"))
	appendOp(t, m, &btpb.Mutation{})
	assert.ErrorIs(t, e.tbl.API().Apply(e.ctx, "row", m), ttlclient.ErrMutationUnreadable)
}
