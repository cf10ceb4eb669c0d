package ttlclient_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/ttlclient"
)

// logBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const incompatibleLog = "fails bttl's compatibility checks"

// incompatibleCount is bttl_client_incompatible_total{table, check}.
func incompatibleCount(t *testing.T, rec *metrics.Recorder, table, check string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(rec))
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != metrics.ClientIncompatibleTotal {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels[metrics.LabelTable] == table && labels[metrics.LabelCheck] == check {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// The client version this module builds with passes every check.
func TestCheckCompatibilityPassesOnThisBuild(t *testing.T) {
	require.NoError(t, ttlclient.CheckCompatibility())
}

// Issue 30, item 2: a client version whose bigtable.Mutation layout bttl
// cannot read (the hook breaks the check) was found only at the first
// TableAPI write, with no log line and no metric. It is now reported by
// CheckCompatibility, logged once when the client is made (NewClient, on
// the default logger, and Wrap, on WithLogger's) and counted at each Open
// on the table's recorder.
func TestIncompatibleClientSeenAtNewClient(t *testing.T) {
	restore := ttlclient.BreakMutationReader()
	defer restore()

	err := ttlclient.CheckCompatibility()
	require.ErrorIs(t, err, ttlclient.ErrMutationUnreadable)
	var ce *ttlclient.CompatibilityError
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Failed, 1)
	assert.Equal(t, "mutation", ce.Failed[0].Check)
	assert.Contains(t, ce.Failed[0].Effect, "Table.API() write fails with ErrMutationUnreadable")
	// A test binary's build info lists no dependencies; a program's does.
	version := ce.Version
	if version == "" {
		version = "(version unknown)"
	}
	assert.Contains(t, err.Error(), "cloud.google.com/go/bigtable "+version+" fails 1 compatibility check(s); mutation: ")

	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", mixedSchema()))

	// NewClient logs on the default logger, before any table is opened.
	var logs logBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	t.Setenv("BIGTABLE_EMULATOR_HOST", h.Addr)
	c, err := ttlclient.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}})
	require.NoError(t, err, "the client is made: what fails is the paths the check covers")
	t.Cleanup(func() { _ = c.Close() })
	assert.Equal(t, 1, strings.Count(logs.String(), incompatibleLog), logs.String())
	assert.Contains(t, logs.String(), "checks=[mutation]")

	// Each Open counts it on the table's recorder; the log line stays one.
	rec := metrics.New()
	tbl, err := c.Open(ctx, "t", mixedSchema(), ttlclient.WithRecorder(rec))
	require.NoError(t, err)
	assert.Equal(t, 1.0, incompatibleCount(t, rec, "t", "mutation"))
	assert.Zero(t, incompatibleCount(t, rec, "t", "row-filter"))
	assert.Equal(t, 1, strings.Count(logs.String(), incompatibleLog))

	// What the log and the metric announce: a TableAPI write is refused.
	m := bigtable.NewMutation()
	m.Set(famPlain, "p", 1000, []byte("v"))
	require.ErrorIs(t, tbl.API().Apply(ctx, "r", m), ttlclient.ErrMutationUnreadable)

	// NewClientWithConfig logs on the logger among its options.
	var ownLogs logBuffer
	own, err := ttlclient.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, ttlclient.ClientConfig{
		ClientConfig: bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}},
		Options:      []ttlclient.ClientOption{ttlclient.WithLogger(slog.New(slog.NewTextHandler(&ownLogs, nil)))},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = own.Close() })
	assert.Equal(t, 1, strings.Count(ownLogs.String(), incompatibleLog), ownLogs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), incompatibleLog), "not on the default logger")

	// Wrap logs on the client's logger.
	var wrapLogs logBuffer
	ttlclient.Wrap(h.Raw, ttlclient.WithLogger(slog.New(slog.NewTextHandler(&wrapLogs, nil))))
	assert.Equal(t, 1, strings.Count(wrapLogs.String(), incompatibleLog), wrapLogs.String())
}

// A compatible client logs nothing and counts nothing.
func TestCompatibleClientQuiet(t *testing.T) {
	h := bttestharness.New(t)
	var logs logBuffer
	rec := metrics.New()
	c := ttlclient.Wrap(h.Raw, ttlclient.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance))
	require.NoError(t, h.CreateTable(context.Background(), "t", mixedSchema()))
	_, err := c.Open(context.Background(), "t", mixedSchema(), ttlclient.WithRecorder(rec))
	require.NoError(t, err)
	assert.NotContains(t, logs.String(), incompatibleLog)
	assert.Zero(t, incompatibleCount(t, rec, "t", "mutation"))
}

// Issue 30, item 8: a test switch (the hook breaking the layout check) was
// read on every production write. The check now runs when a client is
// made and the client keeps its result: breaking it afterwards changes no
// write of that client, and a client made meanwhile sees the failure.
func TestLayoutCheckIsTheClientsNotEachWrites(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := bigtable.NewMutation()
	m.Set(famPlain, "p", 1000, []byte("v"))
	restore := ttlclient.BreakMutationReader()
	defer restore()
	require.NoError(t, e.tbl.API().Apply(e.ctx, "r", m), "the client checked its layout when it was made")

	broken := ttlclient.Wrap(e.h.Raw, ttlclient.WithAdminClient(e.h.Admin, bttestharness.Project, bttestharness.Instance),
		ttlclient.WithLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { _ = broken.Close() })
	tbl, err := broken.Open(e.ctx, "t", mixedSchema())
	require.NoError(t, err)
	require.ErrorIs(t, tbl.API().Apply(e.ctx, "r", m), ttlclient.ErrMutationUnreadable)
}
