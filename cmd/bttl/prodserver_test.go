package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/bttest_harness/prodserver"
	migratepkg "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/internal/throttle"
)

// inProcess runs bttl in-process against the server at addr, with exactly
// args.
func inProcess(t *testing.T, addr string, args ...string) result {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	return runRaw(context.Background(), args...)
}

// The production-rules server with the profiles the runbook recommends
// for batch work: a Data Boost profile for the scans, a single-cluster
// transactional one for bttl's writes.
func batchProfilesServer(t *testing.T, cfg prodserver.Config) *prodserver.Server {
	cfg.Profiles = []prodserver.AppProfile{
		prodserver.DataBoost("boost", prodserver.DefaultCluster),
		prodserver.SingleCluster("batch", prodserver.DefaultCluster, true),
		prodserver.SingleCluster("reader", prodserver.DefaultCluster, false),
	}
	return prodserver.New(t, cfg)
}

// The job examples' sharded migrate and audit, with their state in the
// instance (bigtable://), run on the production-rules server with a Data Boost
// read profile and a transactional write profile, and end as the same job on a
// plain server does: the same cells, the same merged reports. Data Boost reads
// lag (30 minutes by default): Flush stands for that wait, once after the load
// and once after the migration (issue 36).
func TestShardedJobsOnProdServer(t *testing.T) {
	migrateArgs, n := kubernetesArgs(t, "kubernetes-migrate.yaml")
	auditArgs, tasks := cloudRunArgs(t, "cloudrun-audit.yaml")
	ctx := context.Background()
	srv := batchProfilesServer(t, prodserver.Config{})
	_, dcProd := clientsWithTable(t, srv.Addr, "events", "clicks") // the default profile: single-cluster, transactional
	plainAC, dcPlain, plainAddr := newServer(t)
	require.NoError(t, plainAC.CreateTable(ctx, "events"))
	require.NoError(t, plainAC.CreateColumnFamily(ctx, "events", "clicks"))
	now := time.Now()
	// The last legacy write more than Data Boost's lag ago: a migration
	// scanning through Data Boost sooner is refused (it could miss them).
	switched := now.Add(-dataBoostLag - 5*time.Minute)
	model := loadHashedReal(t, []*bigtable.Client{dcProd, dcPlain}, "events", "clicks", 300, switched.Add(-time.Minute))
	require.NoError(t, srv.Flush(ctx))

	schema := writeFile(t, "schema.yaml", "tables: {events: {clicks: {strategy: one-second}}}\n")
	fill := func(args []string) []string {
		args = withFlag(t, args, "project", "p")
		args = withFlag(t, args, "instance", "i")
		return withFlag(t, args, "schema", schema)
	}
	profiles := []string{"-app-profile=boost", "-write-app-profile=batch"}
	migrate := withFlag(t, withFlag(t, fill(migrateArgs), "first-switch", switched.UTC().Format(time.RFC3339Nano)), "written-before", switched.UTC().Format(time.RFC3339Nano))
	migrate = without(migrate, fmt.Sprintf("-shard-count=%d", n))
	report := flagValue(t, migrate, "report")

	// A Data Boost profile alone cannot take the moves: refused before any
	// write, naming the profile and the flag to give.
	r := inProcess(t, srv.Addr, append(append([]string(nil), migrate...), "-app-profile=boost", "-shard=0/3")...)
	require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, `app profile "boost" (-app-profile, as no -write-app-profile is given)`)
	assert.Contains(t, r.stderr, "Data Boost")
	assert.Contains(t, r.stderr, "give -write-app-profile a single-cluster profile that allows single-row transactions")
	// A single-cluster profile without transactions neither.
	r = inProcess(t, srv.Addr, append(append([]string(nil), migrate...), "-write-app-profile=reader", "-shard=0/3")...)
	require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, `app profile "reader" (-write-app-profile)`)
	assert.Contains(t, r.stderr, "does not allow transactional writes")
	require.Equal(t, model, storedFamily(t, dcProd, "events", "clicks"), "nothing written by the refused runs")

	for i := range n {
		r := inProcess(t, srv.Addr, append(append(append([]string(nil), migrate...), profiles...), fmt.Sprintf("-shard=%d/%d", i, n))...)
		require.Equal(t, exitOK, r.code, "migrate shard %d: %s%s", i, r.stdout, r.stderr)
	}
	r = inProcess(t, plainAddr, migrate...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	got := storedFamily(t, dcProd, "events", "clicks")
	assert.Equal(t, storedFamily(t, dcPlain, "events", "clicks"), got, "the production-rules server's job = the plain server's run")
	assert.Equal(t, shiftedModel(model, 30*24*time.Hour), got, "every cell at its timestamp + 30 days, none lost or doubled")

	r = inProcess(t, srv.Addr, "-project=p", "-instance=i", "-write-app-profile=batch", "migrate", "merge", "-json", report)
	require.Equal(t, exitOK, r.code, r.stderr)
	var job migratepkg.JobResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &job))
	assert.True(t, job.Complete)
	assert.EqualValues(t, len(model), job.Total.MovedByJob(), "%+v", job.Total)
	// Reading the reports through Data Boost would miss the latest: refused.
	r = inProcess(t, srv.Addr, "-project=p", "-instance=i", "-app-profile=boost", "migrate", "merge", "-json", report)
	require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, `app profile "boost"`)

	// The audit job, once the Data Boost replica caught up with the moves;
	// before, an audit through it still sees the cells unmoved: the scans
	// do go through Data Boost.
	auditCmd := withFlag(t, fill(auditArgs), "now", now.UTC().Format(time.RFC3339Nano))
	auditReport := flagValue(t, auditCmd, "report")
	stale := inProcess(t, srv.Addr, append(without(auditCmd, "-report="+auditReport), "-json", "-app-profile=boost", "-checkpoint=")...)
	require.Equal(t, exitOK, stale.code, stale.stderr)
	require.NoError(t, srv.Flush(ctx))
	for i := range tasks {
		r := inProcess(t, srv.Addr, append(append(append([]string(nil), auditCmd...), profiles...), fmt.Sprintf("-shard=%d/%d", i, tasks))...)
		require.Equal(t, exitOK, r.code, "audit task %d: %s", i, r.stderr)
	}
	merged := inProcess(t, srv.Addr, "-project=p", "-instance=i", "-write-app-profile=batch", "audit", "merge", "-json", auditReport)
	require.Equal(t, exitOK, merged.code, merged.stderr)
	one := inProcess(t, plainAddr, append(without(auditCmd, "-report="+auditReport), "-json")...)
	require.Equal(t, exitOK, one.code, one.stderr)
	var m, s auditOutput
	require.NoError(t, json.Unmarshal([]byte(merged.stdout), &m))
	require.NoError(t, json.Unmarshal([]byte(one.stdout), &s))
	assert.Equal(t, s.Tables, m.Tables, "merged shard reports on the production-rules server = one audit on a plain server")
	assert.Equal(t, s.Findings, m.Findings)
	require.Len(t, s.Tables, 1)
	assert.EqualValues(t, len(model), s.Tables[0].Cells)
	var st auditOutput
	require.NoError(t, json.Unmarshal([]byte(stale.stdout), &st))
	assert.NotEqual(t, st.Tables, m.Tables, "the Data Boost replica lagged the moves until the flush")
	assert.Zero(t, srv.Counts().Refused, "the server refused nothing: the refusals above were bttl's, before any request")
}

