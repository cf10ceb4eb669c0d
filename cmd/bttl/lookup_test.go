package main

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
)

const lookupSchemaYAML = `
tables:
  users:
    session: {strategy: one-second, max_versions: 1, write_time: true}
    doc: {strategy: sequence, versions: 2}
    raw: {strategy: unmanaged}
`

// bttl lookup on a row holding live, expired, excess-version, companion,
// reserved and unmanaged cells (and one written by the real cbt, on the
// emulator) shows each with its status, and its -json decodes into exactly
// the library's classification of the stored row.
func TestLookupShowsWhatAReadHides(t *testing.T) {
	for _, server := range []string{"bttest", "cbtemulator"} {
		t.Run(server, func(t *testing.T) {
			ac, dc, addr := serverClients(t, server)
			ctx := context.Background()
			// No GC rules: the servers' GC would remove the excess
			// versions this test shows at a moment of its own choosing.
			// lookup reads what is stored and never looks at the rules.
			require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
				"session": {}, "doc": {}, "raw": {}, "extra": {},
			}}))
			schemaPath := writeFile(t, "schema.yaml", lookupSchemaYAML)
			schemas, err := schemafile.Load(schemaPath)
			require.NoError(t, err)
			// A fixed instant in the past, well after the real-time floor:
			// the servers' GC runs on real time and removes only what is
			// older than a second before it, never these future cells.
			now := time.Now().UTC().Truncate(time.Millisecond)
			at := func(d time.Duration) bigtable.Timestamp { return bigtable.Time(now.Add(d)) }
			m := bigtable.NewMutation()
			m.Set("session", "tok", at(time.Hour), []byte("live"))
			m.Set("session", strategy.WriteTimeColumn("tok"), at(time.Hour), strategy.WriteTimeValue(at(-time.Minute)))
			m.Set("session", "tok", at(30*time.Minute), []byte("older-version"))
			m.Set("session", "\xff\xffstray", at(time.Hour), []byte("reserved"))
			m.Set("doc", "rev", 3000, []byte("three"))
			m.Set("doc", "rev", 2000, []byte("two"))
			m.Set("doc", "rev", 1000, []byte("one"))
			m.Set("raw", "x", 5000, []byte("untouched"))
			m.Set("extra", "y", 6000, []byte("unlisted"))
			tbl := dc.Open("users")
			require.NoError(t, tbl.Apply(ctx, "u1", m))
			if server == "cbtemulator" {
				// A legacy writer: cbt stamps the cell with the real time.
				cbt(t, addr, "set", "users", "u1", "doc:rev=from-cbt")
			}
			// Live now, expired at classifyAt. The server's GC removes
			// one-second cells whose instant has passed in real time, so
			// expiry is shown by classifying later (-now), not by waiting.
			require.NoError(t, tbl.Apply(ctx, "u1", func() *bigtable.Mutation {
				m := bigtable.NewMutation()
				m.Set("session", "old", at(2*time.Hour), []byte("expired"))
				return m
			}()))
			classifyAt := now.Add(3 * time.Hour)

			r := bttl(t, addr, "", "-schema", schemaPath, "lookup", "-now", classifyAt.Format(time.RFC3339Nano), "users", "u1")
			require.Equal(t, exitOK, r.code, r.stderr)
			for _, want := range []string{"bttl: returned", "bttl: expired", "bttl: excess-version", "bttl: companion", "bttl: reserved", "family not in the schema", "unmanaged family"} {
				assert.Contains(t, r.stdout, want)
			}
			assert.True(t, strings.HasPrefix(r.stdout, strings.Repeat("-", 40)+"\nu1\n"), "cbt's layout: %s", r.stdout)

			// -now in another zone: -json's now is UTC all the same.
			r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "-json", "-now", classifyAt.In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano), "users", "u1")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, `"now":"`+classifyAt.UTC().Format("2006-01-02T15:04:05.000000Z")+`"`, "fixed width")
			var got rowJSON
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
			stored, err := tbl.ReadRow(ctx, "u1")
			require.NoError(t, err)
			want := filters.Explain(schemas["users"], stored, bigtable.Time(classifyAt))
			assert.Equal(t, want, got.Cells, "-json is the library's classification")
			require.NotNil(t, got.Row)
			assert.Equal(t, "u1", *got.Row)
			vis := map[string]filters.Visibility{}
			for _, c := range got.Cells {
				vis[string(c.Value)] = c.Visibility
			}
			// At classifyAt every session cell has expired: the point of
			// -now. Classified at the writing time instead, "live" is
			// returned and its older version is excess.
			assert.Equal(t, filters.Expired, vis["live"])
			assert.Equal(t, filters.Returned, vis["three"])
			assert.Equal(t, filters.ExcessVersion, vis["one"])
			assert.Equal(t, filters.Returned, vis["untouched"])
			assert.Equal(t, filters.Returned, vis["unlisted"])
			assert.Equal(t, filters.Reserved, vis["reserved"])
			if server == "cbtemulator" {
				assert.Equal(t, filters.Returned, vis["from-cbt"], "a real timestamp outranks every revision")
				assert.Equal(t, filters.ExcessVersion, vis["two"], "...and pushes revision 2 out")
			} else {
				assert.Equal(t, filters.Returned, vis["two"])
			}

			r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "-json", "-now", now.Format(time.RFC3339Nano), "users", "u1")
			require.Equal(t, exitOK, r.code, r.stderr)
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
			vis = map[string]filters.Visibility{}
			for _, c := range got.Cells {
				vis[string(c.Value)] = c.Visibility
				if string(c.Value) == "live" {
					assert.Equal(t, now.Add(-time.Minute), c.WriteTime, "write time from the companion")
					assert.Equal(t, time.Hour, c.Remaining)
				}
			}
			assert.Equal(t, filters.Returned, vis["live"])
			assert.Equal(t, filters.ExcessVersion, vis["older-version"])
			assert.Equal(t, filters.Returned, vis["expired"], "not yet expired at its write time")
			assert.Equal(t, filters.Companion, vis[string(strategy.WriteTimeValue(at(-time.Minute)))])

			r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "users", "nosuchrow")
			assert.Equal(t, exitFindings, r.code)
			assert.Contains(t, r.stderr, `row "nosuchrow" not found`)
			r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "nosuchtable", "u1")
			assert.Equal(t, exitError, r.code)
			assert.Contains(t, r.stderr, `table "nosuchtable" is not in the schema file`)
			r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "users")
			assert.Equal(t, exitError, r.code)
			assert.Contains(t, r.stderr, "want TABLE ROW")
		})
	}
}

