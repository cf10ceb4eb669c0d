package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bttl/bttl/ttlclient"
)

// Metrics never carry a row key, qualifier or value, on the refusal path nor
// the shadow-read path; only table, family, strategy, reason and result label
// them (issue 30 item 7).
func TestMetricsCarryNoKeys(t *testing.T) {
	const secretRow, secretCol, secretVal = "alice@example.com", "bob@example.com", "carol@example.com"
	e := newEnv(t, nil, ttlclient.WithShadowSampling(1))
	m := ttlclient.NewMutation()
	m.SetVersion(famSeq, secretCol, -2, []byte(secretVal))
	require.Error(t, e.tbl.Apply(e.ctx, secretRow, m))
	m = ttlclient.NewMutation()
	m.SetTTL(famOne, secretCol, time.Hour, []byte(secretVal))
	m.SetTTL(famDef, secretCol, 5*time.Hour, []byte(secretVal))
	require.NoError(t, e.tbl.Apply(e.ctx, secretRow, m))
	e.h.Clock.Advance(2 * time.Hour)
	_, err := e.tbl.ReadRow(e.ctx, secretRow)
	require.NoError(t, err)
	e.waitShadows(t, 1)

	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(e.rec))
	fams, err := reg.Gather()
	require.NoError(t, err)
	var rm metricdata.ResourceMetrics
	require.NoError(t, e.reader.Collect(context.Background(), &rm))
	otel, err := json.Marshal(rm) // attribute sets marshal as their key-values
	require.NoError(t, err)
	prom := fmt.Sprint(fams)
	require.Contains(t, prom, "invalid_sequence", "the refusal was counted (Prometheus)")
	require.Contains(t, string(otel), "invalid_sequence", "the refusal was counted (OTel)")
	text := prom + string(otel)
	for _, secret := range []string{"alice", "bob", "carol"} {
		assert.NotContains(t, text, secret)
	}
}
