package ttlclient_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// refusals is every series of the refusal counter, "family/reason" to
// value.
func refusals(t *testing.T, rec *metrics.Recorder) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(rec))
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != metrics.RefusalsTotal {
			continue
		}
		for _, m := range f.GetMetric() {
			out[label(m, "table")+"/"+label(m, "family")+"/"+label(m, "reason")] = m.GetCounter().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// assertOneRefusal checks that exactly one refusal was counted between
// before and after, on key.
func assertOneRefusal(t *testing.T, before, after map[string]float64, key string) {
	t.Helper()
	total := 0.0
	for k, v := range after {
		total += v - before[k]
	}
	assert.Equal(t, 1.0, total, "refusals counted")
	assert.Equal(t, 1.0, after[key]-before[key], "refusals counted on %s; have %v", key, after)
}

// Acceptance 3: every guardrail refusal increments the refusal counter
// once, with its reason and (when the schema names it) its family.
func TestEveryGuardrailIncrementsRefusals(t *testing.T) {
	ctx := context.Background()
	h := bttestharness.New(t)
	rec := metrics.New()
	client := ttlclient.Wrap(h.Raw, ttlclient.WithClock(h.Clock), ttlclient.WithRecorder(rec),
		ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance))
	defer client.Close()
	schema := mixedSchema()
	schema["onedef"] = strategy.OneSecond(strategy.WithDefaultTTL(time.Minute))
	require.NoError(t, h.CreateTable(ctx, "t", schema))
	tbl, err := client.Open(ctx, "t", schema)
	require.NoError(t, err)
	start := h.Clock.Now()

	key := func(family string, want error) string {
		if _, ok := schema[family]; !ok {
			family = ""
		}
		return "t/" + family + "/" + ttlclient.RefusalReason(want)
	}
	for _, c := range guardCases() {
		t.Run(c.name, func(t *testing.T) {
			h.Clock.Set(start)
			if !c.clock.IsZero() {
				h.Clock.Set(c.clock)
			}
			row := c.row
			switch row {
			case "":
				row = "row"
			case "-":
				row = ""
			}
			m := ttlclient.NewMutation()
			c.build(m)
			before := refusals(t, rec)
			require.ErrorIs(t, tbl.Apply(ctx, row, m), c.want)
			assertOneRefusal(t, before, refusals(t, rec), key(c.family, c.want))

			// The same refusal inside ApplyBulk counts once per refused row.
			before = refusals(t, rec)
			errs, err := tbl.ApplyBulk(ctx, []string{row}, []*ttlclient.Mutation{m})
			require.NoError(t, err)
			require.ErrorIs(t, errs[0], c.want)
			assertOneRefusal(t, before, refusals(t, rec), key(c.family, c.want))
		})
	}
	h.Clock.Set(start)

	other := []struct {
		name, family string
		want         error
		call         func() error
	}{
		{"nil mutation", "", ttlclient.ErrNilMutation, func() error { return tbl.Apply(ctx, "row", nil) }},
		{"nested condition", "", ttlclient.ErrNestedCondition, func() error {
			inner := ttlclient.NewCondMutation(nil, ttlclient.NewMutation(), nil)
			return tbl.Apply(ctx, "row", ttlclient.NewCondMutation(nil, inner, nil))
		}},
		{"conditional in bulk", "", ttlclient.ErrConditionalInBulk, func() error {
			errs, err := tbl.ApplyBulk(ctx, []string{"row"}, []*ttlclient.Mutation{ttlclient.NewCondMutation(nil, ttlclient.NewMutation(), nil)})
			if err != nil {
				return err
			}
			return errs[0]
		}},
		{"value too large", famPlain, ttlclient.ErrValueTooLarge, func() error {
			m := ttlclient.NewMutation()
			m.Set(famPlain, "c", 1000, make([]byte, ttlclient.MaxValueBytes+1))
			return tbl.Apply(ctx, "row", m)
		}},
		{"ReadModifyWrite on managed family", famDef, ttlclient.ErrServerAssignedTimestamp, func() error {
			rmw := ttlclient.NewReadModifyWrite()
			rmw.AppendValue(famDef, "c", []byte("x"))
			_, err := tbl.ApplyReadModifyWrite(ctx, "row", rmw)
			return err
		}},
		{"ReadModifyWrite on unknown family", "nope", ttlclient.ErrUnknownFamily, func() error {
			rmw := ttlclient.NewReadModifyWrite()
			rmw.Increment("nope", "c", 1)
			_, err := tbl.ApplyReadModifyWrite(ctx, "row", rmw)
			return err
		}},
		{"empty ReadModifyWrite", "", ttlclient.ErrEmptyMutation, func() error {
			_, err := tbl.ApplyReadModifyWrite(ctx, "row", ttlclient.NewReadModifyWrite())
			return err
		}},
		{"ReadModifyWrite with empty row key", "", ttlclient.ErrEmptyRowKey, func() error {
			_, err := tbl.ApplyReadModifyWrite(ctx, "", ttlclient.NewReadModifyWrite())
			return err
		}},
	}
	for _, c := range other {
		t.Run(c.name, func(t *testing.T) {
			before := refusals(t, rec)
			require.ErrorIs(t, c.call(), c.want)
			assertOneRefusal(t, before, refusals(t, rec), key(c.family, c.want))
		})
	}

	// Opening a table with an invalid schema is refused too.
	before := refusals(t, rec)
	_, err = client.Open(ctx, "bad", strategy.Schema{"s": strategy.Sequence(0)})
	require.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	assertOneRefusal(t, before, refusals(t, rec), "bad//invalid_policy")

	// Reads and valid writes are not refusals.
	before = refusals(t, rec)
	_, err = tbl.ReadRow(ctx, "row", bigtable.RowFilter(bigtable.LatestNFilter(1)))
	require.NoError(t, err)
	after := refusals(t, rec)
	for k, v := range after {
		assert.Equal(t, before[k], v, k)
	}
	for k := range after {
		assert.False(t, strings.Contains(k, "other"), "a refusal without a named reason: %s", k)
	}
}
