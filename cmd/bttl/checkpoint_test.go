package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A 2-shard migrate keeps its checkpoints in a table of the instance; the
// table is then "restored" (deleted, re-created, its cells from before the job
// written back with their timestamps) and the same job moves what came back,
// saying why it reads finished ranges again. bttl checkpoint list shows the
// rows; rm removes them only after a dry run's count, refuses rows written
// within -idle unless -force, and selects by scanned table (issue 35, 1).
func TestCheckpointsBoundToTheTableAndRemovable(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTable(ctx, "legacy"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "legacy", "f"))
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dc, "legacy", "f", 300, 4, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	keys := writeFile(t, "shard-keys.txt", "row0000150\n")
	job := func(shard int) []string {
		return append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d",
			"-shard", fmt.Sprintf("%d/2", shard), "-shard-keys", keys, "-checkpoint", "bigtable://bttl_state"}, switchedAt(now)...)
	}
	for i := 0; i < 2; i++ {
		r := bttl(t, addr, "", job(i)...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	}
	moved := shiftedModel(model, 30*24*time.Hour)
	require.Equal(t, moved, storedFamily(t, dc, "legacy", "f"))
	r := bttl(t, addr, "", job(0)...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Regexp(t, `resumed from bigtable://bttl_state: (\d+) of \d+ key range`, r.stdout)
	assert.NotContains(t, r.stdout, "\nread again:", "nothing restored: the finished ranges' moves are there")

	// The restore.
	require.NoError(t, ac.DeleteTable(ctx, "legacy"))
	require.NoError(t, ac.CreateTable(ctx, "legacy"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "legacy", "f"))
	require.Equal(t, model, loadRealTimestamps(t, dc, "legacy", "f", 300, 4, now))
	total := 0
	for i := 0; i < 2; i++ {
		r := bttl(t, addr, "", job(i)...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Regexp(t, `read again: \d+ key range\(s\) bigtable://bttl_state records finished no longer hold the last cell moved there`, r.stdout)
		assert.NotContains(t, r.stdout, "nothing to migrate")
		m := regexp.MustCompile(`(\d+) cell\(s\) moved to their new timestamp`).FindStringSubmatch(r.stdout)
		require.NotNil(t, m, r.stdout)
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		total += n
	}
	assert.Equal(t, len(model), total, "the restored cells are moved again, each once")
	assert.Equal(t, moved, storedFamily(t, dc, "legacy", "f"), "nothing left unmoved, lost or doubled")

	// Listing.
	r = bttl(t, addr, "", "checkpoint", "list", "-json", "bigtable://bttl_state")
	require.Equal(t, exitOK, r.code, r.stderr)
	var rows []stateRow
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	require.Len(t, rows, 2)
	shards := map[string]bool{}
	for _, row := range rows {
		assert.Equal(t, "checkpoint", row.Kind)
		assert.Equal(t, "legacy", row.Table)
		shards[row.Shard] = true
		assert.Equal(t, row.Ranges, row.Done)
		assert.True(t, row.Active, "just written")
		written, err := time.Parse(time.RFC3339Nano, row.Written)
		require.NoError(t, err)
		expires, err := time.Parse(time.RFC3339Nano, row.Expires)
		require.NoError(t, err)
		assert.Equal(t, 30*24*time.Hour, expires.Sub(written))
	}
	assert.Equal(t, map[string]bool{"0/2": true, "1/2": true}, shards)
	r = bttl(t, addr, "", "checkpoint", "list", "bigtable://bttl_state")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `"legacy#[0-9a-f]+#1/2"\s+checkpoint\s+legacy\s+1/2\s+\d+/\d+\s+\S+Z\s+\S+Z\s+active`, r.stdout)

	// Removal: a dry run first, the count it printed, -force for rows a
	// job may be running on.
	r = bttl(t, addr, "", "checkpoint", "rm", "bigtable://bttl_state")
	assert.Equal(t, exitError, r.code, "no removal without a dry run's count")
	assert.Contains(t, r.stderr, "-dry-run first")
	r = bttl(t, addr, "", "checkpoint", "rm", "-table", "other", "-dry-run", "bigtable://bttl_state")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "no rows")
	r = bttl(t, addr, "", "checkpoint", "rm", "-table", "legacy", "-dry-run", "bigtable://bttl_state")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "to remove these 2 row(s): bttl checkpoint rm -table legacy -expect 2 bigtable://bttl_state")
	assert.Contains(t, r.stdout, "2 of them written within 24h0m0s")
	r = bttl(t, addr, "", "checkpoint", "rm", "-table", "legacy", "-expect", "3", "-force", "bigtable://bttl_state")
	assert.Equal(t, exitFindings, r.code)
	assert.Contains(t, r.stderr, "2 row(s) selected, -expect 3: nothing removed")
	r = bttl(t, addr, "", "checkpoint", "rm", "-table", "legacy", "-expect", "2", "bigtable://bttl_state")
	assert.Equal(t, exitFindings, r.code)
	assert.Contains(t, r.stderr, "a job may be running on them): nothing removed")
	r = bttl(t, addr, "", "checkpoint", "list", "-json", "bigtable://bttl_state")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	require.Len(t, rows, 2, "a refused rm removes nothing")
	r = bttl(t, addr, "", "checkpoint", "rm", "-table", "legacy", "-expect", "2", "-idle", "0s", "bigtable://bttl_state")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "removed 2 row(s)")
	r = bttl(t, addr, "", "checkpoint", "list", "bigtable://bttl_state")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "no rows")

	// Usage errors.
	for _, args := range [][]string{
		{"checkpoint", "list"},
		{"checkpoint", "list", "ckpt.json"},
		{"checkpoint", "list", "-table", "a", "-report", "b", "bigtable://t"},
		{"checkpoint", "rm", "-dry-run", "-expect", "1", "bigtable://t"},
	} {
		r := bttl(t, addr, "", args...)
		assert.Equal(t, exitError, r.code, "%v: %s", args, r.stderr)
	}
}

