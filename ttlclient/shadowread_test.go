package ttlclient_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// The clock reading and the TTL were each truncated to the microsecond before
// being added. Clock T+999.6µs and WithTTL(1ms+500ns) stored T+1000, which
// reads as expired 0.4µs after the write; the contract is ms(now+ttl) =
// T+2000, the sum taken in nanoseconds and truncated once
// (issue 14, finding 10(a)).
func TestTTLTimestampFromNanoseconds(t *testing.T) {
	e := newEnv(t, mixedSchema())
	base := e.h.Clock.Now().Truncate(time.Millisecond)
	baseMicros := bigtable.Timestamp(base.UnixMicro())
	e.h.Clock.Set(base.Add(999*time.Microsecond + 600*time.Nanosecond))
	ttl := time.Millisecond + 500*time.Nanosecond

	m := ttlclient.NewMutation()
	m.SetTTL(famOne, "c", ttl, []byte("v"))
	m.SetTTL(famDef, "c", defaultD+ttl, []byte("v"))
	e.apply(t, "row", m)
	assert.Equal(t, baseMicros+2000, e.storedTimestamp(t, "row", famOne, "c"), "one-second: ms(now+ttl)")
	assert.Equal(t, baseMicros+2000, e.storedTimestamp(t, "row", famDef, "c"), "default expiry: ms(now+ttl-D)")

	// Live until now+ttl (T+2000.1µs): still there at T+2000µs-1ns.
	e.h.Clock.Set(base.Add(2000*time.Microsecond - time.Nanosecond))
	assert.Len(t, e.read(t, "row"), 2, "a cell written with a TTL of 1ms+500ns read as expired within it")
	e.h.Clock.Set(base.Add(2000 * time.Microsecond))
	assert.Len(t, e.read(t, "row"), 1, "the one-second cell expires at its timestamp")
}

// With the clock past the largest timestamp (MaxTimestamp,
// 9223372036854775000µs) the one-second bound saturated: reads returned a cell
// stored at MaxTimestamp and Set accepted it. Now every one-second cell reads
// as expired there (ts > now cannot hold), in reads and predicates, and every
// one-second write is refused. Default expiry and sequence cells keep their
// contract: a default-expiry cell lives D past its timestamp, a sequence cell
// does not expire by age (issue 14, finding 10(b)).
func TestPastMaxTimestamp(t *testing.T) {
	schema := mixedSchema()
	schema["onedef"] = strategy.OneSecond(strategy.WithDefaultTTL(time.Hour))
	e := newEnv(t, schema)
	e.h.Clock.Set(time.UnixMicro(int64(strategy.MaxTimestamp) - 1))
	m := ttlclient.NewMutation()
	m.Set(famOne, "c", strategy.MaxTimestamp, []byte("v"))
	m.Set(famDef, "c", bigtable.ServerTime, []byte("v"))
	m.SetVersion(famSeq, "c", 1, []byte("v"))
	m.Set(famPlain, "c", strategy.MaxTimestamp, []byte("v"))
	e.apply(t, "row", m)
	require.Len(t, e.read(t, "row"), 4, "all live just before the end")

	for _, now := range []time.Time{
		time.UnixMicro(int64(strategy.MaxTimestamp)),
		time.UnixMicro(int64(strategy.MaxTimestamp) + 500).Add(999 * time.Nanosecond),
		time.UnixMicro(math.MaxInt64),
	} {
		e.h.Clock.Set(now)
		r, err := e.tbl.ReadRow(e.ctx, "row")
		require.NoError(t, err)
		assert.Empty(t, r[famOne], "ReadRow at %d returned an expired one-second cell", now.UnixMicro())
		assert.Len(t, r[famDef], 1)
		assert.Len(t, r[famSeq], 1)
		assert.Equal(t, "plain:c", r[famPlain][0].Column)
		n := 0
		require.NoError(t, e.tbl.ReadRows(e.ctx, bigtable.RowList{"row"}, func(r bigtable.Row) bool {
			n += len(r[famOne])
			return true
		}, bigtable.RowFilter(bigtable.FamilyFilter(famOne))))
		assert.Zero(t, n, "ReadRows at %d", now.UnixMicro())

		// A predicate on the one-second family matches nothing.
		onlyOne := bigtable.ChainFilters(bigtable.FamilyFilter("^one$"), bigtable.LatestNFilter(1))
		matched := ttlclient.NewMutation()
		matched.DeleteCellsInColumn(famPlain, "cond")
		matched.Set(famPlain, "cond", 1000, []byte("matched"))
		unmatched := ttlclient.NewMutation()
		unmatched.DeleteCellsInColumn(famPlain, "cond")
		unmatched.Set(famPlain, "cond", 1000, []byte("unmatched"))
		e.apply(t, "row", ttlclient.NewCondMutation(onlyOne, matched, unmatched))
		assert.Contains(t, e.read(t, "row", bigtable.RowFilter(bigtable.ColumnFilter("cond"))), "plain:cond@1000=unmatched")

		// Every one-second write is refused; nothing is written.
		for name, c := range map[string]struct {
			fam  string
			ts   bigtable.Timestamp
			opts []cellOpt
			want error
		}{
			"explicit MaxTimestamp": {famOne, strategy.MaxTimestamp, nil, strategy.ErrAlreadyExpired},
			"WithTTL(1ms)":          {famOne, bigtable.ServerTime, []cellOpt{withTTL(time.Millisecond)}, strategy.ErrTimestampOverflow},
			"family default TTL":    {"onedef", bigtable.ServerTime, nil, strategy.ErrTimestampOverflow},
		} {
			w := ttlclient.NewMutation()
			setCell(w, c.fam, "new", c.ts, []byte("v"), c.opts...)
			assert.ErrorIs(t, e.tbl.Apply(e.ctx, "fresh", w), c.want, name)
		}
		stored, err := e.h.Stored(e.ctx, "t", "fresh")
		require.NoError(t, err)
		assert.Nil(t, stored)
	}
}

