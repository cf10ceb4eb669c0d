package metrics_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

// Bttl_refusals_total counted one event under two reasons, already_expired
// from ttlclient and expired_on_arrival from the guard. The same refused write
// through ttlclient (Mutation and Table.API) and through the wire guard (a
// plain client) now counts under one reason, the refusal registry's, and under
// no other (issue 34).
func TestSameRefusalSameReasonOnEveryPath(t *testing.T) {
	schema := strategy.Schema{
		"session": strategy.OneSecond(strategy.WithMaxTTL(time.Hour, strategy.RefuseLonger)),
		"agg":     strategy.DefaultExpiry(time.Hour),
	}
	cases := []struct {
		name   string
		reason string
		family string
		build  func(now time.Time) *bigtable.Mutation
	}{
		{"expired on arrival", "already_expired", "session", func(now time.Time) *bigtable.Mutation {
			m := bigtable.NewMutation()
			m.Set("session", "c", bigtable.Time(now.Add(-time.Minute)), []byte("v"))
			return m
		}},
		{"explicit timestamp over the max TTL", "ttl_too_long", "session", func(now time.Time) *bigtable.Mutation {
			m := bigtable.NewMutation()
			m.Set("session", "c", bigtable.Time(now.Add(2*time.Hour)), []byte("v"))
			return m
		}},
		{"AddToCell on a managed family", "server_assigned_timestamp", "agg", func(now time.Time) *bigtable.Mutation {
			m := bigtable.NewMutation()
			m.AddIntToCell("agg", "c", bigtable.Time(now), 1)
			return m
		}},
		{"unknown family", "unknown_family", "", func(now time.Time) *bigtable.Mutation {
			m := bigtable.NewMutation()
			m.Set("nosuch", "c", bigtable.Time(now), []byte("v"))
			return m
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := metrics.New()
			h := bttestharness.New(t)
			ctx := context.Background()
			require.NoError(t, h.CreateTable(ctx, "t", schema))
			tbl := h.MustTable(t, "t", schema, ttlclient.WithRecorder(rec))
			g, err := wireguard.New(map[string]strategy.Schema{"t": schema}, wireguard.WithRecorder(rec), wireguard.WithClock(h.Clock))
			require.NoError(t, err)
			plain, err := h.DialDataClient(ctx, g.DialOptions()...)
			require.NoError(t, err)
			defer func() { _ = plain.Close() }()

			// The same write as a ttlclient.Mutation: its operations, in
			// ttlclient's vocabulary.
			m := ttlclient.NewMutation()
			now := h.Clock.Now()
			switch c.reason {
			case "already_expired":
				m.Set("session", "c", bigtable.Time(now.Add(-time.Minute)), []byte("v"))
			case "ttl_too_long":
				m.Set("session", "c", bigtable.Time(now.Add(2*time.Hour)), []byte("v"))
			case "server_assigned_timestamp":
				m.AddIntToCell("agg", "c", bigtable.Time(now), 1)
			case "unknown_family":
				m.Set("nosuch", "c", bigtable.Time(now), []byte("v"))
			}
			paths := []struct {
				name  string
				apply func() error
			}{
				{"ttlclient Mutation", func() error { return tbl.Apply(ctx, "r", m) }},
				{"ttlclient Table.API", func() error { return tbl.API().Apply(ctx, "r", c.build(h.Clock.Now())) }},
				{"wire guard", func() error { return plain.Open("t").Apply(ctx, "r", c.build(h.Clock.Now())) }},
			}
			for i, p := range paths {
				require.Error(t, p.apply(), p.name)
				assert.Equal(t, float64(i+1), promValue(t, rec, metrics.RefusalsTotal, "table", "t", "family", c.family, "reason", c.reason), p.name)
			}
			assert.Equal(t, 3.0, refusalsSum(t, rec), "every refusal counted once, under the one reason")
		})
	}
}

// refusalsSum is bttl_refusals_total summed over every label.
func refusalsSum(t *testing.T, rec prometheus.Collector) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(rec))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != metrics.RefusalsTotal {
			continue
		}
		for _, s := range mf.GetMetric() {
			sum += s.GetCounter().GetValue()
		}
	}
	return sum
}
