package matrix_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/matrix"
	"github.com/bttl/bttl/testsuite/internal/model"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

// knownHoles are matrix cells ("path/option") that fail because of a known
// hole another change closes; each is skipped, naming the issue item.
// Remove the entry when the fix lands. BTTL_MATRIX_HOLES=1 runs them
// anyway. Issue 26's (items 1, 3, 4) are closed.
var knownHoles = map[string]string{}

// knownHoleChecks are checks of the matrix ("WriteTimeAfterRefresh") that
// fail because of a known hole; each is off while listed
// (BTTL_MATRIX_HOLES=1 turns it on). Issue 26 item 10's is closed.
var knownHoleChecks = map[string]string{}

// The servers of the matrix.
const (
	serverBttest   = "bttest"
	serverEmulator = "cbtemulator"
)

var servers = []string{serverBttest, serverEmulator}

// matrixCellOps is the length of each cell's history in the CI slice.
const matrixCellOps = 200

// matrixCell is one cell of the matrix.
type matrixCell struct {
	server, path string
	option       matrix.FamilyOption
}

func (c matrixCell) name() string { return c.server + "/" + c.path + "/" + c.option.Name }

// hole is the knownHoles entry gating c, "" when none.
func (c matrixCell) hole() string { return knownHoles[c.path+"/"+c.option.Name] }

// matrixSelection is the cells to run: with BTTL_MATRIX unset the CI
// slice (every path x option pair once, on the server the seed rotates to),
// else every cell of both servers whose "server/path/option" matches the
// pattern (path.Match; a pattern of two parts is "path/option" on both
// servers, "*" is the whole matrix).
func matrixSelection(t *testing.T, seed uint64) (cells []matrixCell, slice bool) {
	pattern := os.Getenv("BTTL_MATRIX")
	if pattern == "" {
		i := 0
		for _, p := range matrix.Paths {
			for _, o := range matrix.FamilyOptions {
				cells = append(cells, matrixCell{server: servers[(seed+uint64(i))%2], path: p, option: o})
				i++
			}
		}
		return cells, true
	}
	switch strings.Count(pattern, "/") {
	case 0:
		if pattern != "*" {
			t.Fatalf("BTTL_MATRIX=%q: want server/path/option, path/option or *", pattern)
		}
		pattern = "*/*/*"
	case 1:
		pattern = "*/" + pattern
	}
	for _, s := range servers {
		for _, p := range matrix.Paths {
			for _, o := range matrix.FamilyOptions {
				c := matrixCell{server: s, path: p, option: o}
				ok, err := path.Match(pattern, c.name())
				require.NoError(t, err, "BTTL_MATRIX")
				if ok {
					cells = append(cells, c)
				}
			}
		}
	}
	if len(cells) == 0 {
		t.Fatalf("BTTL_MATRIX=%q matches no cell", pattern)
	}
	return cells, false
}

