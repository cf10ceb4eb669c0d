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

// Bttl init proposed bttl's own checkpoint table as a data table, and wrote an
// age family holding write-time companions without write_time (reads through
// bttl would then return the companions) (issue 35 items 6 and 7).
func TestInitSkipsStateTableAndFindsWriteTimes(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", ColumnFamilies: map[string]bigtable.Family{
		"s": {GCPolicy: bigtable.MaxAgePolicy(time.Hour)}, "plain": {GCPolicy: bigtable.MaxAgePolicy(60 * 24 * time.Hour)},
	}}))
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "bttl_state", ColumnFamilies: map[string]bigtable.Family{
		"ck": {GCPolicy: bigtable.MaxVersionsPolicy(1)},
	}}))
	ts := bigtable.Now().TruncateToMilliseconds()
	m := bigtable.NewMutation()
	m.Set("s", "tok", ts, []byte("v"))
	m.Set("s", strategy.WriteTimeColumn("tok"), ts, strategy.WriteTimeValue(ts))
	m.Set("plain", "x", ts, []byte("v"))
	require.NoError(t, dc.Open("events").Apply(ctx, "r", m))
	ck := bigtable.NewMutation()
	ck.Set("ck", "record", 0, []byte("{}"))
	ck.Set("ck", "owner", 0, []byte("1:abc"))
	require.NoError(t, dc.Open("bttl_state").Apply(ctx, "events#x#0/1", ck))

	r := bttl(t, addr, "", "init")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "s: {strategy: default-expiry, ttl: 1h, write_time: true}")
	assert.Contains(t, r.stdout, "plain: {strategy: default-expiry, ttl: 60d}", "durations in days, and no companion: no write_time")
	assert.NotContains(t, r.stdout, "bttl_state:")
	assert.Contains(t, r.stderr, `table "bttl_state" left out: bttl's own state`)
}
