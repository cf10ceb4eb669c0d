package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cellKey is one stored cell: row, qualifier, timestamp.
type cellKey struct {
	row, col string
	ts       bigtable.Timestamp
}

// storedFamily is every cell of family fam of table, unfiltered, by key;
// a key seen twice fails the test (no cell may be duplicated).
func storedFamily(t *testing.T, dc *bigtable.Client, table, fam string) map[cellKey]string {
	t.Helper()
	out := map[cellKey]string{}
	err := dc.Open(table).ReadRows(context.Background(), bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		for _, it := range r[fam] {
			k := cellKey{it.Row, strings.TrimPrefix(it.Column, fam+":"), it.Timestamp}
			if _, dup := out[k]; dup {
				t.Errorf("cell %v stored twice", k)
			}
			out[k] = string(it.Value)
		}
		return true
	}, bigtable.RowFilter(bigtable.FamilyFilter("^"+fam+"$")))
	require.NoError(t, err)
	return out
}

// loadRealTimestamps is the test loader: rows*cols cells of family fam
// written by a plain client with real timestamps spread over the last 10
// days (whole milliseconds), as a legacy writer leaves them. It returns
// the model of what it wrote.
func loadRealTimestamps(t *testing.T, dc *bigtable.Client, table, fam string, rows, cols int, now time.Time) map[cellKey]string {
	t.Helper()
	ctx := context.Background()
	tbl := dc.Open(table)
	model := make(map[cellKey]string, rows*cols)
	const batch = 500
	for lo := 0; lo < rows; lo += batch {
		var keys []string
		var muts []*bigtable.Mutation
		for r := lo; r < min(lo+batch, rows); r++ {
			row := fmt.Sprintf("row%07d", r)
			m := bigtable.NewMutation()
			for c := 0; c < cols; c++ {
				col := fmt.Sprintf("c%02d", c)
				ts := bigtable.Time(now.Add(-time.Duration(1+(r*cols+c)%864_000) * time.Second)).TruncateToMilliseconds()
				v := row + "/" + col
				m.Set(fam, col, ts, []byte(v))
				model[cellKey{row, col, ts}] = v
			}
			keys = append(keys, row)
			muts = append(muts, m)
		}
		errs, err := tbl.ApplyBulk(ctx, keys, muts)
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
	}
	return model
}

func shiftedModel(model map[cellKey]string, d time.Duration) map[cellKey]string {
	out := make(map[cellKey]string, len(model))
	for k, v := range model {
		k.ts += bigtable.Timestamp(d / time.Microsecond)
		out[k] = v
	}
	return out
}

// migrateCells is the size of the acceptance runs: 20,000 by default,
// BTTL_MIGRATE_CELLS (e.g. 1000000) for the full run.
func migrateCells(t *testing.T) int {
	if s := os.Getenv("BTTL_MIGRATE_CELLS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "BTTL_MIGRATE_CELLS")
		return n
	}
	return 20_000
}

const oneSecondSchema = "tables: {legacy: {f: {strategy: one-second}}}\n"

// switchedAt is the flags of writers all switched at once at switched (a
// second or more before now), with a skew below the second between the
// newest loaded cell and the switch.
func switchedAt(switched time.Time) []string {
	at := switched.UTC().Format(time.RFC3339Nano)
	return []string{"-first-switch", at, "-written-before", at, "-clock-skew", "500ms"}
}

