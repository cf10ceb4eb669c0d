package metrics_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// The OpenTelemetry instruments, named by OpenTelemetry's conventions,
// come out of OpenTelemetry's own Prometheus exporter under exactly the
// names the Recorder's Prometheus collector uses, with the same values.
func TestOTelNamesExportAsThePrometheusNames(t *testing.T) {
	for _, n := range []string{metrics.OTelReads, metrics.OTelWriteTTL, metrics.OTelGCLag, metrics.OTelIdleRefreshes, metrics.OTelIdleRefreshFailures, metrics.OTelClientIncompatible} {
		assert.True(t, strings.HasPrefix(n, "bttl.") && !strings.HasSuffix(n, "_total") && !strings.HasSuffix(n, "_seconds") && n == strings.ToLower(n), n)
	}
	viaOTel := prometheus.NewPedanticRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(viaOTel), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	require.NoError(t, err)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	rec := metrics.New(metrics.WithMeterProvider(mp))
	direct := prometheus.NewPedanticRegistry()
	require.NoError(t, direct.Register(rec))

	// One observation of every kind.
	schema := ttlclient.Schema{"s": strategy.OneSecond(strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce)), "d": strategy.DefaultExpiry(time.Hour)}
	tr := rec.Table("t", schema)
	tr.Read(time.Microsecond)
	tr.Write(time.Microsecond)
	tr.CellWritten("s", strategy.KindOneSecond, time.Minute)
	tr.Refused("s", "server_timestamp")
	tr.ExpiredCell("s", strategy.KindOneSecond, time.Hour)
	tr.ShadowRead(1, nil)
	tr.ShadowRead(0, errors.New("failed"))
	tr.ShadowDropped()
	tr.VerifySkipped()
	idle, ok := tr.(interface {
		IdleRefresh(family string, result ttlclient.IdleResult, n int)
	})
	require.True(t, ok, "the table recorder records time-to-idle refreshes")
	idle.IdleRefresh("s", ttlclient.IdleResult(0), 1)
	failures, ok := tr.(ttlclient.IdleFailureRecorder)
	require.True(t, ok, "the table recorder counts failed time-to-idle refreshes by reason")
	failures.IdleRefreshFailed("s", "rpc")
	compat, ok := tr.(ttlclient.CompatibilityRecorder)
	require.True(t, ok, "the table recorder counts failed client-version checks")
	compat.IncompatibleClient("mutation")

	names := func(g prometheus.Gatherer) []string {
		fams, err := g.Gather()
		require.NoError(t, err)
		var out []string
		for _, f := range fams {
			if strings.HasPrefix(f.GetName(), "bttl_") {
				out = append(out, f.GetName()+" "+f.GetType().String())
			}
		}
		sort.Strings(out)
		return out
	}
	want := names(direct)
	require.NotEmpty(t, want)
	assert.Equal(t, want, names(viaOTel))
}
