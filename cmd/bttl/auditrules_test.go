package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Audit classifies findings by each family's GC rule. A one-second family
// already on its rule, written only through bttl, holds expired cells, not
// "real timestamps" (-fail-on real-timestamps exits 0); the same cells under a
// family with no rule are never collected ("no-gc-rule"), and one not yet
// adopted (no one-second rule) reports them as real timestamps
// (issue 27 items 1 and 2).
func TestAuditClassifiesByTheFamilysRule(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "sessions", ColumnFamilies: map[string]bigtable.Family{
		"adopted": {GCPolicy: bigtable.MaxAgePolicy(time.Second)},
		"norule":  {},
		"legacy":  {GCPolicy: bigtable.MaxVersionsPolicy(1)},
	}}))
	// Cells whose timestamps lie an hour before the audit's -now: expired
	// one-second cells, or real timestamps, by their look alike. The
	// server's GC runs on the real clock, far before them.
	at := time.Date(2026, 1, 2, 14, 0, 0, 0, time.UTC)
	m := bigtable.NewMutation()
	for _, fam := range []string{"adopted", "norule", "legacy"} {
		m.Set(fam, "c", bigtable.Time(at.Add(-time.Hour)), []byte("v"))
	}
	require.NoError(t, dc.Open("sessions").Apply(ctx, "r", m))
	schema := writeFile(t, "s.yaml", "tables:\n  sessions:\n    adopted: {strategy: one-second}\n    norule: {strategy: one-second}\n    legacy: {strategy: one-second}\n")
	now := at.Format(time.RFC3339)

	r := bttl(t, addr, "", "-schema", schema, "audit", "-now", now, "-json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var out auditOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	byFam := map[string]int{}
	for i, f := range out.Tables[0].Families {
		byFam[f.Family] = i
	}
	fam := func(name string) string { return out.Tables[0].Families[byFam[name]].GCRule }
	assert.Equal(t, "none", fam("norule"))
	assert.True(t, out.Tables[0].Families[byFam["adopted"]].Adopted())
	assert.False(t, out.Tables[0].Families[byFam["legacy"]].Adopted())
	assert.True(t, out.Tables[0].Families[byFam["norule"]].NeverCollected())
	assert.Contains(t, out.Findings, "no-gc-rule")
	assert.Contains(t, out.Findings, "real-timestamps", "the legacy family, not yet on its rule")
	assert.Contains(t, out.Findings, "not-on-rule", "the legacy family")
	legacy := out.Tables[0].Families[byFam["legacy"]]
	assert.Equal(t, [2]int64{0, 1}, [2]int64{legacy.Expired, legacy.NotOnRule}, "the legacy family's cell is not on its rule, not expired stock")

	r = bttl(t, addr, "", "-schema", schema, "audit", "-now", now)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `! family "norule": 1 cell(s) its strategy reads as expired, never collected: the family has no GC rule`)
	assert.NotContains(t, r.stdout, `family "norule": 1 expired cell(s), not yet collected`)
	// Not on its rule (max versions 1): kept by that rule, no GC lag.
	assert.Contains(t, r.stdout, `! family "legacy": not on its rule yet: its GC rule is max_versions=1, not the one one-second needs; 1 cell(s) its strategy reads as expired are kept by that rule`)
	assert.NotContains(t, r.stdout, `family "legacy": 1 expired cell(s)`)
	assert.NotContains(t, r.stdout, `! family "adopted" (one-second): 1 cell(s) with timestamps at or before now`)
	assert.Contains(t, r.stdout, `! family "adopted": 1 expired cell(s), not yet collected by GC`)
	assert.Contains(t, r.stdout, `! family "legacy" (one-second): 1 cell(s) with timestamps at or before now`)

	// Only the adopted family: its expired cells are no real-timestamps
	// finding (it was one before), and it has a rule.
	only := writeFile(t, "a.yaml", "tables:\n  sessions:\n    adopted: {strategy: one-second}\n")
	r = bttl(t, addr, "", "-schema", only, "audit", "-now", now, "-fail-on", "real-timestamps,no-gc-rule")
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	r = bttl(t, addr, "", "-schema", only, "audit", "-now", now, "-fail-on", "expired")
	assert.Equal(t, exitFindings, r.code, r.stdout)

	// The gauges: at-or-before-now only where the family is not on its
	// rule; the missing rule as 1.
	prom := writeFile(t, "m.prom", "")
	r = bttl(t, addr, "", "-schema", schema, "audit", "-now", now, "-metrics-out", prom)
	require.Equal(t, exitOK, r.code, r.stderr)
	s := readFileString(t, prom)
	assert.Contains(t, s, `bttl_audit_gc_rule_missing{family="norule",strategy="one-second",table="sessions"} 1`)
	assert.Contains(t, s, `bttl_audit_gc_rule_missing{family="adopted",strategy="one-second",table="sessions"} 0`)
	assert.NotContains(t, s, `bttl_audit_one_second_at_or_before_now_cells{family="adopted"`)
	assert.Contains(t, s, `bttl_audit_one_second_at_or_before_now_cells{family="legacy",strategy="one-second",table="sessions"} 1`)
	assert.Contains(t, s, `bttl_audit_not_on_rule_cells{family="legacy",strategy="one-second",table="sessions"} 1`)
	assert.Contains(t, s, `bttl_audit_expired_not_collected_cells{family="legacy",strategy="one-second",table="sessions"} 0`)
	assert.Contains(t, s, `bttl_audit_gc_rule_mismatch{family="legacy",strategy="one-second",table="sessions"} 1`)
	assert.Contains(t, s, `bttl_audit_gc_rule_mismatch{family="adopted",strategy="one-second",table="sessions"} 0`)
	assert.Contains(t, s, `bttl_audit_expired_not_collected_cells{family="adopted",strategy="one-second",table="sessions"} 1`)
}

func readFileString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
