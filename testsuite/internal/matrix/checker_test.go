package matrix_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/matrix"
	"github.com/bttl/bttl/testsuite/internal/model"
	"github.com/bttl/bttl/ttlclient"
)

// wrongReads writes through the library but reads with its own, wrong,
// composition of the TTL filter and the caller's.
type wrongReads struct {
	matrix.Target // the library's writes
	tbl           *ttlclient.Table
	compose       func(now bigtable.Timestamp, user bigtable.Filter) bigtable.Filter
	clock         matrix.Clock
}

func (w wrongReads) filter(user bigtable.Filter) bigtable.ReadOption {
	return bigtable.RowFilter(w.compose(bigtable.Timestamp(w.clock.Now().UnixMicro()), user))
}

func (w wrongReads) ReadRow(ctx context.Context, row string, f bigtable.Filter) (bigtable.Row, error) {
	return w.tbl.Raw().ReadRow(ctx, row, w.filter(f))
}

func (w wrongReads) ReadRows(ctx context.Context, rs bigtable.RowSet, f bigtable.Filter, fn func(bigtable.Row) bool) error {
	return w.tbl.Raw().ReadRows(ctx, rs, fn, w.filter(f))
}

// expectCaught runs the suite against a wrong implementation and requires
// the checker to report a mismatch.
func expectCaught(t *testing.T, name string, compose func(fb *filters.Builder) func(bigtable.Timestamp, bigtable.Filter) bigtable.Filter) {
	t.Helper()
	// Without GC the excess versions and expired cells a wrong filter
	// shows stay stored, so the seed catches it at the same step on any
	// machine; with GC racing the reads, a loaded machine could collect
	// every such cell before a read met it.
	t.Setenv("BIGTABLE_EMULATOR_HOST", "") // a shared emulator may be collecting already
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	tbl := h.MustTable(t, "wrong", matrix.Schema())
	fb, err := filters.New(matrix.Schema())
	require.NoError(t, err)
	const seed, ops = 4, 3000
	stats, err := matrix.Run(context.Background(), matrix.Config{
		Seed:   seed,
		Ops:    ops,
		Target: wrongReads{Target: matrix.TableTarget(tbl), tbl: tbl, compose: compose(fb), clock: h.Clock},
		Clock:  h.Clock,
	})
	var mismatch *matrix.MismatchError
	require.ErrorAs(t, err, &mismatch, "%s: the checker did not notice in %d steps", name, stats.Steps)
	require.Less(t, stats.Steps, ops)
	t.Logf("%s caught at step %d:\n%s", name, mismatch.Step, err)
}

// Acceptance 2: the caller's filter placed before the TTL filter. On a
// sequence family a caller's timestamp or value range then picks cells
// beyond the N kept, and on an age family with max versions LatestN counts
// expired cells.
func TestCheckerCatchesCallerFilterBeforeTTL(t *testing.T) {
	expectCaught(t, "Chain(caller, ttl)", func(fb *filters.Builder) func(bigtable.Timestamp, bigtable.Filter) bigtable.Filter {
		return func(now bigtable.Timestamp, user bigtable.Filter) bigtable.Filter {
			if user == nil {
				return fb.TTL(now)
			}
			return bigtable.ChainFilters(user, fb.TTL(now))
		}
	})
}

// A TTL filter built at a stale time (as a filter cached too long would
// be) shows cells that expired in between.
func TestCheckerCatchesStaleTTLFilter(t *testing.T) {
	expectCaught(t, "TTL(now - 300ms)", func(fb *filters.Builder) func(bigtable.Timestamp, bigtable.Filter) bigtable.Filter {
		return func(now bigtable.Timestamp, user bigtable.Filter) bigtable.Filter {
			stale := now - bigtable.Timestamp(300*time.Millisecond/time.Microsecond)
			if user == nil {
				return fb.TTL(stale)
			}
			return bigtable.ChainFilters(fb.TTL(stale), user)
		}
	})
}

// misclassified refuses what the library refuses, but always as an invalid
// sequence number: the checker compares refusal classes, not just that a
// write was refused.
type misclassified struct{ matrix.Target }

func (m misclassified) Apply(ctx context.Context, row string, ops []model.Op) error {
	if err := m.Target.Apply(ctx, row, ops); err != nil {
		return &ttlclient.CellError{Row: row, Err: strategy.ErrInvalidSequence}
	}
	return nil
}

func TestCheckerCatchesWrongRefusalClass(t *testing.T) {
	h := bttestharness.New(t)
	tbl := h.MustTable(t, "misclassified", matrix.Schema())
	const seed, ops = 4, 3000
	stats, err := matrix.Run(context.Background(), matrix.Config{
		Seed: seed, Ops: ops, Target: misclassified{matrix.TableTarget(tbl)}, Clock: h.Clock,
		FlushIdle: h.Client.FlushIdleRefreshes,
	})
	var mismatch *matrix.MismatchError
	require.ErrorAs(t, err, &mismatch, "the checker did not notice in %d steps", stats.Steps)
	require.Contains(t, mismatch.Detail, "refused as invalid-sequence")
}