// Acceptance 1: cells with real timestamps (a legacy writer's, on
// cbtemulator) migrated to one-second expiry with a 30-day TTL: every
// cell's timestamp becomes its old one + 30 days, none lost or duplicated
// (a full scan against the model); a second run changes nothing and says
// so; bttl apply then accepts the one-second rule without -force.
func TestMigrateRealToOneSecondThenApply(t *testing.T) {
	ac, dc, addr := emulatorClients(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTable(ctx, "legacy"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "legacy", "f"))
	n := migrateCells(t)
	const cols = 10
	now := time.Now().Add(-time.Second) // every writer switched then
	start := time.Now()
	model := loadRealTimestamps(t, dc, "legacy", "f", n/cols, cols, now)
	t.Logf("loaded %d cells in %s", len(model), time.Since(start))
	require.Equal(t, model, storedFamily(t, dc, "legacy", "f"))
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	args := append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d", "-workers", "4"}, switchedAt(now)...)

	r := bttl(t, addr, "", append(args, "-dry-run")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "dry run: nothing written")
	assert.Contains(t, r.stdout, fmt.Sprintf("%d cell(s) would be moved", len(model)))
	assert.Regexp(t, `row "row\d+", column "c\d+": \S+Z -> \S+Z`, r.stdout, "examples in RFC 3339 UTC")
	require.Equal(t, model, storedFamily(t, dc, "legacy", "f"), "a dry run writes nothing")

	// The one-second rule is refused before the migration.
	r = bttl(t, addr, "", "-schema", schema, "apply", "-yes")
	require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)

	start = time.Now()
	r = bttl(t, addr, "", args...)
	elapsed := time.Since(start)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	t.Logf("migrated %d cells in %s (%.0f cells/s)", len(model), elapsed, float64(len(model))/elapsed.Seconds())
	assert.Contains(t, r.stdout, fmt.Sprintf("%d cell(s) moved to their new timestamp", len(model)))
	assert.Contains(t, r.stdout, "steps for a live system")
	assert.Contains(t, r.stdout, "bttl apply")
	require.Equal(t, shiftedModel(model, 30*24*time.Hour), storedFamily(t, dc, "legacy", "f"),
		"every cell at its old timestamp + 30 days, none lost or duplicated")

	r = bttl(t, addr, "", args...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, fmt.Sprintf("nothing to migrate: %d cell(s) already on the target", len(model)))
	assert.NotContains(t, r.stdout, "moved to their new timestamp")
	assert.NotContains(t, r.stdout, "steps for a live system", "only the next step after nothing to migrate")
	assert.Contains(t, r.stdout, "next: only once bttl migrate exits 0")
	require.Equal(t, shiftedModel(model, 30*24*time.Hour), storedFamily(t, dc, "legacy", "f"), "a second run changes nothing")

	// -timeout 0: apply's safety scan reads every cell of the family,
	// longer than the default 30s at 1,000,000 cells on a loaded machine.
	r = bttl(t, addr, "", "-schema", schema, "-timeout", "0", "apply", "-yes")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.NotContains(t, r.stdout+r.stderr, "force")
	r = bttl(t, addr, "", "-schema", schema, "verify")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
}

