package main

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
)

// bttl expire -dry-run ... persist says what the real run does: Persist's
// default condition is XX, so a cell already without a TTL (at the
// largest timestamp) on a family whose cap clamps is "not met" and
// counted in neither, not "would set" (the cap from now).
func TestExpireDryRunPersistJudgesPersistsCondition(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "s", ColumnFamilies: map[string]bigtable.Family{"clamped": {}}}))
	schema := writeFile(t, "schema.yaml", `
tables:
  s:
    clamped: {strategy: one-second, max_ttl: 2h, clamp_ttl: true}
`)
	m := bigtable.NewMutation()
	m.Set("clamped", "c", strategy.MaxTimestamp, []byte("v"))
	require.NoError(t, dc.Open("s").Apply(ctx, "u1", m))
	// Longer than the cap (written before it): persist never shortens it.
	long := strategy.Millis(bigtable.Time(time.Now().Add(10 * time.Hour)))
	m = bigtable.NewMutation()
	m.Set("clamped", "c", long, []byte("v"))
	require.NoError(t, dc.Open("s").Apply(ctx, "u2", m))
	dry2 := bttl(t, addr, "", "-schema", schema, "expire", "-dry-run", "s", "u2", "persist")
	require.Equal(t, exitOK, dry2.code, dry2.stderr)
	assert.Contains(t, dry2.stdout, "not met")
	run2 := bttl(t, addr, "", "-schema", schema, "expire", "s", "u2", "persist")
	require.Equal(t, exitOK, run2.code, run2.stderr)
	assert.Contains(t, run2.stdout, "1 rows read, 0 cells changed")
	r2, err := dc.Open("s").ReadRow(ctx, "u2")
	require.NoError(t, err)
	require.Len(t, r2["clamped"], 1)
	assert.Equal(t, long, r2["clamped"][0].Timestamp, "not shortened to the cap")

	dry := bttl(t, addr, "", "-schema", schema, "expire", "-dry-run", "s", "u1", "persist")
	require.Equal(t, exitOK, dry.code, dry.stderr)
	real := bttl(t, addr, "", "-schema", schema, "expire", "s", "u1", "persist")
	require.Equal(t, exitOK, real.code, real.stderr)
	assert.Contains(t, real.stdout, "1 rows read, 0 cells changed")
	assert.Contains(t, dry.stdout, "1 rows read, 0 cells would change", "the dry run agrees with the run")
	assert.Contains(t, dry.stdout, "not met")
}

// bttl expire -dry-run on a default-expiry family whose D is longer than
// the time since the epoch: an older version shifted to before the epoch,
// its new expiry past, "would delete", as the run (ExpireColumn) deletes
// it, not "would set" at timestamp 0.
func TestExpireDryRunShiftBeforeTheEpoch(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "s", ColumnFamilies: map[string]bigtable.Family{"long": {}}}))
	schema := writeFile(t, "schema.yaml", `
tables:
  s:
    long: {strategy: default-expiry, ttl: 876000h}
`)
	m := bigtable.NewMutation()
	m.Set("long", "c", 1000, []byte("old"))
	m.Set("long", "c", bigtable.Now(), []byte("new"))
	require.NoError(t, dc.Open("s").Apply(ctx, "u1", m))

	dry := bttl(t, addr, "", "-schema", schema, "expire", "-dry-run", "s", "u1", "438000h")
	require.Equal(t, exitOK, dry.code, dry.stderr)
	assert.Regexp(t, `@1000 expires \S+ -> \S+: would delete`, dry.stdout)
	real := bttl(t, addr, "", "-schema", schema, "expire", "s", "u1", "438000h")
	require.Equal(t, exitOK, real.code, real.stderr)
	r, err := dc.Open("s").ReadRow(ctx, "u1")
	require.NoError(t, err)
	require.Len(t, r["long"], 1, "the run deleted the old version")
}