// bttl read takes cbt read's range: -start/-end, -prefix, -count; one JSON
// object per row.
func TestReadRange(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"session": {GCPolicy: bigtable.MaxAgePolicy(time.Second)}, "doc": {GCPolicy: bigtable.MaxVersionsPolicy(2)}, "raw": {},
	}}))
	schemaPath := writeFile(t, "schema.yaml", lookupSchemaYAML)
	tbl := dc.Open("users")
	for _, k := range []string{"a1", "a2", "b1", "b2", "c1"} {
		m := bigtable.NewMutation()
		m.Set("doc", "rev", 1000, []byte(k))
		require.NoError(t, tbl.Apply(ctx, k, m))
	}
	rows := func(args ...string) []string {
		t.Helper()
		r := bttl(t, addr, "", append([]string{"-schema", schemaPath, "read", "-json"}, args...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		var keys []string
		sc := bufio.NewScanner(strings.NewReader(r.stdout))
		for sc.Scan() {
			var j rowJSON
			require.NoError(t, json.Unmarshal(sc.Bytes(), &j))
			keys = append(keys, *j.Row)
		}
		return keys
	}
	assert.Equal(t, []string{"a1", "a2", "b1", "b2", "c1"}, rows("users"))
	assert.Equal(t, []string{"a2", "b1"}, rows("-start", "a2", "-end", "b2", "users"))
	assert.Equal(t, []string{"b1", "b2"}, rows("-prefix", "b", "users"))
	assert.Equal(t, []string{"a1", "a2"}, rows("-count", "2", "users"))
	r := bttl(t, addr, "", "-schema", schemaPath, "read", "-prefix", "a", "-start", "a", "users")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "-prefix excludes -start and -end")
}

