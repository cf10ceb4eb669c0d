package ttlclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// cellCounter counts CellWritten per family.
type cellCounter struct {
	nopRecorder
	mu sync.Mutex
	n  map[string]int
}

func (c *cellCounter) Table(string, ttlclient.Schema) ttlclient.TableRecorder { return c }

func (c *cellCounter) CellWritten(family string, _ strategy.Kind, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[family]++
}

func (c *cellCounter) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// CellWritten counts a cell sent, never one of a refused row: a row the
// rules refuse once completed (over the request limit with its
// single-value deletes), or a conditional mutation whose other branch is
// refused, writes nothing. The fast path (rules.Table.StampOps) already
// counted only after every check; the general path counted each cell as
// it was stamped, before Complete and before the other branch (fails
// before: 2 and 1 cells counted).
func TestCellWrittenNotCountedForARefusedRow(t *testing.T) {
	ctx := context.Background()
	h := bttestharness.New(t)
	rec := &cellCounter{}
	schema := strategy.Schema{
		"sv":    strategy.OneSecond(strategy.SingleValue(), strategy.WithDefaultTTL(time.Hour)),
		"plain": strategy.OneSecond(strategy.WithDefaultTTL(time.Hour)),
	}
	tbl := h.MustTable(t, "t", schema, ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(0))

	t.Run("completed over the limit", func(t *testing.T) {
		restore := rules.SetRequestLimitForTest(3)
		defer restore()
		m := ttlclient.NewMutation()
		m.Set("sv", "a", bigtable.ServerTime, []byte("v"))
		m.Set("sv", "b", bigtable.ServerTime, []byte("v")) // 4 mutations with their deletes
		require.ErrorIs(t, tbl.Apply(ctx, "r1", m), ttlclient.ErrTooManyMutations)
		assert.Empty(t, rec.get(), "cells counted as written for a refused row")

		// The same row within the limit is written, and counted.
		ok := ttlclient.NewMutation()
		ok.Set("sv", "a", bigtable.ServerTime, []byte("v"))
		require.NoError(t, tbl.Apply(ctx, "r1", ok))
		assert.Equal(t, map[string]int{"sv": 1}, rec.get())
	})

	t.Run("conditional, other branch refused", func(t *testing.T) {
		before := rec.get()
		yes := ttlclient.NewMutation()
		yes.Set("plain", "a", bigtable.ServerTime, []byte("v"))
		no := ttlclient.NewMutation()
		no.Set("nosuchfamily", "a", bigtable.ServerTime, []byte("v"))
		m := ttlclient.NewCondMutation(bigtable.PassAllFilter(), yes, no)
		require.ErrorIs(t, tbl.Apply(ctx, "r2", m), ttlclient.ErrUnknownFamily)
		assert.Equal(t, before, rec.get(), "cells counted as written for a refused conditional mutation")
	})
}

// ttlRecorder keeps the TTLs CellWritten reports.
type ttlRecorder struct {
	nopRecorder
	mu   sync.Mutex
	ttls []time.Duration
}

func (r *ttlRecorder) Table(string, ttlclient.Schema) ttlclient.TableRecorder { return r }

func (r *ttlRecorder) CellWritten(_ string, _ strategy.Kind, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ttls = append(r.ttls, ttl)
}

