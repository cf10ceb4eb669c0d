package metrics_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/ttlclient"
)

// reads runs the same reads through tbl: each result as text, each error.
func reads(t *testing.T, e *env, tbl *ttlclient.Table) (results []string, errs []error) {
	t.Helper()
	for _, row := range []string{"r1", "r2", "boom"} {
		r, err := tbl.ReadRow(e.ctx, row)
		results = append(results, describe(r))
		errs = append(errs, err)
	}
	for _, set := range []bigtable.RowSet{bigtable.RowList{"r1", "r2"}, bigtable.InfiniteRange(""), bigtable.RowList{"r1", "boom"}} {
		var rows []string
		err := tbl.ReadRows(e.ctx, set, func(r bigtable.Row) bool {
			rows = append(rows, describe(r))
			return true
		})
		results = append(results, strings.Join(rows, "|"))
		errs = append(errs, err)
	}
	return results, errs
}

func describe(r bigtable.Row) string {
	var parts []string
	for fam, items := range r {
		for _, it := range items {
			parts = append(parts, fam+"/"+it.Column+"@"+itoaTS(it.Timestamp)+"="+string(it.Value))
		}
	}
	sortStrings(parts)
	return r.Key() + ":" + strings.Join(parts, ",")
}

// Acceptance 2: a shadow read cannot change the caller's result or error,
// whether it succeeds or fails.
func TestShadowReadCannotAlterResultOrError(t *testing.T) {
	fault := &shadowFault{entered: make(chan struct{}, 16)}
	e := newEnv(t, fault, ttlclient.WithShadowSampling(1))
	plant(t, e)
	plain, err := ttlclient.Wrap(e.h.Raw, ttlclient.WithClock(e.h.Clock), ttlclient.WithAdminClient(e.h.Admin, bttestharness.Project, bttestharness.Instance)).Open(context.Background(), table, schema())
	require.NoError(t, err)

	wantResults, wantErrs := reads(t, e, plain)
	require.Error(t, wantErrs[2], "the test server refuses the caller's read of boom")
	require.Contains(t, wantResults[0], "one/one:c@", "r1's live cells are read")

	for _, failing := range []bool{false, true} {
		fault.failShadow.Store(failing)
		before := promValue(t, e.rec, metrics.ShadowReadsTotal, "table", table) + promValue(t, e.rec, metrics.ShadowReadsFailedTotal, "table", table)
		failedBefore := promValue(t, e.rec, metrics.ShadowReadsFailedTotal, "table", table)

		results, errs := reads(t, e, e.tbl)
		assert.Equal(t, wantResults, results, "shadow failing=%v", failing)
		require.Len(t, errs, len(wantErrs))
		for i := range errs {
			if wantErrs[i] == nil {
				assert.NoError(t, errs[i], "read %d, shadow failing=%v", i, failing)
				continue
			}
			require.Error(t, errs[i], "read %d", i)
			assert.Equal(t, wantErrs[i].Error(), errs[i].Error(), "read %d, shadow failing=%v", i, failing)
		}
		// Four successful reads were sampled; the two failed ones were not.
		e.waitShadows(t, before+4)
		failed := promValue(t, e.rec, metrics.ShadowReadsFailedTotal, "table", table) - failedBefore
		if failing {
			assert.Equal(t, 4.0, failed, "every shadow read failed")
		} else {
			assert.Zero(t, failed)
		}
	}
}

// shadowGoroutines counts the goroutines running a shadow read.
func shadowGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "ttlclient.(*observer).runShadow")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Acceptance 2: shadow reads run at most the concurrency limit at once, the
// rest are dropped and counted, the caller never waits for them, and Close
// cancels them and leaves no goroutine behind.
func TestCloseStopsShadowReads(t *testing.T) {
	fault := &shadowFault{entered: make(chan struct{}, 16)}
	fault.blockShadow.Store(true)
	e := newEnv(t, fault, ttlclient.WithShadowSampling(1), ttlclient.WithShadowConcurrency(2))
	plant(t, e)
	require.Zero(t, shadowGoroutines())

	for i := 0; i < 5; i++ {
		// Returns although the shadow reads it started are blocked.
		r, err := e.tbl.ReadRow(e.ctx, "r1")
		require.NoError(t, err)
		require.NotNil(t, r)
	}
	for i := 0; i < 2; i++ {
		select {
		case <-fault.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the shadow reads did not reach the server")
		}
	}
	assert.Equal(t, 2, shadowGoroutines(), "the concurrency limit")
	assert.Equal(t, 3.0, promValue(t, e.rec, metrics.ShadowReadsDroppedTotal, "table", table), "reads beyond the limit are dropped")

	require.NoError(t, e.client.Close())
	assert.Zero(t, shadowGoroutines(), "Close waits for the shadow reads it cancels")
	assert.Equal(t, 2.0, promValue(t, e.rec, metrics.ShadowReadsFailedTotal, "table", table), "the cancelled shadow reads")
	deadline := time.Now().Add(10 * time.Second)
	for fault.cancelled.Load() < 2 {
		require.True(t, time.Now().Before(deadline), "the server never saw the shadow reads cancelled")
		time.Sleep(2 * time.Millisecond)
	}

	// The wrapped client stays usable; a closed client starts no shadow read.
	_, err := e.tbl.ReadRow(e.ctx, "r1")
	require.NoError(t, err)
	assert.Zero(t, shadowGoroutines())
	assert.Equal(t, 4.0, promValue(t, e.rec, metrics.ShadowReadsDroppedTotal, "table", table))
}