// Acceptance 2: the built binary killed (SIGKILL) mid-run and started
// again ends in the same state as an uninterrupted run over the same
// data, the model's.
func TestMigrateKilledAndRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	ac, dc, addr := emulatorClients(t)
	bin := buildBttl(t)
	ctx := context.Background()
	now := time.Now().Add(-time.Second)
	n := migrateCells(t)
	for _, tb := range []string{"killed", "straight"} {
		require.NoError(t, ac.CreateTable(ctx, tb))
		require.NoError(t, ac.CreateColumnFamily(ctx, tb, "f"))
	}
	model := loadRealTimestamps(t, dc, "killed", "f", n/10, 10, now)
	require.Equal(t, model, loadRealTimestamps(t, dc, "straight", "f", n/10, 10, now))
	schema := writeFile(t, "s.yaml", "tables: {killed: {f: {strategy: one-second}}, straight: {f: {strategy: one-second}}}\n")
	args := func(table string) []string {
		return append([]string{"-project", "p", "-instance", "i", "-schema", schema, "migrate", "-table", table, "-family", "f",
			"-from", "real", "-ttl", "30d"}, switchedAt(now)...)
	}
	ckpt := filepath.Join(t.TempDir(), "killed.checkpoint")
	cmd := exec.Command(bin, append(args("killed"), "-checkpoint", ckpt, "-cells-per-second", strconv.Itoa(n/20))...)
	cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+addr)
	require.NoError(t, cmd.Start())
	// Kill it once a key range holding rows is finished (the checkpoint
	// says so: an edge range can be empty, and finishing one proves
	// nothing) and some cells, not all, have moved (timestamps past now).
	moved := func() int {
		c := 0
		require.NoError(t, dc.Open("killed").ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
			c += len(r["f"])
			return true
		}, bigtable.RowFilter(bigtable.ChainFilters(bigtable.TimestampRangeFilter(now, time.Time{}), bigtable.StripValueFilter()))))
		return c
	}
	// done counts the finished ranges, withRows those of them that read
	// a row (their result is the range's migrate.Stats).
	rangesDone := func() (done, withRows, total int) {
		b, err := os.ReadFile(ckpt)
		if err != nil {
			return 0, 0, 0 // not written yet (it is replaced by a rename, never seen half written)
		}
		var ck struct {
			Ranges []struct {
				Done   bool
				Result struct{ Rows int64 }
			}
		}
		require.NoError(t, json.Unmarshal(b, &ck), "%s", b)
		for _, r := range ck.Ranges {
			if r.Done {
				done++
				if r.Result.Rows > 0 {
					withRows++
				}
			}
		}
		return done, withRows, len(ck.Ranges)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, w, _ := rangesDone(); w == 0; _, w, _ = rangesDone() {
		require.True(t, time.Now().Before(deadline), "no key range holding rows finished within 2 minutes")
		time.Sleep(10 * time.Millisecond) // polling another process's file: no clock to inject
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	at := moved()
	done, _, total := rangesDone()
	t.Logf("killed after %d of %d cells moved, %d of %d key ranges finished", at, len(model), done, total)
	require.Less(t, at, len(model), "killed mid-run")
	require.Less(t, done, total, "killed mid-run")

	c := exec.Command(bin, append(args("killed"), "-checkpoint", ckpt)...)
	c.Env = cmd.Env
	out, err := c.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), fmt.Sprintf("resumed from %s: %d of %d key range(s) finished by an earlier run, not read again", ckpt, done, total))
	mr := regexp.MustCompile(`(?m)^read (\d+) row\(s\)`).FindStringSubmatch(string(out))
	require.NotNil(t, mr, "%s", out)
	rowsRead, _ := strconv.Atoi(mr[1])
	assert.Less(t, rowsRead, n/10, "the restarted run reads only the unfinished ranges")
	c = exec.Command(bin, args("straight")...)
	c.Env = cmd.Env
	out, err = c.CombinedOutput()
	require.NoError(t, err, "%s", out)

	want := shiftedModel(model, 30*24*time.Hour)
	assert.Equal(t, want, storedFamily(t, dc, "killed", "f"), "the restarted run ends at the model")
	assert.Equal(t, storedFamily(t, dc, "straight", "f"), storedFamily(t, dc, "killed", "f"), "identical to an uninterrupted run")
}