// rateSample is one progress line's pace.
type rateSample struct {
	at        time.Duration // since the command started, from the line's index
	rate      float64
	throttled int
}

var rateRE = regexp.MustCompile(`rate (\d+) cells/s(?: \((\d+) throttled\))?`)

// rates reads the pace from progress lines written every interval.
func rates(stderr string, every time.Duration) []rateSample {
	var out []rateSample
	for _, line := range strings.Split(stderr, "\n") {
		m := rateRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r, _ := strconv.ParseFloat(m[1], 64)
		k, _ := strconv.Atoi(m[2])
		out = append(out, rateSample{at: time.Duration(len(out)+1) * every, rate: r, throttled: k})
	}
	return out
}

func logRates(t *testing.T, what string, samples []rateSample) {
	t.Helper()
	var b strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&b, "  %5.1fs  %5.0f cells/s  %3d throttled\n", s.at.Seconds(), s.rate, s.throttled)
	}
	t.Logf("%s, rate over time:\n%s", what, b.String())
}

// With 30% of requests answered RESOURCE_EXHAUSTED (with RetryInfo), audit,
// plan and migrate finish with exact results (those of the same commands on a
// plain server) and the rate of audit and migrate adapts: it falls below
// -cells-per-second, the ceiling, and the metric says so (issue 36).
func TestThrottledAuditAndMigrateAdapt(t *testing.T) {
	// Seed 2 throttles the first request and 5 of the first 12: the audit
	// sends a dozen or so, so every run sees RESOURCE_EXHAUSTED there too
	// (a random seed left none in about 1% of runs). BTTL_SEED tries
	// others.
	seed := uint64(2)
	if s := os.Getenv("BTTL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "BTTL_SEED")
		seed = v
	}
	t.Logf("seed %d (BTTL_SEED replays it)", seed)
	srv := prodserver.New(t, prodserver.Config{ThrottleRate: 0.3, Seed: seed})
	// Loaded past the rules, straight into the cluster: the load is not
	// what is measured.
	clientsWithTable(t, srv.Addr, "legacy", "f")
	_, dcProd := serverClientsAt(t, srv.ClusterAddr(prodserver.DefaultCluster))
	plainAC, dcPlain, plainAddr := newServer(t)
	createLegacy(t, plainAC)
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dcProd, "legacy", "f", 200, 5, now)
	require.Equal(t, model, loadRealTimestamps(t, dcPlain, "legacy", "f", 200, 5, now))
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	const every = 200 * time.Millisecond
	const ceiling = 400
	dir := t.TempDir()

	// Audit: -json output compared with the plain server's.
	auditArgs := []string{"-project=p", "-instance=i", "-schema=" + schema, "audit", "-table=legacy", "-json", "-workers=2", "-bytes",
		"-now=" + now.Add(time.Hour).UTC().Format(time.RFC3339Nano), "-cells-per-second=" + strconv.Itoa(ceiling)}
	start := time.Now()
	a := inProcess(t, srv.Addr, append(append([]string(nil), auditArgs...), "-progress="+every.String(),
		"-checkpoint=bigtable://bttl_checkpoints", "-report=bigtable://bttl_checkpoints/throttled", "-metrics-out="+filepath.Join(dir, "audit.prom"))...)
	require.Equal(t, exitOK, a.code, a.stderr)
	t.Logf("throttled audit of %d cells: %s, server counts %+v", len(model), time.Since(start), srv.Counts())
	plain := inProcess(t, plainAddr, auditArgs...)
	require.Equal(t, exitOK, plain.code, plain.stderr)
	var got, want auditOutput
	require.NoError(t, json.Unmarshal([]byte(a.stdout), &got))
	require.NoError(t, json.Unmarshal([]byte(plain.stdout), &want))
	assert.Equal(t, want.Tables, got.Tables, "exact: the throttled audit's figures are the plain server's")
	assert.Equal(t, want.Findings, got.Findings)
	auditRates := rates(a.stderr, every)
	logRates(t, "audit", auditRates)
	requireAdapted(t, auditRates, readFileString(t, filepath.Join(dir, "audit.prom")), "audit")

	// Plan (and apply's refusal, which the same scan decides): the same
	// exact counts and refusals as on the plain server.
	throttledBefore := srv.Counts().Throttled
	planArgs := []string{"-project=p", "-instance=i", "-schema=" + schema, "plan", "-workers=2"}
	pp := inProcess(t, srv.Addr, planArgs...)
	plainPlan := inProcess(t, plainAddr, planArgs...)
	assert.Equal(t, plainPlan.code, pp.code, pp.stdout+pp.stderr)
	nowRE := regexp.MustCompile(`before now \S+Z`) // each run's own instant
	assert.Equal(t, nowRE.ReplaceAllString(plainPlan.stdout, "before now T"), nowRE.ReplaceAllString(pp.stdout, "before now T"),
		"exact: the throttled plan's counts are the plain server's")
	assert.Empty(t, pp.stderr)
	t.Logf("throttled plan: %d RESOURCE_EXHAUSTED answers", srv.Counts().Throttled-throttledBefore)

	// Migrate, with its checkpoint and report in the instance.
	throttledBefore = srv.Counts().Throttled
	migrateArgs := append([]string{"-project=p", "-instance=i", "-schema=" + schema, "migrate", "-table=legacy", "-family=f", "-from=real", "-ttl=30d",
		"-workers=2", "-cells-per-second=" + strconv.Itoa(ceiling)}, switchedAt(now)...)
	start = time.Now()
	mg := inProcess(t, srv.Addr, append(append([]string(nil), migrateArgs...), "-progress="+every.String(),
		"-checkpoint=bigtable://bttl_checkpoints", "-report=bigtable://bttl_checkpoints/throttled-migrate", "-metrics-out="+filepath.Join(dir, "migrate.prom"))...)
	require.Equal(t, exitOK, mg.code, mg.stdout+mg.stderr)
	t.Logf("throttled migrate of %d cells: %s, %d more RESOURCE_EXHAUSTED answers", len(model), time.Since(start), srv.Counts().Throttled-throttledBefore)
	assert.Contains(t, mg.stdout, fmt.Sprintf("%d cell(s) moved to their new timestamp", len(model)))
	pm := inProcess(t, plainAddr, migrateArgs...)
	require.Equal(t, exitOK, pm.code, pm.stdout+pm.stderr)
	gotCells := storedFamily(t, dcProd, "legacy", "f")
	assert.Equal(t, shiftedModel(model, 30*24*time.Hour), gotCells, "exact: every cell moved once, none lost")
	assert.Equal(t, storedFamily(t, dcPlain, "legacy", "f"), gotCells)
	migrateRates := rates(mg.stderr, every)
	logRates(t, "migrate", migrateRates)
	requireAdapted(t, migrateRates, readFileString(t, filepath.Join(dir, "migrate.prom")), "migrate")
}

