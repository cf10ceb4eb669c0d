package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hashedClicks starts a server holding table "events", family "clicks"
// (max age 48h), with rows rows under binary hashed keys, spread over the
// key space so that every shard of an even split gets some; it returns the
// server's address.
func hashedClicks(t *testing.T, rows int) string {
	t.Helper()
	ac, dc, addr := newServer(t)
	loadHashedClicks(t, ac, dc, rows)
	return addr
}

// loadHashedClicks creates table "events" as hashedClicks does, on the
// server of ac and dc.
func loadHashedClicks(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, rows int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", ColumnFamilies: map[string]bigtable.Family{
		"clicks": {GCPolicy: bigtable.MaxAgePolicy(48 * time.Hour)},
	}}))
	tbl := dc.Open("events")
	for i := 0; i < rows; i++ {
		m := bigtable.NewMutation()
		m.Set("clicks", "c", bigtable.Now().TruncateToMilliseconds(), []byte("x"))
		h := uint32(i) * 2654435761
		require.NoError(t, tbl.Apply(ctx, string([]byte{byte(h >> 24), byte(h >> 16), byte(h >> 8), byte(h)}), m))
	}
}

// Bttl audit merge refuses forged or corrupt shard reports (exit 1, saying
// why, nothing printed on stdout): a shard index outside 0 <= i < n, a report
// of an inverted key range, a shard label that disagrees with its range.
// Before, shards 0/2, 1/2 and 7/2 merged with the third's counts added
// (issue 26 item 7).
func TestAuditMergeRefusesForgedReports(t *testing.T) {
	addr := hashedClicks(t, 50)
	ctx := context.Background()
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	const t0 = "2026-01-02T15:04:05Z"
	auditJSON := func(args ...string) map[string]any {
		r := bttl(t, addr, "", append([]string{"-schema", schema, "audit", "-json", "-now", t0}, args...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		return out
	}
	// forge writes out with its (only) table's report changed by edit.
	forge := func(name string, out map[string]any, edit func(rep map[string]any)) string {
		b, err := json.Marshal(out)
		require.NoError(t, err)
		var c map[string]any
		require.NoError(t, json.Unmarshal(b, &c))
		edit(c["tables"].([]any)[0].(map[string]any))
		b, err = json.Marshal(c)
		require.NoError(t, err)
		return writeFile(t, name, string(b))
	}
	same := func(map[string]any) {}
	s0 := auditJSON("-shard", "0/2")
	s1 := auditJSON("-shard", "1/2")
	whole := auditJSON()
	f0, f1 := forge("s0.json", s0, same), forge("s1.json", s1, same)
	r := runRaw(ctx, "audit", "merge", f0, f1)
	require.Equal(t, exitOK, r.code, "the genuine shards merge: %s", r.stderr)
	assert.Contains(t, r.stdout, "50 rows, 50 cells")

	shard := func(i, n int) func(map[string]any) {
		return func(rep map[string]any) { rep["shard"] = map[string]any{"index": i, "count": n} }
	}
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{f0, f1, forge("s7.json", s1, shard(7, 2))}, "a report of shard 7/2, which no scan makes: want i/n with 0 <= i < n"},
		{[]string{f0, f1, forge("sneg.json", s1, shard(-1, 2))}, "a report of shard -1/2, which no scan makes"},
		{[]string{forge("inverted.json", whole, func(rep map[string]any) {
			rep["ranges"] = []any{map[string]any{"start": "m", "end": "c"}}
		})}, `covers the key range ["m", "c"), which is empty or inverted`},
		{[]string{forge("swap0.json", s0, shard(1, 2)), forge("swap1.json", s1, shard(0, 2))}, "where shard 0/2's piece is"},
	} {
		r := runRaw(ctx, append([]string{"audit", "merge"}, c.files...)...)
		assert.Equal(t, exitFindings, r.code, "%v: %s", c.files, r.stderr)
		assert.Contains(t, r.stderr, c.want)
		assert.True(t, strings.HasPrefix(r.stderr, "bttl audit merge: cannot merge the reports of table \"events\": "), r.stderr)
		assert.Empty(t, r.stdout)
	}
}