func TestMigrateUsageErrors(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "127.0.0.1:1")
	schema := writeFile(t, "s.yaml", "tables: {t: {f: {strategy: one-second}, g: {strategy: default-expiry, ttl: 48h}, u: {strategy: unmanaged}}}\n")
	g := []string{"-project", "p", "-instance", "i", "-schema", schema, "migrate"}
	now := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	sw := func(args ...string) []string {
		return append([]string{"-table", "t", "-family", "f", "-from", "real", "-ttl", "1d", "-first-switch", now, "-written-before", now}, args...)
	}
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"-table", []string{"-family", "f", "-from", "real", "-ttl", "1d"}},
		{"-family", []string{"-table", "t", "-from", "real", "-ttl", "1d"}},
		{"-from", []string{"-table", "t", "-family", "f", "-ttl", "1d"}},
		{"-from", []string{"-table", "t", "-family", "f", "-from", "sequence"}},
		{"-from", []string{"-table", "t", "-family", "f", "-from", "default-expiry:0s"}},
		{"-ttl", []string{"-table", "t", "-family", "f", "-from", "real", "-ttl", "1us"}},
		{"-ttl", []string{"-table", "t", "-family", "f", "-from", "real", "-written-before", now}},
		{"-ttl", []string{"-table", "t", "-family", "g", "-to-family", "f", "-from", "default-expiry:48h", "-ttl", "1d"}},
		{"-ttl-rule", []string{"-table", "t", "-family", "f", "-from", "real", "-ttl-rule", "prefix=a"}},
		{"-ttl-rule", []string{"-table", "t", "-family", "f", "-from", "real", "-ttl-rule", "ttl=1d", "-ttl", "2d", "-written-before", now}},
		{"-first-switch", []string{"-table", "t", "-family", "f", "-from", "real", "-ttl", "1d"}},
		{"-first-switch", []string{"-table", "t", "-family", "f", "-from", "real", "-ttl", "1d", "-written-before", now}},
		{"-written-before", []string{"-table", "t", "-family", "f", "-from", "real", "-ttl", "1d", "-first-switch", now}},
		{"-written-before", []string{"-table", "t", "-family", "f", "-from", "real", "-ttl", "1d", "-written-before", "yesterday"}},
		{"-first-switch", []string{"-table", "t", "-family", "f", "-from", "real", "-ttl", "1d", "-first-switch", "2999-01-01T00:00:00Z", "-written-before", now}},
		{"-expired", sw("-expired", "maybe")},
		{"-expired delete needs -expect-expired N and -expired-as-of T", sw("-expired", "delete")},
		{"-expired delete needs -expect-expired N and -expired-as-of T", sw("-expired", "delete", "-expect-expired", "3")},
		{"-expect-expired and -expired-as-of go with -expired delete", sw("-expect-expired", "0")},
		{"-expect-expired", sw("-expired", "delete", "-expect-expired", "-2", "-expired-as-of", now)},
		{"-clock-skew", sw("-clock-skew", "-1s")},
		{"-write-time-complete", sw("-write-time-complete")},
		{"-inflight", sw("-inflight", "0")},
		{"-to-family", []string{"-table", "t", "-family", "f", "-from", "one-second", "-to-family", "nope"}},
		{"-to-family", []string{"-table", "t", "-family", "f", "-from", "default-expiry:1d"}},
		{"-schema", []string{"-table", "t", "-family", "u", "-from", "real", "-ttl", "1d", "-written-before", now}},
		{"-table", []string{"-table", "nope", "-family", "f", "-from", "real", "-ttl", "1d", "-written-before", now}},
		{"-examples", []string{"-table", "t", "-family", "f", "-from", "real", "-ttl", "1d", "-examples", "-1"}},
	} {
		start := time.Now()
		r := runRaw(context.Background(), append(append([]string{}, g...), c.args...)...)
		assert.Equal(t, exitError, r.code, "%q: %s", c.args, r.stdout)
		assert.Contains(t, r.stderr, c.flag, "%q", c.args)
		assert.NotContains(t, r.stderr, "cannot reach", "%q: refused before any RPC", c.args)
		assert.Less(t, time.Since(start), 2*time.Second, "%q", c.args)
	}
	r := runRaw(context.Background(), "help", "migrate")
	assert.Equal(t, exitOK, r.code)
	for _, f := range []string{"-family", "-to-family", "-from", "-ttl", "-ttl-rule", "-first-switch", "-written-before", "-clock-skew",
		"-write-time-complete", "-expired", "-expect-expired", "-expired-as-of", "-dry-run", "-inflight"} {
		assert.Contains(t, r.stdout, f)
	}
	assert.Regexp(t, `-expired delete\n[^\n]*\(default keep\)`, r.stdout, "-h states that expired cells are kept by default")
	assert.Regexp(t, `-clock-skew duration\n[^\n]*\(default 5s\)`, r.stdout)
	r = runRaw(context.Background(), "migrate", "-h")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "usage: bttl migrate")
}