// A plain client whose connection does not carry the guard (as under an
// emulator when the guard's ClientOptions were dropped, issue 26 item 9)
// sends what the guard would refuse: the wire path's checker notices.
func TestCheckerCatchesUnguardedPlainClient(t *testing.T) {
	h := bttestharness.New(t)
	schema, fams, _ := matrix.MatrixSchema(matrix.FamilyOptions[0])
	require.NoError(t, h.CreateTable(context.Background(), "unguarded", schema))
	target, err := matrix.WireTarget(h.Raw.Open("unguarded"), schema, h.Clock, true)
	require.NoError(t, err)
	const seed, ops = 4, 3000
	stats, err := matrix.Run(context.Background(), matrix.Config{
		Seed: seed, Ops: ops, Target: target, Clock: h.Clock, Schema: schema, Families: fams,
		Semantics: model.Semantics{Wire: true},
	})
	var mismatch *matrix.MismatchError
	require.ErrorAs(t, err, &mismatch, "the checker did not notice in %d steps", stats.Steps)
	require.Contains(t, mismatch.Detail, "the library sent it")
}

// A read mismatch's report carries what a flake that does not replay needs
// (the seed replays the draws, not real time): the failing cells' row
// history with the model's, the injected clock's and the wall clock's
// readings at each entry, and what the model and the server store in the
// failing column.
func TestReportCarriesClockReadingsAndStoredCells(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	tbl := h.MustTable(t, "stale", matrix.Schema())
	fb, err := filters.New(matrix.Schema())
	require.NoError(t, err)
	stale := func(now bigtable.Timestamp, user bigtable.Filter) bigtable.Filter {
		f := fb.TTL(now - bigtable.Timestamp(300*time.Millisecond/time.Microsecond))
		if user == nil {
			return f
		}
		return bigtable.ChainFilters(f, user)
	}
	const seed, ops = 4, 3000
	stats, err := matrix.Run(context.Background(), matrix.Config{
		Seed: seed, Ops: ops, Clock: h.Clock, Raw: h.Raw.Open("stale"),
		Target:    wrongReads{Target: matrix.TableTarget(tbl), tbl: tbl, compose: stale, clock: h.Clock},
		FlushIdle: h.Client.FlushIdleRefreshes,
	})
	var mismatch *matrix.MismatchError
	require.ErrorAs(t, err, &mismatch, "the checker did not notice in %d steps", stats.Steps)
	require.NotEmpty(t, mismatch.RowHistory)
	hist := strings.Join(mismatch.RowHistory, "\n")
	require.Regexp(t, `step \d+: Apply r\d .*\[model \d+(\+\d+ns)?, clock \d+(\+\d+ns)?, real \d+(\+\d+ns)? \(clock \S+ ahead\)\]`, hist)
	require.NotEmpty(t, mismatch.Stored)
	stored := strings.Join(mismatch.Stored, "\n")
	require.Contains(t, stored, "model stores:")
	require.Contains(t, stored, "server stores:")
	require.Contains(t, stored, "clock lead: the model's last instant ")
	require.Contains(t, err.Error(), "history of row r")
	t.Logf("caught at step %d:\n%s", mismatch.Step, err)
}

// lyingIdle reports, on the first ReadRow after the 20th that returns a
// cell of the idle family, a time-to-idle refresh that failed, as a
// library would whose refresh the server refused: the model cannot know
// of it, so the checker fails that read naming the library's results and
// the reason, with the model's time-to-idle decisions in the row's
// history.
type lyingIdle struct {
	matrix.Target
	rec   *matrix.IdleRecorder
	reads *int
	lied  *string // the row of the read it lied after
}

func (l lyingIdle) ReadRow(ctx context.Context, row string, f bigtable.Filter) (bigtable.Row, error) {
	got, err := l.Target.ReadRow(ctx, row, f)
	if *l.reads++; *l.reads > 20 && *l.lied == "" && len(got[matrix.FamDef]) > 0 {
		*l.lied = row
		l.rec.IdleRefresh(matrix.FamDef, ttlclient.IdleFailed, 1)
		l.rec.IdleRefreshFailed(matrix.FamDef, "rpc")
	}
	return got, err
}

func TestCheckerCatchesIdleResultsTheModelDidNotDecide(t *testing.T) {
	h := bttestharness.New(t)
	rec := &matrix.IdleRecorder{}
	tbl := h.MustTable(t, "idle", matrix.Schema(), ttlclient.WithRecorder(rec), ttlclient.WithShadowSampling(0))
	reads, lied := 0, ""
	const seed, ops = 4, 3000
	stats, err := matrix.Run(context.Background(), matrix.Config{
		Seed: seed, Ops: ops, Clock: h.Clock, Idle: rec,
		Target:    lyingIdle{Target: matrix.TableTarget(tbl), rec: rec, reads: &reads, lied: &lied},
		FlushIdle: h.Client.FlushIdleRefreshes,
	})
	var mismatch *matrix.MismatchError
	require.ErrorAs(t, err, &mismatch, "the checker did not notice in %d steps", stats.Steps)
	require.NotEmpty(t, lied, "no read returned an idle cell in %d steps", stats.Steps)
	require.Contains(t, mismatch.What, "ReadRow "+lied, "caught at the read it lied after")
	require.Contains(t, mismatch.Detail, "the library reports")
	require.Contains(t, mismatch.Detail, "failed 1")
	require.Contains(t, mismatch.Detail, "def: rpc")
	hist := strings.Join(mismatch.RowHistory, "\n")
	require.Contains(t, hist, "row "+lied+" (")
	require.Regexp(t, `time-to-idle: ReadRow `+lied+` at \d+ with .* returned `+lied+`/def:\S+ at \d+: \S+ left, idle TTL \S+, debounce \S+ \(refresh under \S+ left\): the model says (due|not due)`, hist)
	t.Logf("caught at step %d:\n%s", mismatch.Step, err)
}