// Shards audited without -bytes (values stripped) merge into a report that
// says so, its byte figures not printed as measurements; a shard audited
// with -bytes and one without do not merge, and neither do stripped
// reports into -metrics-out, whose byte gauges would be zeros.
func TestAuditMergeCarriesNoBytes(t *testing.T) {
	addr := hashedClicks(t, 20)
	ctx := context.Background()
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	const t0 = "2026-01-02T15:04:05Z"
	shard := func(name string, args ...string) string {
		r := bttl(t, addr, "", append([]string{"-schema", schema, "audit", "-json", "-now", t0}, args...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		return writeFile(t, name, r.stdout)
	}
	s0, s1 := shard("s0.json", "-shard", "0/2"), shard("s1.json", "-shard", "1/2")
	b1 := shard("b1.json", "-shard", "1/2", "-bytes")

	r := runRaw(ctx, "audit", "merge", "-json", s0, s1)
	require.Equal(t, exitOK, r.code, r.stderr)
	var out auditOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	assert.True(t, out.NoBytes, "the merged report says its byte figures were not measured")

	r = runRaw(ctx, "audit", "merge", s0, b1)
	assert.Equal(t, exitFindings, r.code, r.stdout)
	assert.Contains(t, r.stderr, "one audit read values (-bytes) and the other did not")

	r = runRaw(ctx, "audit", "merge", "-metrics-out", writeFile(t, "m.prom", ""), s0, s1)
	assert.Equal(t, exitError, r.code, r.stdout)
	assert.Contains(t, r.stderr, "-metrics-out needs byte figures: audit the shards with -bytes")
}

// Audit -json prints instants as RFC 3339 UTC, and audit merge still reads
// reports written before, with microseconds (testdata/audit-v0-*.json, printed
// by the earlier bttl audit -json -bytes -now 2027-01-02T15:04:05.123456Z
// -shard i/2), also merged with a shard in the new form (issue 27 item 10).
func TestAuditMergeReadsMicrosecondReports(t *testing.T) {
	ctx := context.Background()
	old0, old1 := "testdata/audit-v0-shard0.json", "testdata/audit-v0-shard1.json"
	b, err := os.ReadFile(old0)
	require.NoError(t, err)
	require.Contains(t, string(b), `"now": 1798902245123456`, "the fixture is of the old form")

	r := runRaw(ctx, "audit", "merge", "-json", old0, old1)
	require.Equal(t, exitOK, r.code, r.stderr)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &raw))
	tbl := raw["tables"].([]any)[0].(map[string]any)
	assert.Equal(t, "2027-01-02T15:04:05.123456Z", tbl["now"], "the merged report's now is RFC 3339")
	assert.EqualValues(t, 30, tbl["rows"])
	oldest, ok := tbl["families"].([]any)[0].(map[string]any)["oldest_expiry"].(string)
	require.True(t, ok, "oldest_expiry is a string: %s", r.stdout)
	_, err = time.Parse(time.RFC3339Nano, oldest)
	assert.NoError(t, err)

	// One shard rewritten in the new form merges with the other's old one.
	var s1 auditOutput
	b, err = os.ReadFile(old1)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &s1))
	nb, err := json.Marshal(s1)
	require.NoError(t, err)
	require.Contains(t, string(nb), `"now":"2027-01-02T15:04:05.123456Z"`)
	r2 := runRaw(ctx, "audit", "merge", "-json", old0, writeFile(t, "new1.json", string(nb)))
	require.Equal(t, exitOK, r2.code, r2.stderr)
	assert.JSONEq(t, r.stdout, r2.stdout, "old and new forms are the same report")
	r3 := runRaw(ctx, "audit", "merge", old0, old1)
	require.Equal(t, exitOK, r3.code, r3.stderr)
	assert.Contains(t, r3.stdout, `table "events" at 2027-01-02T15:04:05.123456Z: 30 rows`)

	// audit -json itself prints RFC 3339.
	addr := hashedClicks(t, 5)
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	out := bttl(t, addr, "", "-schema", schema, "audit", "-json", "-now", "2026-01-02T17:04:05+02:00")
	require.Equal(t, exitOK, out.code, out.stderr)
	assert.Contains(t, out.stdout, `"now": "2026-01-02T15:04:05Z"`)
}
