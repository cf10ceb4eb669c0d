package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	migrate "github.com/bttl/bttl/internal/migratejob"
)

// A legacy family whose GC rule keeps one version per column stores, until
// GC runs, the version a later write made dead: migrate moved it to its
// expiry instant, where the one-second rule serves it for its whole TTL.
// The command reads the family's rule: in place the dead version is left
// and counted as expired; a copy into a family keeping every version is
// refused, naming the schema.
func TestMigrateLeavesTheVersionsTheFamilysRuleMadeDead(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	// Created with the rule (bttest runs no GC then, as GC is lazy).
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "legacy", ColumnFamilies: map[string]bigtable.Family{
		"f": {GCPolicy: bigtable.MaxVersionsGCPolicy(1)}, "g": {}}}))
	now := time.Now().Add(-time.Second)
	at := func(d time.Duration) bigtable.Timestamp { return bigtable.Time(now.Add(d)).TruncateToMilliseconds() }
	m := bigtable.NewMutation()
	m.Set("f", "c", at(-2*time.Hour), []byte("old"))
	m.Set("f", "c", at(-time.Hour), []byte("new"))
	require.NoError(t, dc.Open("legacy").Apply(ctx, "r", m))

	schema := writeFile(t, "s.yaml", "tables: {legacy: {f: {strategy: one-second}, g: {strategy: one-second}}}\n")
	r := bttl(t, addr, "", append([]string{"-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d", "-json"}, switchedAt(now)...)...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	var sr migrate.ShardReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sr))
	assert.Equal(t, int64(1), sr.Run.Moved, "the live version")
	assert.Equal(t, int64(1), sr.Run.ExpiredLeft, "the dead version, left and counted")
	row, err := dc.Open("legacy").ReadRow(ctx, "r")
	require.NoError(t, err)
	for _, it := range row["f"] {
		if string(it.Value) == "old" {
			assert.Equal(t, at(-2*time.Hour), it.Timestamp, "the dead version is not moved")
		}
	}

	r = bttl(t, addr, "", "-schema", schema, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", "30d", "-to-family", "g")
	assert.Equal(t, exitError, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, `keeps more versions per column than the source family "f" (1)`)
	assert.Empty(t, storedFamily(t, dc, "legacy", "g"), "nothing copied")
}

// -from says how the source's timestamps are written, not whether it
// records write times: the schema's source family does. A copy from a
// family with write times into one without copied its companions, which
// the target served as columns of data.
func TestMigrateCopyLeavesTheSourcesCompanions(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTable(ctx, "clicks"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "clicks", "f"))
	require.NoError(t, ac.CreateColumnFamily(ctx, "clicks", "g"))
	now := bigtable.Now().TruncateToMilliseconds()
	m := bigtable.NewMutation()
	m.Set("f", "a", now-1000, []byte("a"))
	m.Set("f", "\xff\xffbttl.wt\x00a", now-1000, []byte("write time")) // its companion, as bttl writes it
	require.NoError(t, dc.Open("clicks").Apply(ctx, "r1", m))
	schema := writeFile(t, "s.yaml", "tables: {clicks: {f: {strategy: default-expiry, ttl: 48h, write_time: true}, g: {strategy: default-expiry, ttl: 24h}}}\n")
	r := bttl(t, addr, "", "-schema", schema, "migrate", "-table", "clicks", "-family", "f", "-from", "default-expiry:48h", "-to-family", "g")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	var cols []string
	for k := range storedFamily(t, dc, "clicks", "g") {
		cols = append(cols, k.col)
	}
	assert.Equal(t, []string{"a"}, cols, "the cell copied, not its companion")
}