// TestMatrix is the composition matrix (docs/design.md#composition): the
// same seeded history through every client path with every family option,
// each run checked against the model. Unset, BTTL_MATRIX runs the CI slice;
// see docs/correctness.md for replaying a cell and the long run.
func TestMatrix(t *testing.T) {
	t.Parallel() // beside the conformance runs: the package's wall time is the longest, not the sum
	seed, _ := settings(t)
	cells, slice := matrixSelection(t, seed)
	ops := matrixCellOps
	if s := os.Getenv("BTTL_OPS"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "BTTL_OPS")
		ops = v
	}
	runHoles := os.Getenv("BTTL_MATRIX_HOLES") == "1"
	if s := os.Getenv("BTTL_MATRIX_STEPS"); s != "" && !slice {
		total, err := strconv.Atoi(s)
		require.NoError(t, err, "BTTL_MATRIX_STEPS")
		n := 0
		for _, c := range cells {
			if c.hole() == "" || runHoles {
				n++
			}
		}
		ops = max(1, total/max(n, 1))
	}
	t.Logf("matrix: seed %d, %d cells, %d operations each (replay a cell with BTTL_SEED=%d BTTL_OPS=%d BTTL_MATRIX=server/path/option)",
		seed, len(cells), ops, seed, ops)
	for _, server := range servers {
		var mine []matrixCell
		for _, c := range cells {
			if c.server == server {
				mine = append(mine, c)
			}
		}
		if len(mine) == 0 {
			continue
		}
		t.Run(server, func(t *testing.T) {
			t.Parallel() // the two servers share the machine's cores
			var h *bttestharness.Harness
			if server == serverBttest {
				h = bttestharness.New(t)
			} else {
				h, _ = bttestharness.NewOnEmulator(t, bttestharness.Config{})
			}
			start := time.Now()
			var total matrix.Stats
			var failed []string
			skipped := 0
			for i, c := range mine {
				if why := c.hole(); why != "" && !runHoles {
					t.Run(c.path+"/"+c.option.Name, func(t *testing.T) {
						t.Skipf("known hole, %s (BTTL_MATRIX_HOLES=1 runs it)", why)
					})
					skipped++
					continue
				}
				ok := t.Run(c.path+"/"+c.option.Name, func(t *testing.T) {
					stats, err := runCell(t, h, fmt.Sprintf("m%d", i), c, seed, ops)
					total = addStats(total, stats)
					if err != nil {
						t.Fatalf("matrix cell %s: %v\nreplay: BTTL_SEED=%d BTTL_OPS=%d BTTL_MATRIX=%s go test -run '^TestMatrix$' ./testsuite/internal/matrix/",
							c.name(), err, seed, ops, c.name())
					}
				})
				if !ok {
					failed = append(failed, c.name())
				}
			}
			summary := fmt.Sprintf("matrix on %s: seed %d, %d cells of %d operations (%d skipped as known holes): %s in %s (replay a cell with BTTL_SEED=%d BTTL_OPS=%d BTTL_MATRIX=server/path/option)",
				server, seed, len(mine)-skipped, ops, skipped, total, time.Since(start).Round(time.Millisecond), seed, ops)
			t.Log(summary)
			var runErr error
			if len(failed) > 0 {
				runErr = fmt.Errorf("failed cells: %s", strings.Join(failed, ", "))
				summary += "; failed: " + strings.Join(failed, ", ")
			}
			reportSummary(t, summary, runErr)
		})
	}
}

func addStats(a, b matrix.Stats) matrix.Stats {
	a.Steps += b.Steps
	a.Writes += b.Writes
	a.Bulk += b.Bulk
	a.Cond += b.Cond
	a.Refused += b.Refused
	a.ClockMoves += b.ClockMoves
	a.Expires += b.Expires
	a.Moved += b.Moved
	a.ExpireSkipped += b.ExpireSkipped
	a.WriteTimes += b.WriteTimes
	a.NotMet += b.NotMet
	a.MaxWriteTimes += b.MaxWriteTimes
	a.Reads += b.Reads
	a.CellsCompared += b.CellsCompared
	a.StoredExpired += b.StoredExpired
	a.Collected += b.Collected
	a.MaxStored = max(a.MaxStored, b.MaxStored)
	a.ServerDuplicates += b.ServerDuplicates
	a.IdleDue += b.IdleDue
	a.IdleRefreshed += b.IdleRefreshed
	return a
}

