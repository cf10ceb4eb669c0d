package metrics_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

const (
	famOne   = "one"   // one-second expiry
	famDef   = "def"   // default expiry, D = 1h
	famSeq   = "seq"   // sequence, N = 2
	famPlain = "plain" // unmanaged
	table    = "t"

	famIdle   = "session" // one-second with an idle TTL of 1h, in idleTable
	idleTable = "idle"
)

// idleSchema is the schema of idleTable: a family with an idle TTL.
func idleSchema() strategy.Schema {
	return strategy.Schema{famIdle: strategy.OneSecond(strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce))}
}

func schema() strategy.Schema {
	return strategy.Schema{
		famOne:   strategy.OneSecond(),
		famDef:   strategy.DefaultExpiry(time.Hour),
		famSeq:   strategy.Sequence(2),
		famPlain: strategy.Unmanaged(),
	}
}

// shadowFault makes the server fail or block the shadow reads (the
// ReadRows whose filter strips values) and fail the caller's reads of the
// row "boom".
type shadowFault struct {
	failShadow  atomic.Bool
	blockShadow atomic.Bool
	entered     chan struct{} // a blocked shadow read arrived
	cancelled   atomic.Int64  // blocked shadow reads released by cancellation
}

func (s *shadowFault) options() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if !strings.HasSuffix(info.FullMethod, "/ReadRows") {
			return h(srv, ss)
		}
		req := new(bigtablepb.ReadRowsRequest)
		if err := ss.RecvMsg(req); err != nil {
			return err
		}
		if strings.Contains(prototext.Format(req.GetFilter()), "strip_value_transformer") {
			if s.failShadow.Load() {
				return status.Error(codes.FailedPrecondition, "shadow read refused by the test server")
			}
			if s.blockShadow.Load() {
				s.entered <- struct{}{}
				<-ss.Context().Done()
				s.cancelled.Add(1)
				return ss.Context().Err()
			}
		} else {
			for _, k := range req.GetRows().GetRowKeys() {
				if string(k) == "boom" {
					return status.Error(codes.PermissionDenied, "caller read refused by the test server")
				}
			}
		}
		return h(srv, &replayStream{ServerStream: ss, req: req})
	})}
}

// replayStream hands the handler the request the interceptor already read.
type replayStream struct {
	grpc.ServerStream
	req  *bigtablepb.ReadRowsRequest
	used bool
}

func (r *replayStream) RecvMsg(m any) error {
	if r.used {
		return r.ServerStream.RecvMsg(m)
	}
	r.used = true
	proto.Merge(m.(proto.Message), r.req)
	return nil
}

type env struct {
	h      *bttestharness.Harness
	rec    *metrics.Recorder
	reader *sdkmetric.ManualReader
	client *ttlclient.Client
	tbl    *ttlclient.Table
	ctx    context.Context
}

func newEnv(t *testing.T, fault *shadowFault, opts ...ttlclient.ClientOption) *env {
	t.Helper()
	cfg := bttestharness.Config{}
	if fault != nil {
		cfg.ServerOptions = fault.options()
	}
	h, err := bttestharness.StartWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	require.NoError(t, h.CreateTable(context.Background(), table, schema()))

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	rec := metrics.New(metrics.WithMeterProvider(mp))

	all := append([]ttlclient.ClientOption{ttlclient.WithClock(h.Clock), ttlclient.WithRecorder(rec), ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance)}, opts...)
	client := ttlclient.Wrap(h.Raw, all...)
	t.Cleanup(func() { _ = client.Close() })
	tbl, err := client.Open(context.Background(), table, schema())
	require.NoError(t, err)
	return &env{h: h, rec: rec, reader: reader, client: client, tbl: tbl, ctx: context.Background()}
}

// waitShadows polls until n shadow reads have ended (completed or failed),
// with a deadline: they run on their own goroutines.
func (e *env) waitShadows(t *testing.T, n float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		done := promValue(t, e.rec, metrics.ShadowReadsTotal, "table", table) + promValue(t, e.rec, metrics.ShadowReadsFailedTotal, "table", table)
		if done >= n {
			require.Equal(t, n, done, "more shadow reads than expected")
			return
		}
		require.True(t, time.Now().Before(deadline), "waited 10s for %v shadow reads, saw %v", n, done)
		time.Sleep(2 * time.Millisecond)
	}
}

// otelData collects the OpenTelemetry SDK's view.
func (e *env) otelData(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, e.reader.Collect(e.ctx, &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// series finds the series of the named family whose labels include the
// given name, value pairs; nil when there is none.
func series(t *testing.T, c prometheus.Collector, name string, pairs ...string) *dto.Metric {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(pairs); i += 2 {
				if have[pairs[i]] != pairs[i+1] {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// promValue is the value of a counter series, 0 when it does not exist.
func promValue(t *testing.T, c prometheus.Collector, name string, pairs ...string) float64 {
	t.Helper()
	m := series(t, c, name, pairs...)
	if m == nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

func itoaTS(ts bigtable.Timestamp) string { return strconv.FormatInt(int64(ts), 10) }

func sortStrings(s []string) { sort.Strings(s) }