// D -> D' by copy from the command line: a dry run shows examples and
// writes nothing, the run copies every live cell keeping its expiry, a
// second run reports nothing to migrate; a value too large to pin makes
// it exit 1 and is not copied.
func TestMigrateCopyDefaultExpiry(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "clicks", ColumnFamilies: map[string]bigtable.Family{
		"f": {GCPolicy: bigtable.MaxAgePolicy(48 * time.Hour)},
	}}))
	now := bigtable.Now().TruncateToMilliseconds()
	hour := bigtable.Timestamp(time.Hour / time.Microsecond)
	m := bigtable.NewMutation()
	m.Set("f", "a", now-hour, []byte("live 47h more"))
	m.Set("f", "b", now-30*hour, []byte("live 18h more"))
	m.Set("f", "c", now-50*hour, []byte("expired 2h ago"))
	require.NoError(t, dc.Open("clicks").Apply(ctx, "r1", m))
	schema := writeFile(t, "s.yaml", "tables: {clicks: {f: {strategy: default-expiry, ttl: 48h}, g: {strategy: default-expiry, ttl: 24h}}}\n")
	args := []string{"-schema", schema, "migrate", "-table", "clicks", "-family", "f", "-from", "default-expiry:48h", "-to-family", "g"}

	// The target family is not created yet: the dry run says so before
	// reading anything, and names the command that creates it.
	r := bttl(t, addr, "", append(args, "-dry-run")...)
	require.Equal(t, exitError, r.code, r.stdout)
	assert.Contains(t, r.stderr, `-to-family: table "clicks" has no family "g": run bttl apply -table clicks -family g first`)
	r = bttl(t, addr, "", "-schema", schema, "apply", "-yes", "-family", "g")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)

	r = bttl(t, addr, "", append(args, "-dry-run")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `2 cell(s) would be copied into family "g" at their new timestamp (the source cells stay)`)
	assert.Regexp(t, `1 cell\(s\) expired under the target as of \S+Z: left as they are, neither moved nor copied`, r.stdout)
	assert.NotContains(t, r.stdout, "-expired delete", "a copy deletes nothing")
	assert.Contains(t, r.stdout, fmt.Sprintf(`row "r1", column "a": %s -> %s`, formatTS(now-hour), formatTS(now+23*hour)))
	assert.Empty(t, storedFamily(t, dc, "clicks", "g"), "a dry run writes nothing")

	r = bttl(t, addr, "", args...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Empty(t, r.stderr, "no progress when stderr is not a terminal")
	assert.Contains(t, r.stdout, `2 cell(s) copied into family "g" at their new timestamp (the source cells stay)`)
	assert.Contains(t, r.stdout, `bttl apply a schema that adds family "g"`)
	assert.Equal(t, map[cellKey]string{{"r1", "a", now + 23*hour}: "live 47h more", {"r1", "b", now - 6*hour}: "live 18h more"},
		storedFamily(t, dc, "clicks", "g"), "each copied cell expires when it did: ts + 24h = old ts + 48h")
	assert.Len(t, storedFamily(t, dc, "clicks", "f"), 3, "the source is left as it is")

	r = bttl(t, addr, "", append(args, "-progress", "1ms")...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "nothing to migrate: 2 cell(s) already on the target")
	assert.Regexp(t, `(?m)^read 1 rows, 3 cells; moved 0, deleted 0; 100% of \d+ key ranges$`, r.stderr, "-progress: a line per update, the last at the end")

	big := bigtable.NewMutation()
	big.Set("f", "big", now, make([]byte, 11<<10))
	require.NoError(t, dc.Open("clicks").Apply(ctx, "r2", big))
	r = bttl(t, addr, "", args...)
	require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "1 cell(s) not moved: value over about 10 KB")
	assert.Contains(t, r.stderr, "1 cell(s) not moved")
	assert.Len(t, storedFamily(t, dc, "clicks", "g"), 2)
}