// requireAdapted checks that the pace went below the ceiling after
// RESOURCE_EXHAUSTED answers, in the progress lines and in the metric.
func requireAdapted(t *testing.T, samples []rateSample, prom, command string) {
	t.Helper()
	require.NotEmpty(t, samples, "progress lines with the rate")
	last := samples[len(samples)-1]
	assert.Positive(t, last.throttled, "RESOURCE_EXHAUSTED answers were seen")
	lowest := samples[0].rate
	for _, s := range samples {
		lowest = min(lowest, s.rate)
	}
	assert.Less(t, lowest, 400.0, "the rate fell below the ceiling")
	m := regexp.MustCompile(throttle.MetricRate + `\{command="` + command + `"\} (\S+)`).FindStringSubmatch(prom)
	require.NotNil(t, m, prom)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	assert.Less(t, v, 400.0, "the metric's rate is below the ceiling")
	assert.Regexp(t, throttle.MetricThrottled+`\{command="`+command+`"\} [1-9]`, prom)
}

// serverClientsAt returns clients on the server at addr without changing
// the test's BIGTABLE_EMULATOR_HOST for long.
func serverClientsAt(t *testing.T, addr string) (*bigtable.AdminClient, *bigtable.Client) {
	t.Helper()
	prev := os.Getenv("BIGTABLE_EMULATOR_HOST")
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	defer os.Setenv("BIGTABLE_EMULATOR_HOST", prev)
	ctx := context.Background()
	ac, err := bigtable.NewAdminClient(ctx, "p", "i")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ac.Close() })
	dc, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dc.Close() })
	return ac, dc
}

