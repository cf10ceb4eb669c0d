package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/ttlclient"
)

// Time-to-idle results reach both Prometheus and OpenTelemetry, per table,
// family and result, with every result's series exported from Open on.
func TestIdleRefreshResults(t *testing.T) {
	e := newEnv(t, nil, ttlclient.WithShadowSampling(0))
	require.NoError(t, e.h.CreateTable(e.ctx, idleTable, idleSchema()))
	tbl, err := e.client.Open(context.Background(), idleTable, idleSchema())
	require.NoError(t, err)
	count := func(result string) float64 {
		return promValue(t, e.rec, metrics.IdleRefreshesTotal, "table", idleTable, "family", famIdle, "result", result)
	}
	for _, r := range []string{"refreshed", "skipped", "dropped", "failed", "conflict"} {
		require.NotNil(t, series(t, e.rec, metrics.IdleRefreshesTotal, "table", idleTable, "family", famIdle, "result", r), r)
	}
	assert.Nil(t, series(t, e.rec, metrics.IdleRefreshesTotal, "table", table), "no series for a table without an idle TTL")

	m := ttlclient.NewMutation()
	m.SetTTL(famIdle, "c", time.Minute, []byte("v")) // due: 1m left of 1h
	require.NoError(t, tbl.Apply(e.ctx, "s", m))
	for i := 0; i < 3; i++ {
		_, err := tbl.ReadRow(e.ctx, "s")
		require.NoError(t, err)
		require.NoError(t, e.client.FlushIdleRefreshes(e.ctx))
	}
	assert.Equal(t, 1.0, count("refreshed"))
	assert.Equal(t, 2.0, count("skipped"), "the refreshed cell, read twice within the debounce")
	assert.Zero(t, count("dropped")+count("failed")+count("conflict"))

	data := e.otelData(t)
	sum, ok := data[metrics.OTelIdleRefreshes].(metricdata.Sum[int64])
	require.True(t, ok, "OpenTelemetry counter %s: %v", metrics.OTelIdleRefreshes, data)
	assert.ElementsMatch(t, []string{
		"family=session,result=refreshed,table=idle=1",
		"family=session,result=skipped,table=idle=2",
	}, points(sum))
}