// A cell the schema reads as expired in a family still on a legacy rule (max
// age 60d, schema one-second) is kept by that rule, not one GC failed to
// collect: lookup says so, and -json gives the rules beside the library's
// classification. In a family on its rule the same cell reads as expired, as
// before (issue 35, item 2).
func TestLookupTellsNotOnRuleFromExpired(t *testing.T) {
	ac, dc, addr := serverClients(t, "bttest")
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"legacy":  {GCPolicy: bigtable.MaxAgePolicy(60 * 24 * time.Hour)},
		"adopted": {GCPolicy: bigtable.MaxAgePolicy(time.Second)},
	}}))
	schemaPath := writeFile(t, "schema.yaml", "tables: {users: {legacy: {strategy: one-second}, adopted: {strategy: one-second}}}\n")
	// Classified at a fixed instant after both cells (the servers' GC runs
	// on real time and keeps cells stamped in the future).
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	m := bigtable.NewMutation()
	m.Set("legacy", "c", bigtable.Time(at.Add(-time.Minute)), []byte("real"))
	m.Set("adopted", "c", bigtable.Time(at.Add(-time.Minute)), []byte("gone"))
	require.NoError(t, dc.Open("users").Apply(ctx, "u1", m))

	r := bttl(t, addr, "", "-schema", schemaPath, "lookup", "-now", at.Format(time.RFC3339Nano), "users", "u1")
	require.Equal(t, exitOK, r.code, r.stderr)
	blocks := strings.SplitAfter(r.stdout, "\n    bttl: ")
	require.Len(t, blocks, 3, r.stdout)
	assert.Contains(t, r.stdout, "not on its rule yet: the family's GC rule is max_age=")
	assert.Equal(t, 1, strings.Count(r.stdout, "not on its rule yet"), "only the legacy family's cell: %s", r.stdout)
	assert.Equal(t, 1, strings.Count(r.stdout, "a complete GC would have removed it"), "the adopted family's cell: %s", r.stdout)

	r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "-json", "-now", at.Format(time.RFC3339Nano), "users", "u1")
	require.Equal(t, exitOK, r.code, r.stderr)
	var got rowJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	assert.False(t, got.GCRules["legacy"].Matches)
	assert.True(t, got.GCRules["adopted"].Matches)
	assert.Equal(t, "max_age=1s", got.GCRules["adopted"].Rule)
}

// A family whose GC rule is not its strategy's but collects expired cells
// as soon (max age 1s beside max versions 1, schema one-second) keeps no
// expired cell by its rule: lookup calls such a cell one a complete GC
// would have removed, as audit counts it expired.
func TestLookupCallsAStricterRulesCellExpired(t *testing.T) {
	ac, dc, addr := serverClients(t, "bttest")
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"strict": {GCPolicy: bigtable.UnionPolicy(bigtable.MaxAgePolicy(time.Second), bigtable.MaxVersionsPolicy(1))},
	}}))
	schemaPath := writeFile(t, "schema.yaml", "tables: {users: {strict: {strategy: one-second}}}\n")
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	m := bigtable.NewMutation()
	m.Set("strict", "c", bigtable.Time(at.Add(-time.Minute)), []byte("gone"))
	require.NoError(t, dc.Open("users").Apply(ctx, "u1", m))

	r := bttl(t, addr, "", "-schema", schemaPath, "lookup", "-now", at.Format(time.RFC3339Nano), "users", "u1")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "not on its rule yet")
	assert.Contains(t, r.stdout, "a complete GC would have removed it")
}