// Each kind of profile that cannot take bttl's writes is refused with a
// *profileError naming it, where it came from and why; a single-cluster
// transactional profile passes.
func TestClassifyWriteProfile(t *testing.T) {
	single := func(tx bool) *btapb.AppProfile {
		return &btapb.AppProfile{RoutingPolicy: &btapb.AppProfile_SingleClusterRouting_{SingleClusterRouting: &btapb.AppProfile_SingleClusterRouting{ClusterId: "c", AllowTransactionalWrites: tx}}}
	}
	boost := single(false)
	boost.Isolation = &btapb.AppProfile_DataBoostIsolationReadOnly_{DataBoostIsolationReadOnly: &btapb.AppProfile_DataBoostIsolationReadOnly{}}
	multi := &btapb.AppProfile{RoutingPolicy: &btapb.AppProfile_MultiClusterRoutingUseAny_{MultiClusterRoutingUseAny: &btapb.AppProfile_MultiClusterRoutingUseAny{}}}
	for _, c := range []struct {
		name   string
		ap     *btapb.AppProfile
		reason string
	}{
		{"data boost", boost, "Data Boost"},
		{"multi-cluster", multi, "multi-cluster routing"},
		{"no transactions", single(false), "does not allow transactional writes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := classifyWriteProfile(c.ap, "p1", "-write-app-profile")
			var pe *profileError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "p1", pe.Profile)
			assert.Equal(t, "-write-app-profile", pe.Flag)
			assert.Contains(t, pe.Reason, c.reason)
			assert.Contains(t, err.Error(), "give -write-app-profile")
		})
	}
	require.NoError(t, classifyWriteProfile(single(true), "p1", "-write-app-profile"))
}