// runCell builds cell c's path on a new table of h and runs the suite.
func runCell(t *testing.T, h *bttestharness.Harness, table string, c matrixCell, seed uint64, ops int) (matrix.Stats, error) {
	ctx := context.Background()
	schema, fams, _ := matrix.MatrixSchema(c.option)
	require.NoError(t, h.CreateTable(ctx, table, schema))
	t.Cleanup(func() { _ = h.Admin.DeleteTable(context.Background(), table) })
	cfg := matrix.Config{
		Seed: seed, Ops: ops, Clock: h.Clock, Raw: h.Raw.Open(table),
		Schema: schema, Families: fams, FullCheckEvery: min(100, ops),
	}
	if why, off := knownHoleChecks["WriteTimeAfterRefresh"]; off && os.Getenv("BTTL_MATRIX_HOLES") != "1" {
		t.Logf("check WriteTimeAfterRefresh off: known hole, %s", why)
	} else {
		cfg.WriteTimeAfterRefresh = true
	}
	var guardOpts []wireguard.Option
	switch c.path {
	case matrix.PathMutation, matrix.PathTableAPI:
		// The recorder lets the suite compare the library's time-to-idle
		// results with the model's after each read (shadow reads off: they
		// would only add reads).
		cfg.Idle = &matrix.IdleRecorder{}
		tbl, err := h.Client.Open(context.Background(), table, schema, ttlclient.WithRecorder(cfg.Idle), ttlclient.WithShadowSampling(0))
		require.NoError(t, err)
		cfg.Target, cfg.FlushIdle = matrix.TableTarget(tbl), h.Client.FlushIdleRefreshes
		if c.path == matrix.PathTableAPI {
			cfg.Target, cfg.Semantics = matrix.APITarget(tbl), model.Semantics{StampTTL: true}
		}
		return matrix.Run(ctx, cfg)
	case matrix.PathGuardReadFilter, matrix.PathTTLGuardReadFilter:
		guardOpts = append(guardOpts, wireguard.WithReadFilter())
	}
	// The guard's observational options run in every guarded cell: key
	// redaction (messages only: the refusal classes must not change) and a
	// recorder, checked below. The ttlclient paths on h.Client keep the
	// defaults, so both settings run.
	rec := &guardRefusals{}
	guardOpts = append(guardOpts, wireguard.WithClock(h.Clock), wireguard.WithRecorder(rec),
		wireguard.WithKeyRedaction([]byte("matrix")))
	g, err := wireguard.New(map[string]strategy.Schema{table: schema}, guardOpts...)
	require.NoError(t, err)
	dial := g.DialOptions()
	if c.path != matrix.PathGuard && c.path != matrix.PathGuardReadFilter {
		// bttl's client dials its own interceptor, then the guard's.
		dial = append(ttlclient.DialOptions(), dial...)
	}
	dc, err := h.DialDataClient(ctx, dial...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dc.Close() })
	switch c.path {
	case matrix.PathGuard, matrix.PathGuardReadFilter:
		cfg.Target, err = matrix.WireTarget(dc.Open(table), schema, h.Clock, c.path == matrix.PathGuard)
		require.NoError(t, err)
		cfg.Semantics = model.Semantics{Wire: true}
	default:
		// The ttlclient+guard paths send their single-row transactions
		// (Expire, refreshes, moves, conditional mutations) through a
		// second client, as ClientConfig.TransactionalAppProfile does
		// (docs/design.md#app-profiles): the path through Table.transact's
		// own table; the Mutation and TableAPI paths keep one client.
		tx, err := h.DialDataClient(ctx, dial...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Close() })
		client := ttlclient.Wrap(dc.Client, ttlclient.WithClock(h.Clock),
			ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance),
			ttlclient.WithKeyRedaction([]byte("matrix")), ttlclient.WithTransactionalClient(tx.Client, "transactional"))
		t.Cleanup(func() { _ = client.Close() })
		tbl, err := client.Open(context.Background(), table, schema)
		require.NoError(t, err)
		cfg.Target, cfg.FlushIdle = matrix.TableTarget(tbl), client.FlushIdleRefreshes
	}
	st, err := matrix.Run(ctx, cfg)
	if err == nil {
		rec.check(t, c.path, table, schema, st.Refused)
	}
	return st, err
}

