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

// bttl expire -at T on a family that clamps TTLs to its cap (clamp_ttl)
// with T beyond the cap: the library clamps (ExpireColumnAt), so the
// cells expire at the cap, not at T, and the output says so; it said
// "changed to expire at T" (fails before: no mention of the cap).
func TestExpireAtClampedSaysSo(t *testing.T) {
	ac, dc, addr := serverClients(t, "bttest")
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "s", ColumnFamilies: map[string]bigtable.Family{
		"clamp": {}, "sess": {},
	}}))
	schema := writeFile(t, "schema.yaml", `
tables:
  s:
    clamp: {strategy: one-second, max_ttl: 2h, clamp_ttl: true}
    sess: {strategy: one-second}
`)
	now := time.Now()
	ms := func(t time.Time) bigtable.Timestamp { return strategy.Millis(bigtable.Time(t)) }
	tbl := dc.Open("s")
	m := bigtable.NewMutation()
	m.Set("clamp", "c", ms(now.Add(time.Hour)), []byte("v"))
	m.Set("sess", "s", ms(now.Add(time.Hour)), []byte("v"))
	require.NoError(t, tbl.Apply(ctx, "u1", m))
	newest := func(fam string) bigtable.Timestamp {
		r, err := tbl.ReadRow(ctx, "u1", bigtable.RowFilter(bigtable.FamilyFilter(fam)))
		require.NoError(t, err)
		require.NotEmpty(t, r[fam])
		return r[fam][0].Timestamp
	}

	T := now.Add(3 * time.Hour).Truncate(time.Second)
	r := bttl(t, addr, "", "-schema", schema, "expire", "-dry-run", "-at", T.Format(time.RFC3339), "s", "u1")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "1 rows read, 2 cells would change to expire at "+formatRFC3339(T)+", 1 of them at their family's max TTL (T is beyond it)")
	r = bttl(t, addr, "", "-schema", schema, "expire", "-at", T.Format(time.RFC3339), "s", "u1")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, ms(T), newest("sess"), "sess: at T")
	got := newest("clamp")
	assert.Less(t, got, ms(T), "clamp: at its cap, before T")
	assert.InDelta(t, int64(ms(now.Add(2*time.Hour))), int64(got), float64(time.Minute/time.Microsecond), "clamp: now + 2h")
	assert.Contains(t, r.stdout, "1 rows read, 2 cells changed to expire at "+formatRFC3339(T)+", 1 of them at their family's max TTL (T is beyond it)")
}