// A whole-table dry run takes a sharded job's flags as they are (-shard-count,
// -shard-keys, -checkpoint) on a machine with no job runner; a real run with
// them and no task index is still refused (issue 35, 4).
func TestWholeTableDryRunTakesTheJobsFlags(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTable(ctx, "legacy"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "legacy", "f"))
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dc, "legacy", "f", 50, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	keys := writeFile(t, "shard-keys.txt", "row0000020\nrow0000040\n")
	t.Setenv("JOB_COMPLETION_INDEX", "")
	job := append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d",
		"-shard-count", "3", "-shard-keys", keys, "-checkpoint", "bigtable://bttl_state"}, switchedAt(now)...)
	r := bttl(t, addr, "", append(job, "-dry-run")...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "the whole table: -shard-count 3 without a task index")
	assert.Contains(t, r.stdout, fmt.Sprintf("%d cell(s) would be moved", len(model)))
	r = bttl(t, addr, "", job...)
	assert.Equal(t, exitError, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "-shard-count needs a task index")
	assert.Equal(t, model, storedFamily(t, dc, "legacy", "f"), "nothing written")
}

// Sharded expired deletion as one job's arguments. The whole-table dry run
// given the job's flags counts the expired cells of each shard and prints the
// flags every index takes (-expect-expired N0,N1,N2); each index, run with
// JOB_COMPLETION_INDEX as Kubernetes sets it, checks its own count and deletes
// exactly those cells (issue 35, 4).
func TestShardedExpiredDeletionAsOneJob(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTable(ctx, "legacy"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "legacy", "f"))
	now := time.Now().Add(-time.Second)
	model := loadRealTimestamps(t, dc, "legacy", "f", 300, 2, now) // written over the last 600 s
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	keys := writeFile(t, "shard-keys.txt", "row0000100\nrow0000200\n")
	t.Setenv("JOB_COMPLETION_INDEX", "")
	job := append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "300s",
		"-shard-count", "3", "-shard-keys", keys, "-checkpoint", "bigtable://bttl_state"}, switchedAt(now)...)
	r := bttl(t, addr, "", append(job, "-dry-run")...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	m := regexp.MustCompile(`expired per shard \(index 0 to 2\): (\d+), (\d+), (\d+); .* give every index of the job -expired delete -expect-expired (\S+) -expired-as-of (\S+)\n`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	total := 0
	for _, c := range m[1:4] {
		n, err := strconv.Atoi(c)
		require.NoError(t, err)
		total += n
	}
	require.Positive(t, total)
	require.Positive(t, mustAtoi(t, m[3]), "the last shard holds expired cells too")
	asOf, err := time.Parse(time.RFC3339Nano, m[5])
	require.NoError(t, err)

	del := append(job, "-expired", "delete", "-expect-expired", m[4], "-expired-as-of", m[5])
	deleted := 0
	for i := 0; i < 3; i++ {
		t.Setenv("JOB_COMPLETION_INDEX", strconv.Itoa(i))
		r := bttl(t, addr, "", del...)
		require.Equal(t, exitOK, r.code, "index %d: %s%s", i, r.stdout, r.stderr)
		n := 0 // no line when none
		if got := regexp.MustCompile(`(\d+) cell\(s\) expired under the target, deleted`).FindStringSubmatch(r.stdout); got != nil {
			n = mustAtoi(t, got[1])
		}
		assert.Equal(t, mustAtoi(t, m[1+i]), n, "index %d deletes its own shard's count", i)
		deleted += n
	}
	assert.Equal(t, total, deleted)
	stored := storedFamily(t, dc, "legacy", "f")
	gone := 0
	for k := range model {
		moved := k
		moved.ts += bigtable.Timestamp(300 * time.Second / time.Microsecond)
		_, atOld := stored[k]
		_, atNew := stored[moved]
		if !atOld && !atNew {
			gone++
			assert.False(t, moved.ts.Time().After(asOf), "only cells expired as of the dry run are deleted: %v", k)
		}
	}
	assert.Equal(t, total, gone, "exactly the dry run's cells are gone")

	// A list that does not fit the job is a usage error.
	t.Setenv("JOB_COMPLETION_INDEX", "0")
	r = bttl(t, addr, "", append(job, "-expired", "delete", "-expect-expired", "1,2", "-expired-as-of", m[5])...)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "-expect-expired: 2 counts, one per shard, but this run is shard 0/3")
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
