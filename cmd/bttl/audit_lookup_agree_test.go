package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/filters"
)

// A cell both expired and beyond the newest N was counted beyond-kept by audit
// and shown expired by lookup. Both now classify it beyond N
// (suspected in issue 35 item 7, and real).
func TestAuditAndLookupAgreeOnExpiredVersionsBeyondN(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"session": {}, "doc": {}, "raw": {},
	}}))
	schemaPath := writeFile(t, "schema.yaml", lookupSchemaYAML) // session keeps 1 version
	now := time.Now().UTC().Truncate(time.Millisecond)
	m := bigtable.NewMutation()
	for i, d := range []time.Duration{time.Hour, 30 * time.Minute, -time.Minute} {
		m.Set("session", "tok", bigtable.Time(now.Add(d)), []byte(fmt.Sprint(i)))
	}
	require.NoError(t, dc.Open("users").Apply(ctx, "r", m))
	at := now.Format(time.RFC3339Nano)

	r := bttl(t, addr, "", "-schema", schemaPath, "audit", "-json", "-table", "users", "-now", at)
	require.Equal(t, exitOK, r.code, r.stderr)
	var out auditOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	var beyond, expired int64
	for _, f := range out.Tables[0].Families {
		if f.Family == "session" {
			beyond, expired = f.BeyondKept, f.Expired
		}
	}
	r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "-json", "-now", at, "users", "r")
	require.Equal(t, exitOK, r.code, r.stderr)
	var j rowJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &j))
	vis := map[filters.Visibility]int64{}
	for _, c := range j.Cells {
		vis[c.Visibility]++
	}
	assert.Equal(t, int64(2), beyond)
	assert.Equal(t, beyond, vis[filters.ExcessVersion], "lookup and audit agree")
	assert.Equal(t, expired, vis[filters.Expired])
}