// Every strategy x option the matrix uses is either taken, by every entry
// point that builds a schema (strategy, ttlclient.Open, wireguard.New), or
// not expressible (the option's type does not fit the strategy), exactly
// where docs/design.md#composition says; and the combinations of values
// that types cannot keep out are refused by every entry point.
func TestMatrixRefusesInvalidCombinations(t *testing.T) {
	// notTakenBy is the documented table: strategy -> the options its
	// constructor does not take.
	notTakenBy := map[string][]string{
		matrix.FamOne:   nil,
		matrix.FamDef:   {"DefaultTTL"},
		matrix.FamSeq:   {"WriteTime", "SingleValue", "MaxVersions", "IdleTTL", "MaxTTL", "MaxTTL+ClampTTL", "DefaultTTL", "WriteTime+IdleTTL"},
		matrix.FamPlain: {"WriteTime", "SingleValue", "MaxVersions", "IdleTTL", "MaxTTL", "MaxTTL+ClampTTL", "DefaultTTL", "WriteTime+IdleTTL"},
	}
	h := bttestharness.New(t)
	check := func(t *testing.T, name string, p strategy.Policy, wantRefused bool) {
		t.Helper()
		schema := strategy.Schema{"f": p, matrix.FamPlain: strategy.Unmanaged()}
		errs := map[string]error{"strategy.Schema.Validate": schema.Validate()}
		_, errs["ttlclient.Client.Open"] = h.Client.Open(context.Background(), "never-created", schema, ttlclient.WithoutVerify())
		_, errs["wireguard.New"] = wireguard.New(map[string]strategy.Schema{"t": schema})
		for entry, err := range errs {
			if wantRefused {
				require.ErrorIs(t, err, strategy.ErrInvalidPolicy, "%s: %s must refuse %s", name, entry, p)
			} else {
				require.NoError(t, err, "%s: %s must take %s", name, entry, p)
			}
		}
	}
	for _, opt := range matrix.FamilyOptions {
		if opt.Name == matrix.OptionMixed {
			require.NoError(t, matrix.Schema().Validate())
			continue
		}
		schema, _, inapplicable := matrix.MatrixSchema(opt)
		for fam, base := range matrix.MatrixBases() {
			notTaken := false
			for _, o := range notTakenBy[fam] {
				notTaken = notTaken || o == opt.Name
			}
			require.Equal(t, notTaken, inapplicable[fam], "MatrixSchema(%s) on %s", opt.Name, fam)
			p, ok := opt.Policy(base)
			require.Equal(t, !notTaken, ok, "%s on %s", opt.Name, fam)
			if notTaken {
				require.Equal(t, base, schema[fam], "%s keeps its base policy under %s", fam, opt.Name)
				continue
			}
			require.Equal(t, p, schema[fam])
			check(t, fam+"/"+opt.Name, p, false)
		}
	}
	// Values the matrix does not run, refused for what they are or what
	// they combine: types cannot keep these out.
	sec, ms := time.Second, time.Millisecond
	for name, p := range map[string]strategy.Policy{
		"default expiry D over MaxTTL":       strategy.DefaultExpiry(1500*ms, strategy.WithMaxTTL(sec, strategy.RefuseLonger)),
		"IdleTTL over MaxTTL":                strategy.OneSecond(strategy.WithIdleTTL(3*sec, strategy.DefaultIdleDebounce), strategy.WithMaxTTL(2*sec, strategy.RefuseLonger)),
		"IdleTTL over MaxTTL, even clamping": strategy.OneSecond(strategy.WithIdleTTL(3*sec, strategy.DefaultIdleDebounce), strategy.WithMaxTTL(2*sec, strategy.ClampLonger)),
		"a clamped max TTL of zero":          strategy.OneSecond(strategy.WithMaxTTL(0, strategy.ClampLonger)),
		"one-second DefaultTTL over MaxTTL":  strategy.OneSecond(strategy.WithDefaultTTL(3*sec), strategy.WithMaxTTL(2*sec, strategy.RefuseLonger)),
		"an idle debounce of a zero IdleTTL": strategy.DefaultExpiry(sec, strategy.WithIdleTTL(0, 0.5)),
		"an idle debounce of 1":              strategy.DefaultExpiry(sec, strategy.WithIdleTTL(sec, 1)),
	} {
		check(t, name, p, true)
	}
	// ... and the clamping one-second default TTL over the cap is taken:
	// the default is clamped like any TTL.
	check(t, "one-second DefaultTTL over MaxTTL, clamping", strategy.OneSecond(strategy.WithDefaultTTL(3*sec), strategy.WithMaxTTL(2*sec, strategy.ClampLonger)), false)
}

// guardRefusals is the matrix guard's wireguard.Recorder.
type guardRefusals struct {
	mu  sync.Mutex
	got [][3]string
}

func (r *guardRefusals) GuardRefused(table, family, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, [3]string{table, family, reason})
}

// check: under ttlclient the guard refuses nothing, since ttlclient
// refuses before sending and marks what it sends; under a plain client the
// guard recorded refusals exactly when the run saw some (refused of them),
// and every label is bounded (its table or "", a family of the schema or
// "", a rule).
func (r *guardRefusals) check(t *testing.T, path, table string, schema strategy.Schema, refused int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if path == matrix.PathTTLGuard || path == matrix.PathTTLGuardReadFilter {
		assert.Empty(t, r.got, "the guard refused requests ttlclient sent")
		return
	}
	assert.Equal(t, refused > 0, len(r.got) > 0, "%d refusals seen, %d recorded by the guard", refused, len(r.got))
	for _, l := range r.got {
		assert.Contains(t, []string{table, ""}, l[0], "table label %v", l)
		if l[1] != "" {
			assert.Contains(t, schema, l[1], "family label %v", l)
		}
		assert.NotEmpty(t, l[2], "reason label %v", l)
	}
}