// CellWritten reports the TTL a cell is written with: on a family that
// clamps TTLs to its max TTL, a SetTTL over the cap is written with the
// cap (strategy.Policy.WriteTimestamp), and that is the TTL recorded; the
// TTL asked was (fails before: 10h recorded for a cell that lives 2h).
func TestCellWrittenTTLIsTheClampedTTL(t *testing.T) {
	ctx := context.Background()
	h := bttestharness.New(t)
	rec := &ttlRecorder{}
	schema := strategy.Schema{"c": strategy.OneSecond(strategy.WithMaxTTL(2*time.Hour, strategy.ClampLonger))}
	tbl := h.MustTable(t, "t", schema, ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(0))
	m := ttlclient.NewMutation()
	m.SetTTL("c", "a", 10*time.Hour, []byte("v"))
	m.SetTTL("c", "b", 90*time.Minute, []byte("v"))
	require.NoError(t, tbl.Apply(ctx, "r", m))
	r, err := tbl.ReadRow(ctx, "r", bigtable.RowFilter(bigtable.ColumnFilter("a")))
	require.NoError(t, err)
	require.Len(t, r["c"], 1)
	assert.Equal(t, h.Clock.Now().Add(2*time.Hour).Truncate(time.Millisecond).UnixMicro(), int64(r["c"][0].Timestamp), "the cell lives the cap")
	assert.Equal(t, []time.Duration{2 * time.Hour, 90 * time.Minute}, rec.ttls)
}

// familyRecorder counts CellWritten by family and keeps the TTLs.
type familyRecorder struct {
	ttlRecorder
	fams map[string]int
}

func (r *familyRecorder) Table(string, ttlclient.Schema) ttlclient.TableRecorder { return r }

func (r *familyRecorder) CellWritten(family string, kind strategy.Kind, ttl time.Duration) {
	r.ttlRecorder.CellWritten(family, kind, ttl)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fams == nil {
		r.fams = map[string]int{}
	}
	r.fams[family]++
}

func (r *familyRecorder) get() (map[string]int, []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.fams {
		out[k] = v
	}
	return out, append([]time.Duration(nil), r.ttls...)
}

// Table.API's writes count their cells as Table's do (the metric is
// "cells set", whichever path set them): each SetCell the caller's
// mutation sends, with its TTL, once per call; not the write-time
// companions bttl adds, nor a refused row's. They counted none (fails
// before: no cell counted).
func TestCellWrittenCountsTableAPIWrites(t *testing.T) {
	ctx := context.Background()
	h := bttestharness.New(t)
	rec := &familyRecorder{}
	schema := strategy.Schema{
		"d":  strategy.OneSecond(strategy.WithDefaultTTL(time.Hour)),
		"wt": strategy.OneSecond(strategy.WithDefaultTTL(time.Hour), strategy.WithWriteTime()),
		"u":  strategy.Unmanaged(),
	}
	tbl := h.MustTable(t, "t", schema, ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(0))
	api := tbl.API()

	m := bigtable.NewMutation()
	m.Set("d", "a", bigtable.ServerTime, []byte("v"))
	m.Set("wt", "a", bigtable.ServerTime, []byte("v")) // and its companion, not counted
	m.Set("u", "a", 5000, []byte("v"))
	require.NoError(t, api.Apply(ctx, "r1", m))
	fams, ttls := rec.get()
	assert.Equal(t, map[string]int{"d": 1, "wt": 1, "u": 1}, fams)
	assert.Equal(t, []time.Duration{time.Hour, time.Hour, 0}, ttls)

	cm := bigtable.NewMutation()
	cm.Set("d", "b", bigtable.ServerTime, []byte("v"))
	require.NoError(t, api.Apply(ctx, "r1", bigtable.NewCondMutation(bigtable.PassAllFilter(), cm, nil)))
	fams, _ = rec.get()
	assert.Equal(t, map[string]int{"d": 2, "wt": 1, "u": 1}, fams, "a conditional mutation's cells")

	ok := bigtable.NewMutation()
	ok.Set("d", "c", bigtable.ServerTime, []byte("v"))
	bad := bigtable.NewMutation()
	bad.Set("nosuchfamily", "c", bigtable.ServerTime, []byte("v"))
	errs, err := api.ApplyBulk(ctx, []string{"r2", "r3", "r4"}, []*bigtable.Mutation{ok, bad, ok})
	require.NoError(t, err)
	require.Len(t, errs, 3)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], ttlclient.ErrUnknownFamily)
	require.NoError(t, errs[2])
	fams, _ = rec.get()
	assert.Equal(t, map[string]int{"d": 4, "wt": 1, "u": 1}, fams, "the bulk's rows written, not the refused one")
}
