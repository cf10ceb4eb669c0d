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