// shadowRecorder counts what shadow reads find and lets a test wait for
// each one to end.
type shadowRecorder struct {
	mu      sync.Mutex
	expired map[string]int // cells per family
	ended   chan int       // each shadow read's expired count
	dropped atomic.Int64
}

func newShadowRecorder() *shadowRecorder {
	return &shadowRecorder{expired: map[string]int{}, ended: make(chan int, 100)}
}

func (r *shadowRecorder) Table(string, ttlclient.Schema) ttlclient.TableRecorder { return r }
func (r *shadowRecorder) Read(time.Duration)                                     {}
func (r *shadowRecorder) Write(time.Duration)                                    {}
func (r *shadowRecorder) CellWritten(string, strategy.Kind, time.Duration)       {}
func (r *shadowRecorder) Refused(string, string)                                 {}
func (r *shadowRecorder) VerifySkipped()                                         {}
func (r *shadowRecorder) ShadowDropped()                                         { r.dropped.Add(1) }
func (r *shadowRecorder) ExpiredCell(family string, _ strategy.Kind, _ time.Duration) {
	r.mu.Lock()
	r.expired[family]++
	r.mu.Unlock()
}
func (r *shadowRecorder) ShadowRead(expired int, err error) {
	if err != nil {
		expired = -1
	}
	r.ended <- expired
}

// wait is the expired count of the next shadow read to end.
func (r *shadowRecorder) wait(t *testing.T) int {
	t.Helper()
	select {
	case n := <-r.ended:
		return n
	case <-time.After(time.Minute):
		t.Fatal("no shadow read ended within a minute")
		return 0
	}
}

