package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/bttest_harness/prodserver"
)

// An in-place migration whose scan goes through a Data Boost profile
// (-app-profile) sees only the writes of more than half an hour ago:
// while the last legacy writer switched (-written-before) less than that
// ago, its "nothing to migrate" (exit 0, next: bttl apply, whose one-second
// rule would collect the unmoved cells) is a guess. It is refused before
// any write, naming the instant from which it may run and the other way;
// through the write profile the same run moves every cell.
func TestMigrateThroughDataBoostWaitsForItsLag(t *testing.T) {
	srv := batchProfilesServer(t, prodserver.Config{})
	clientsWithTable(t, srv.Addr, "legacy", "f")
	_, dc := serverClientsAt(t, srv.ClusterAddr(prodserver.DefaultCluster))
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dc, "legacy", "f", 20, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	args := append([]string{"-project=p", "-instance=i", "-schema=" + schema, "-write-app-profile=batch", "migrate", "-table=legacy", "-family=f", "-from=real", "-ttl=30d"}, switchedAt(now)...)
	for _, dry := range []bool{false, true} {
		a := append([]string(nil), args...)
		if dry {
			a = append(a, "-dry-run")
		}
		r := inProcess(t, srv.Addr, append(a, "-app-profile=boost")...)
		require.Equal(t, exitFindings, r.code, "dry run %v: %s%s", dry, r.stdout, r.stderr)
		assert.Contains(t, r.stderr, `app profile "boost" (-app-profile) is a Data Boost profile`)
		assert.Contains(t, r.stderr, "-written-before")
		assert.NotContains(t, r.stdout, "nothing to migrate")
	}
	require.Equal(t, model, storedFamily(t, dc, "legacy", "f"), "nothing written")
	r := inProcess(t, srv.Addr, append(args, "-app-profile=batch")...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Equal(t, shiftedModel(model, 30*24*time.Hour), storedFamily(t, dc, "legacy", "f"))
}

// bttl apply checks, by scanning the family, that its rule collects no
// stored cell. Through a Data Boost profile (-app-profile) that scan may
// miss the last half hour's writes: it read none of 40 cells written a
// second before, said "exact: read all 0 row(s)" and set a one-second rule
// that collects them all. Refused, nothing changed, unless -force; through
// a single-cluster profile the check sees the cells and refuses as ever.
func TestApplyRefusesToCheckThroughDataBoost(t *testing.T) {
	srv := batchProfilesServer(t, prodserver.Config{})
	ac, _ := clientsWithTable(t, srv.Addr, "legacy", "f")
	_, dc := serverClientsAt(t, srv.ClusterAddr(prodserver.DefaultCluster))
	now := time.Now().Add(-time.Second)
	loadRealTimestamps(t, dc, "legacy", "f", 20, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	gcRule := func() string {
		ti, err := ac.TableInfo(context.Background(), "legacy")
		require.NoError(t, err)
		require.Len(t, ti.FamilyInfos, 1)
		return ti.FamilyInfos[0].GCPolicy
	}
	before := gcRule()
	r := inProcess(t, srv.Addr, "-project=p", "-instance=i", "-schema="+schema, "-app-profile=boost", "apply", "-yes")
	require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, `app profile "boost" (-app-profile) is a Data Boost profile`)
	assert.Contains(t, r.stderr, "-force")
	assert.Equal(t, before, gcRule(), "nothing changed")
	r = inProcess(t, srv.Addr, "-project=p", "-instance=i", "-schema="+schema, "-app-profile=batch", "apply", "-yes")
	require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "40 cell(s)")
	assert.Equal(t, before, gcRule(), "nothing changed")
}

// -write-app-profile given empty sends the writes through the instance's
// default profile: a refusal of that profile says so, not that neither
// flag was given.
func TestEmptyWriteAppProfileNamedAsGiven(t *testing.T) {
	srv := prodserver.New(t, prodserver.Config{
		Clusters: []prodserver.Cluster{{ID: "a"}, {ID: "b"}},
		Profiles: []prodserver.AppProfile{prodserver.SingleCluster("batch", "a", true)},
	})
	clientsWithTable(t, srv.Addr, "legacy", "f")
	_, dc := serverClientsAt(t, srv.ClusterAddr("a"))
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dc, "legacy", "f", 5, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	r := inProcess(t, srv.Addr, append([]string{"-project=p", "-instance=i", "-schema=" + schema, "-app-profile=batch", "-write-app-profile=",
		"migrate", "-table=legacy", "-family=f", "-from=real", "-ttl=30d"}, switchedAt(now)...)...)
	require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, `app profile "default" (-write-app-profile, given empty: the instance's default profile)`)
	assert.NotContains(t, r.stderr, "neither")
	require.Equal(t, model, storedFamily(t, dc, "legacy", "f"), "nothing written")
}