// Two processes' shards (-shard 0/2, 1/2, each with its checkpoint) move
// every cell exactly once between them. (Without shard keys the key space
// is split evenly, so these "row..." keys all fall in shard 0.)
func TestMigrateShards(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTable(ctx, "legacy"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "legacy", "f"))
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dc, "legacy", "f", 300, 5, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	dir := t.TempDir()
	moved := 0
	for i := 0; i < 2; i++ {
		r := bttl(t, addr, "", append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d",
			"-shard", fmt.Sprintf("%d/2", i), "-checkpoint", filepath.Join(dir, fmt.Sprintf("shard%d", i)), "-workers", "2"}, switchedAt(now)...)...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, fmt.Sprintf("shard %d/2: keys", i))
		if m := regexp.MustCompile(`(\d+) cell\(s\) moved`).FindStringSubmatch(r.stdout); m != nil {
			n, _ := strconv.Atoi(m[1])
			moved += n
		}
		assert.NotRegexp(t, `[1-9]\d* cell\(s\) already on the target`, r.stdout, "shards are disjoint")
	}
	assert.Equal(t, len(model), moved)
	assert.Equal(t, shiftedModel(model, 30*24*time.Hour), storedFamily(t, dc, "legacy", "f"))
}

// createLegacy creates table "legacy" with family "f" without a GC rule.
func createLegacy(t *testing.T, ac *bigtable.AdminClient) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, ac.CreateTable(ctx, "legacy"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "legacy", "f"))
}

// migrateServers runs f on the in-process server and on cbtemulator.
func migrateServers(t *testing.T, f func(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string)) {
	t.Run("bttest", func(t *testing.T) { ac, dc, addr := newServer(t); f(t, ac, dc, addr) })
	t.Run("cbtemulator", func(t *testing.T) { ac, dc, addr := emulatorClients(t); f(t, ac, dc, addr) })
}

// countLines is a report's count lines, "would be " and the instant
// expiry was judged at taken out, so that a dry run's and a real run's
// compare.
func countLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if regexp.MustCompile(`^(read \d+ row|  \d+ cell\(s\) )`).MatchString(l) {
			l = regexp.MustCompile(` as of \S+Z`).ReplaceAllString(strings.Replace(l, "would be ", "", 1), " as of T")
			lines = append(lines, l)
		}
	}
	return lines
}