// On a replicated instance the default profile routes to any cluster: a
// migration given no profile at all is refused before it writes, naming
// the default profile; given a transactional write profile it runs.
func TestMigrateOnReplicatedInstanceNeedsAWriteProfile(t *testing.T) {
	srv := prodserver.New(t, prodserver.Config{
		Clusters: []prodserver.Cluster{{ID: "a"}, {ID: "b"}},
		Profiles: []prodserver.AppProfile{prodserver.SingleCluster("batch", "a", true)},
	})
	clientsWithTable(t, srv.Addr, "legacy", "f")
	_, dc := serverClientsAt(t, srv.ClusterAddr("a"))
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dc, "legacy", "f", 20, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	args := append([]string{"-project=p", "-instance=i", "-schema=" + schema, "migrate", "-table=legacy", "-family=f", "-from=real", "-ttl=30d"}, switchedAt(now)...)
	r := inProcess(t, srv.Addr, args...)
	require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, `app profile "default" (the instance's default profile, as neither -app-profile nor -write-app-profile is given)`)
	assert.Contains(t, r.stderr, "multi-cluster routing")
	require.Equal(t, model, storedFamily(t, dc, "legacy", "f"), "nothing written")
	// The scan may go anywhere (the default, multi-cluster profile); the
	// moves go to cluster a, whose cells the scan may read only once
	// replicated: pinned there for the test.
	srv.RouteMultiCluster("a")
	r = inProcess(t, srv.Addr, append(args, "-write-app-profile=batch")...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Equal(t, shiftedModel(model, 30*24*time.Hour), storedFamily(t, dc, "legacy", "f"))
}

// The progress line's pace: the rate and the RESOURCE_EXHAUSTED answers
// so far; nothing while the pace is unlimited and nothing was throttled.
func TestProgressLineShowsThePace(t *testing.T) {
	var buf strings.Builder
	p := &progress{w: &buf, pace: throttle.New(throttle.Config{Ceiling: 500})}
	p.update(scan.Progress{Ranges: 4, Rows: 1, Cells: 2})
	assert.Equal(t, "scanned 1 rows, 2 cells, about 0% (0 of 4 key ranges), rate 500 cells/s\n", buf.String())
	buf.Reset()
	p.pace.Throttle(0)
	p.update(scan.Progress{Ranges: 4, Rows: 1, Cells: 2})
	assert.Equal(t, "scanned 1 rows, 2 cells, about 0% (0 of 4 key ranges), rate 350 cells/s (1 throttled)\n", buf.String())
	buf.Reset()
	p.pace = throttle.New(throttle.Config{})
	p.update(scan.Progress{Ranges: 4, Rows: 1, Cells: 2})
	assert.Equal(t, "scanned 1 rows, 2 cells, about 0% (0 of 4 key ranges)\n", buf.String(), "unlimited, never throttled")
	p.pace.Throttle(0)
	buf.Reset()
	p.update(scan.Progress{Ranges: 4, Rows: 1, Cells: 2})
	assert.Equal(t, "scanned 1 rows, 2 cells, about 0% (0 of 4 key ranges), rate unlimited (1 throttled)\n", buf.String())
}
