package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// audit and lookup tell an expired cell GC will collect from one its
// family's rule keeps (docs/design.md#not-on-rule) by the same rule
// (internal/auditrule.CollectsExpired) and the same conditions around it:
// one expired cell per family, on each kind of rule a one-second or
// default-expiry family can carry, is counted expired by audit exactly
// where lookup says a complete GC would have removed it, and not on its
// rule exactly where lookup says its rule keeps it. A change to either
// side alone fails here.
func TestAuditAndLookupClassifyNotOnRuleAlike(t *testing.T) {
	ac, dc, addr := serverClients(t, "bttest")
	ctx := context.Background()
	day := 24 * time.Hour
	rules := map[string]bigtable.GCPolicy{
		"adopted":   bigtable.MaxAgePolicy(time.Second),
		"legacy":    bigtable.MaxAgePolicy(60 * day),
		"strict":    bigtable.UnionPolicy(bigtable.MaxAgePolicy(time.Second), bigtable.MaxVersionsPolicy(1)),
		"both":      bigtable.IntersectionPolicy(bigtable.MaxAgePolicy(time.Second), bigtable.MaxVersionsPolicy(1)),
		"versions":  bigtable.MaxVersionsPolicy(3),
		"none":      bigtable.NoGcPolicy(),
		"shorter":   bigtable.MaxAgePolicy(day),      // default-expiry 2d: collects sooner
		"longer":    bigtable.MaxAgePolicy(30 * day), // default-expiry 2d: keeps them
		"dexpected": bigtable.MaxAgePolicy(2 * day),
	}
	fams := map[string]bigtable.Family{}
	for f, r := range rules {
		fams[f] = bigtable.Family{GCPolicy: r}
	}
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: fams}))
	schemaPath := writeFile(t, "schema.yaml", "tables:\n  users:\n"+
		"    adopted: {strategy: one-second}\n    legacy: {strategy: one-second}\n    strict: {strategy: one-second}\n"+
		"    both: {strategy: one-second}\n    versions: {strategy: one-second}\n    none: {strategy: one-second}\n"+
		"    shorter: {strategy: default-expiry, ttl: 48h}\n    longer: {strategy: default-expiry, ttl: 48h}\n    dexpected: {strategy: default-expiry, ttl: 48h}\n")
	// Classified at a fixed instant after every cell (the servers' GC runs
	// on real time and keeps cells stamped in the future).
	at := time.Now().Add(10 * day).UTC().Truncate(time.Millisecond)
	m := bigtable.NewMutation()
	for f := range rules {
		ts := at.Add(-time.Minute) // one-second: its expiry instant, passed
		if strings.HasPrefix(f, "shorter") || strings.HasPrefix(f, "longer") || strings.HasPrefix(f, "dexpected") {
			ts = at.Add(-3 * day) // default-expiry 2d: its write time, 3 days ago
		}
		m.Set(f, "c", bigtable.Time(ts), []byte("v"))
	}
	require.NoError(t, dc.Open("users").Apply(ctx, "u1", m))
	now := at.Format(time.RFC3339Nano)

	r := bttl(t, addr, "", "-schema", schemaPath, "audit", "-json", "-table", "users", "-now", now)
	require.Equal(t, exitOK, r.code, r.stderr)
	var out auditOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Tables, 1)
	type counts struct{ Expired, NotOnRule int64 }
	audited := map[string]counts{}
	for _, f := range out.Tables[0].Families {
		audited[f.Family] = counts{f.Expired, f.NotOnRule}
	}

	r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "-now", now, "users", "u1")
	require.Equal(t, exitOK, r.code, r.stderr)
	looked := map[string]counts{}
	var family string
	for _, line := range strings.Split(r.stdout, "\n") {
		for f := range rules {
			if strings.HasPrefix(strings.TrimSpace(line), f+":") {
				family = f
			}
		}
		switch {
		case strings.Contains(line, "not on its rule yet"):
			c := looked[family]
			c.NotOnRule++
			looked[family] = c
		case strings.Contains(line, "a complete GC would have removed it"):
			c := looked[family]
			c.Expired++
			looked[family] = c
		}
	}
	for f := range rules {
		assert.Equal(t, audited[f], looked[f], "family %q: audit vs lookup\n%s", f, r.stdout)
		assert.Equal(t, int64(1), audited[f].Expired+audited[f].NotOnRule, "family %q: its one cell is expired or not on its rule", f)
	}
	// The classification itself, so that both sides changing alike is
	// noticed too.
	for _, f := range []string{"adopted", "strict", "shorter", "dexpected"} {
		assert.Equal(t, counts{Expired: 1}, audited[f], f)
	}
	for _, f := range []string{"legacy", "both", "versions", "none", "longer"} {
		assert.Equal(t, counts{NotOnRule: 1}, audited[f], f)
	}
}