// Expired cells are kept by default (a dry run and the real run report
// the same counts); they are deleted only with -expired delete, the count
// and the instant the dry run printed: a wrong count refuses with exit 1
// and deletes nothing.
func TestMigrateExpiredDeletionNeedsTheDryRunsCount(t *testing.T) {
	migrateServers(t, func(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string) {
		ctx := context.Background()
		createLegacy(t, ac)
		switched := time.Now().Add(-time.Second)
		day := bigtable.Timestamp(24 * time.Hour / time.Microsecond)
		ms := bigtable.Time(switched.Add(-time.Hour)).TruncateToMilliseconds()
		m := bigtable.NewMutation()
		m.Set("f", "old1", ms-40*day, []byte("expired"))
		m.Set("f", "old2", ms-31*day, []byte("expired"))
		m.Set("f", "live", ms-day, []byte("live"))
		require.NoError(t, dc.Open("legacy").Apply(ctx, "r", m))
		schema := writeFile(t, "s.yaml", oneSecondSchema)
		args := append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d"}, switchedAt(switched)...)

		dry := bttl(t, addr, "", append(args, "-dry-run")...)
		require.Equal(t, exitOK, dry.code, dry.stdout+dry.stderr)
		assert.Contains(t, dry.stdout, "steps for a live system")
		hint := regexp.MustCompile(`add -expired delete -expect-expired (\d+) -expired-as-of (\S+)`).FindStringSubmatch(dry.stdout)
		require.NotNil(t, hint, dry.stdout)
		assert.Equal(t, "2", hint[1])
		assert.Regexp(t, `row "r", column "old1": \S+Z expired, kept`, dry.stdout)
		real := bttl(t, addr, "", args...)
		require.Equal(t, exitOK, real.code, real.stdout+real.stderr)
		assert.Equal(t, countLines(dry.stdout), countLines(real.stdout), "a dry run and a real run report the same counts")
		assert.Contains(t, real.stdout, "1 cell(s) moved")
		assert.Len(t, storedFamily(t, dc, "legacy", "f"), 3, "nothing deleted by default")

		r := bttl(t, addr, "", append(args, "-expired", "delete", "-expect-expired", "1", "-expired-as-of", hint[2])...)
		assert.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stderr, "2 cell(s) expired as of")
		assert.Contains(t, r.stderr, "expected 1")
		assert.Len(t, storedFamily(t, dc, "legacy", "f"), 3, "a wrong count deletes nothing")

		r = bttl(t, addr, "", append(args, "-expired", "delete", "-expect-expired", "2", "-expired-as-of", hint[2])...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "2 cell(s) expired under the target, deleted")
		got := storedFamily(t, dc, "legacy", "f")
		assert.Equal(t, map[cellKey]string{{"r", "live", ms - day + 30*day}: "live"}, got)
	})
}

// A collision left by run 1 keeps its key range unfinished: a rerun with
// the same checkpoint reads it again and exits 1 while the collision
// stays; once it is cleared, the rerun moves the cell and exits 0.
func TestMigrateCheckpointRerunRevisitsCollision(t *testing.T) {
	migrateServers(t, func(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string) {
		ctx := context.Background()
		createLegacy(t, ac)
		switched := time.Now().Add(-time.Second)
		model := loadRealTimestamps(t, dc, "legacy", "f", 200, 5, switched)
		shift := bigtable.Timestamp(30 * 24 * time.Hour / time.Microsecond)
		old := bigtable.Time(switched.Add(-time.Hour)).TruncateToMilliseconds()
		m := bigtable.NewMutation()
		m.Set("f", "c", old, []byte("legacy"))
		m.Set("f", "c", old+shift, []byte("a bttl write on that very expiry"))
		require.NoError(t, dc.Open("legacy").Apply(ctx, "row0000100x", m))
		schema := writeFile(t, "s.yaml", oneSecondSchema)
		ckpt := filepath.Join(t.TempDir(), "ckpt")
		args := append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d",
			"-checkpoint", ckpt, "-workers", "2"}, switchedAt(switched)...)

		r := bttl(t, addr, "", args...)
		require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "1 cell(s) not moved: another cell holds the new timestamp")
		assert.Contains(t, r.stderr, "reads again every key range where a cell was left")

		r = bttl(t, addr, "", args...)
		assert.Equal(t, exitFindings, r.code, "a rerun that still cannot move it exits 1: %s", r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "1 cell(s) not moved: another cell holds the new timestamp")
		assert.NotContains(t, r.stdout, "nothing to migrate")

		clear := bigtable.NewMutation()
		clear.DeleteTimestampRange("f", "c", old+shift, old+shift+1000)
		require.NoError(t, dc.Open("legacy").Apply(ctx, "row0000100x", clear))
		r = bttl(t, addr, "", args...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "1 cell(s) moved to their new timestamp")
		got := storedFamily(t, dc, "legacy", "f")
		assert.Equal(t, "legacy", got[cellKey{"row0000100x", "c", old + shift}])
		want := shiftedModel(model, 30*24*time.Hour)
		want[cellKey{"row0000100x", "c", old + shift}] = "legacy"
		assert.Equal(t, want, got)

		r = bttl(t, addr, "", args...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "read 0 row(s)")
	})
}
