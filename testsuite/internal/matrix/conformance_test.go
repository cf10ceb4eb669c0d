package matrix_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/testsuite/internal/matrix"
)

func TestMain(m *testing.M) {
	// bttest logs every GC pass; thousands of lines would bury the report.
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

const defaultOps = 10_000

// settings reads BTTL_SEED (replay) and BTTL_OPS (length).
func settings(t *testing.T) (seed uint64, ops int) {
	t.Helper()
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("BTTL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "BTTL_SEED")
		seed = v
	}
	ops = defaultOps
	if s := os.Getenv("BTTL_OPS"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "BTTL_OPS")
		ops = v
	}
	return seed, ops
}

func runSuite(t *testing.T, server string, h *bttestharness.Harness) {
	seed, ops := settings(t)
	t.Logf("conformance: seed %d, %d operations (replay with BTTL_SEED=%d BTTL_OPS=%d)", seed, ops, seed, ops)
	tbl := h.MustTable(t, "conformance", matrix.Schema())
	start := time.Now()
	stats, err := matrix.Run(context.Background(), matrix.Config{
		Seed:   seed,
		Ops:    ops,
		Target: matrix.TableTarget(tbl),
		Clock:  h.Clock,
		Raw:    tbl.Raw(),
		Logf:   t.Logf,

		FlushIdle: h.Client.FlushIdleRefreshes,
	})
	summary := fmt.Sprintf("conformance on %s: seed %d, %d of %d operations: %s in %s (replay with BTTL_SEED=%d BTTL_OPS=%d)",
		server, seed, stats.Steps, ops, stats, time.Since(start).Round(time.Millisecond), seed, ops)
	t.Log(summary)
	reportSummary(t, summary, err)
	require.NoError(t, err)
	require.Equal(t, ops, stats.Steps)
}

// Acceptance 1, in-process server.
func TestConformanceBttest(t *testing.T) {
	t.Parallel() // the two servers' runs share the machine's cores
	runSuite(t, "bttest (in-process)", bttestharness.New(t))
}

// Acceptance 1, the gcloud emulator as a second real server.
func TestConformanceEmulator(t *testing.T) {
	t.Parallel()
	h, _ := bttestharness.NewOnEmulator(t, bttestharness.Config{})
	runSuite(t, "cbtemulator", h)
}

// reportSummary appends the run's seed and operation count to the file
// BTTL_CONFORMANCE_REPORT names, so CI shows them even though `go test`
// hides the logs of passing packages.
func reportSummary(t *testing.T, summary string, runErr error) {
	path := os.Getenv("BTTL_CONFORMANCE_REPORT")
	if path == "" {
		return
	}
	outcome := "PASS"
	if runErr != nil {
		outcome = "FAIL"
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err, "BTTL_CONFORMANCE_REPORT")
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s %s\n", outcome, summary)
	require.NoError(t, err)
}