// An app profile is named by its ID in the data API's requests
// (app_profile_id) and in GetAppProfile's name: one given as its full
// resource name is a usage error naming the ID to give, before any call,
// rather than "no such profile" or the server's refusal of the first scan.
func TestAppProfileGivenAsFullNameIsAUsageError(t *testing.T) {
	srv := batchProfilesServer(t, prodserver.Config{})
	clientsWithTable(t, srv.Addr, "legacy", "f")
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	for _, flag := range []string{"-app-profile", "-write-app-profile"} {
		r := inProcess(t, srv.Addr, "-project=p", "-instance=i", "-schema="+schema, flag+"=projects/p/instances/i/appProfiles/batch",
			"audit", "-table=legacy", "-json")
		require.Equal(t, exitError, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stderr, flag+`: "projects/p/instances/i/appProfiles/batch" is a profile's resource name: give its ID, "batch"`)
	}
	assert.Zero(t, srv.Counts().Refused, "no call")
}

// A write profile the instance does not have is a wrong argument (exit
// 2, as a table that does not exist); one that exists but cannot take the
// command's writes is a refusal (exit 1). Neither sends a data call.
func TestWriteProfileExitCodes(t *testing.T) {
	srv := batchProfilesServer(t, prodserver.Config{})
	clientsWithTable(t, srv.Addr, "legacy", "f")
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	run := func(profile string) result {
		return inProcess(t, srv.Addr, "-project=p", "-instance=i", "-schema="+schema, "-write-app-profile="+profile,
			"audit", "-table=legacy", "-json", "-now="+time.Now().UTC().Format(time.RFC3339Nano), "-report=bigtable://bttl_state/job1")
	}
	r := run("nosuch")
	assert.Equal(t, exitError, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, `app profile "nosuch" (-write-app-profile) cannot take bttl's writes`)
	assert.Contains(t, r.stderr, "the instance has no such profile")
	r = run("boost")
	assert.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "Data Boost")
	assert.Zero(t, srv.Counts().Refused, "no data call")
}

// bttl plan through a Data Boost profile counts what its scan saw, which
// may leave out the last half hour's cells: it says so (and that apply
// refuses to check through it), rather than only "exact: read all 0
// row(s)" over 40 cells written a second before.
func TestPlanThroughDataBoostSaysWhatItCannotSee(t *testing.T) {
	srv := batchProfilesServer(t, prodserver.Config{})
	clientsWithTable(t, srv.Addr, "legacy", "f")
	_, dc := serverClientsAt(t, srv.ClusterAddr(prodserver.DefaultCluster))
	loadRealTimestamps(t, dc, "legacy", "f", 20, 2, time.Now().Add(-time.Second))
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	r := inProcess(t, srv.Addr, "-project=p", "-instance=i", "-schema="+schema, "-app-profile=boost", "plan")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, `app profile "boost" (-app-profile) is a Data Boost profile, whose reads may miss the writes of the last 35m: the counts above leave them out`)
	r = inProcess(t, srv.Addr, "-project=p", "-instance=i", "-schema="+schema, "-app-profile=batch", "plan")
	require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.NotContains(t, r.stderr, "Data Boost")
}

// The commands that only read bttl's records back (audit merge, migrate
// merge, checkpoint list) send no CheckAndMutateRow: a single-cluster
// profile without transactional writes serves them; Data Boost (whose
// reads lag) and multi-cluster routing (whose reads may miss a record
// just written on another cluster) are still refused, and checkpoint rm,
// which writes, still needs transactions.
func TestReadingRecordsNeedsNoTransactions(t *testing.T) {
	srv := batchProfilesServer(t, prodserver.Config{})
	clientsWithTable(t, srv.Addr, "legacy", "f")
	_, dc := serverClientsAt(t, srv.ClusterAddr(prodserver.DefaultCluster))
	now := time.Now().Add(-time.Second)
	loadRealTimestamps(t, dc, "legacy", "f", 10, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	r := inProcess(t, srv.Addr, "-project=p", "-instance=i", "-schema="+schema, "-write-app-profile=batch", "audit", "-table=legacy", "-json",
		"-now="+now.UTC().Format(time.RFC3339Nano), "-report=bigtable://bttl_state/job1")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	for _, args := range [][]string{
		{"audit", "merge", "-json", "bigtable://bttl_state/job1"},
		{"checkpoint", "list", "bigtable://bttl_state"},
	} {
		r := inProcess(t, srv.Addr, append([]string{"-project=p", "-instance=i", "-write-app-profile=reader"}, args...)...)
		assert.Equal(t, exitOK, r.code, "%v: %s%s", args, r.stdout, r.stderr)
		r = inProcess(t, srv.Addr, append([]string{"-project=p", "-instance=i", "-write-app-profile=boost"}, args...)...)
		assert.Equal(t, exitFindings, r.code, "%v: %s%s", args, r.stdout, r.stderr)
		assert.Contains(t, r.stderr, `app profile "boost" (-write-app-profile)`)
	}
	r = inProcess(t, srv.Addr, "-project=p", "-instance=i", "-write-app-profile=reader", "checkpoint", "rm", "-dry-run", "bigtable://bttl_state")
	assert.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "does not allow transactional writes")
	assert.Zero(t, srv.Counts().Refused)
}