// shadowEnv: rows r0..r7 each hold two one-second cells that are expired
// at the clock but still stored (the server's GC runs on real time, an
// hour behind them); r0..r3 also hold a live unmanaged cell, so a read
// returns them and filters r4..r7 out entirely.
func shadowEnv(t *testing.T) (*env, *shadowRecorder) {
	t.Helper()
	rec := newShadowRecorder()
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{
		ClientOptions: []ttlclient.ClientOption{ttlclient.WithShadowConcurrency(64)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	tbl := h.MustTable(t, "t", mixedSchema(), ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(1))
	e := &env{h: h, tbl: tbl, ctx: context.Background()}
	for i := range 8 {
		m := ttlclient.NewMutation()
		m.SetTTL(famOne, "a", time.Hour, []byte("v"))
		m.SetTTL(famOne, "b", time.Hour+time.Millisecond, []byte("v"))
		if i < 4 {
			m.Set(famPlain, "c", 1000, []byte("v"))
		}
		e.apply(t, fmt.Sprintf("r%d", i), m)
	}
	h.Clock.Advance(2 * time.Hour)
	return e, rec
}

func (e *env) readRows(t *testing.T, rows bigtable.RowSet, opts ...bigtable.ReadOption) []string {
	t.Helper()
	var keys []string
	require.NoError(t, e.tbl.ReadRows(e.ctx, rows, func(r bigtable.Row) bool {
		keys = append(keys, r.Key())
		return true
	}, opts...))
	return keys
}

// A ReadRows with a LimitRows it did not reach stopped its shadow read at the
// last returned row, so the expired cells the server walked past after it were
// not counted (16 walked, 8 counted here). The shadow read now follows the
// scan to where the server stopped (issue 14, finding 10(c)).
func TestShadowReadFollowsUnreachedLimit(t *testing.T) {
	e, rec := shadowEnv(t)
	all := bigtable.InfiniteRange("")

	assert.Equal(t, []string{"r0", "r1", "r2", "r3"}, e.readRows(t, all, bigtable.LimitRows(10)))
	assert.Equal(t, 16, rec.wait(t), "limit not reached: the server walked every row")

	// Reached: the server stopped at the last row returned.
	assert.Equal(t, []string{"r0", "r1"}, e.readRows(t, all, bigtable.LimitRows(2)))
	assert.Equal(t, 4, rec.wait(t), "limit reached at r1")

	// The last LimitRows wins, as in the client.
	assert.Equal(t, []string{"r0", "r1", "r2", "r3"}, e.readRows(t, all, bigtable.LimitRows(2), bigtable.LimitRows(5)))
	assert.Equal(t, 16, rec.wait(t))

	// Reverse: r7..r4 are walked first, then r3 (the limit of 1).
	assert.Equal(t, []string{"r3"}, e.readRows(t, all, bigtable.LimitRows(1), bigtable.ReverseScan()))
	assert.Equal(t, 10, rec.wait(t), "reverse scan stopped at r3")
	assert.Equal(t, []string{"r3", "r2", "r1", "r0"}, e.readRows(t, all, bigtable.LimitRows(9), bigtable.ReverseScan()))
	assert.Equal(t, 16, rec.wait(t))

	// A caller that stops early: up to its last row.
	n := 0
	require.NoError(t, e.tbl.ReadRows(e.ctx, all, func(bigtable.Row) bool { n++; return n < 2 }, bigtable.LimitRows(10)))
	assert.Equal(t, 4, rec.wait(t), "caller stopped at r1")
	assert.Zero(t, rec.dropped.Load())
}

// The shadow read re-read the caller's RowList after ReadRows had returned,
// racing a caller that reuses it (go test -race reported it at observe.go),
// and then scanned whatever rows the caller had put there. It now reads its
// own copy, taken before ReadRows starts (issue 14, finding 4).
func TestShadowReadOwnsItsRowSet(t *testing.T) {
	e, rec := shadowEnv(t)
	for i := range 10 {
		// r5 and r6 hold only expired cells: 4 of them.
		list := bigtable.RowList{"r5", "r6"}
		assert.Empty(t, e.readRows(t, list))
		list[0], list[1] = "r0", "zz" // reused at once, as the raw client allows
		ranges := bigtable.RowRangeList{bigtable.NewRange("r4", "r6")}
		assert.Empty(t, e.readRows(t, ranges))
		ranges[0] = bigtable.NewRange("r0", "r1")
		assert.Equal(t, 4, rec.wait(t), "list, round %d", i)
		assert.Equal(t, 4, rec.wait(t), "ranges, round %d", i)
	}
	assert.Zero(t, rec.dropped.Load())
}
