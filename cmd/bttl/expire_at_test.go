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

const expireAtSchemaYAML = `
tables:
  s:
    sess: {strategy: one-second}
    capped: {strategy: one-second, max_ttl: 2h}
    de: {strategy: default-expiry, ttl: 1h}
`

// bttl expire -at T, Redis EXPIREAT in the CLI (ExpireColumnAt): the
// newest live cell of each column expires at T exactly (T - D on a
// default-expiry family), older versions keep their spacing, -if is
// checked per cell, -dry-run writes nothing and prints T in UTC, a past T
// deletes, a T at or before the epoch and one over a cap are refused
// (exit 1, nothing written), and -at beside a TTL is a usage error (exit
// 2). On bttest and on cbtemulator.
func TestExpireAtCommand(t *testing.T) {
	for _, server := range []string{"bttest", "cbtemulator"} {
		t.Run(server, func(t *testing.T) {
			ac, dc, addr := serverClients(t, server)
			ctx := context.Background()
			require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "s", ColumnFamilies: map[string]bigtable.Family{
				"sess": {}, "capped": {}, "de": {},
			}}))
			schema := writeFile(t, "schema.yaml", expireAtSchemaYAML)
			now := time.Now()
			ms := func(t time.Time) bigtable.Timestamp { return strategy.Millis(bigtable.Time(t)) }
			at := func(d time.Duration) bigtable.Timestamp { return ms(now.Add(d)) }
			tbl := dc.Open("s")
			m := bigtable.NewMutation()
			m.Set("sess", "a", at(10*time.Minute), []byte("new"))
			m.Set("sess", "a", at(5*time.Minute), []byte("old"))
			m.Set("sess", "b", at(3*time.Hour), []byte("v"))
			m.Set("capped", "c", at(time.Hour), []byte("v"))
			m.Set("de", "d", ms(now), []byte("v")) // expires in 1h
			require.NoError(t, tbl.Apply(ctx, "u1", m))
			m = bigtable.NewMutation()
			m.Set("sess", "a", at(5*time.Minute), []byte("v"))
			require.NoError(t, tbl.Apply(ctx, "u2", m))
			cells := func(row, fam, col string) []bigtable.Timestamp {
				t.Helper()
				r, err := tbl.ReadRow(ctx, row, bigtable.RowFilter(bigtable.ColumnRangeFilter(fam, col, col+"\x00")))
				require.NoError(t, err)
				var out []bigtable.Timestamp
				for _, it := range r[fam] {
					out = append(out, it.Timestamp)
				}
				return out
			}
			run := func(args ...string) result {
				t.Helper()
				return bttl(t, addr, "", append([]string{"-schema", schema, "expire"}, args...)...)
			}

			// T given with an offset; printed, and applied, in UTC.
			T := now.Add(90 * time.Minute).Truncate(time.Second)
			tArg := T.In(time.FixedZone("CEST", 2*3600)).Format(time.RFC3339)
			r := run("-dry-run", "-at", tArg, "-if", "GT", "-column", "sess", "s", "u1")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Regexp(t, `sess:"a" @\d+ expires \S+ -> `+formatRFC3339(T)+`: would set`, r.stdout)
			assert.Regexp(t, `sess:"b" @\d+ expires \S+ -> \S+: not met`, r.stdout)
			assert.Contains(t, r.stdout, "1 rows read, 2 cells would change", "a's two versions")
			assert.Equal(t, []bigtable.Timestamp{at(10 * time.Minute), at(5 * time.Minute)}, cells("u1", "sess", "a"), "dry run: nothing written")

			r = run("-at", tArg, "-if", "GT", "-column", "sess", "s", "u1")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, "1 rows read, 2 cells changed to expire at "+formatRFC3339(T))
			spacing := at(10*time.Minute) - at(5*time.Minute)
			assert.Equal(t, []bigtable.Timestamp{ms(T), ms(T) - spacing}, cells("u1", "sess", "a"), "newest at T, the older version keeps its spacing")
			assert.Equal(t, []bigtable.Timestamp{at(3 * time.Hour)}, cells("u1", "sess", "b"), "b: GT not met")

			// Default expiry: the cell's timestamp is T - D.
			r = run("-at", T.Format(time.RFC3339), "-column", "de", "s", "u1")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Equal(t, []bigtable.Timestamp{ms(T.Add(-time.Hour))}, cells("u1", "de", "d"))

			// A row range.
			T2 := now.Add(2 * time.Hour).Truncate(time.Second)
			r = run("-at", T2.Format(time.RFC3339), "-prefix", "u", "-column", "sess:a", "s")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, "2 rows read, 3 cells changed")
			assert.Equal(t, ms(T2), cells("u1", "sess", "a")[0])
			assert.Equal(t, []bigtable.Timestamp{ms(T2)}, cells("u2", "sess", "a"))

			// Refusals, exit 1, nothing written: over the cap (2h), dry run
			// or not (a dry run's refusal exited 2, the usage status,
			// before); at or before the epoch, before anything is read.
			over := now.Add(3 * time.Hour).Format(time.RFC3339)
			for _, args := range [][]string{
				{"-at", over, "-column", "capped", "s", "u1"},
				{"-dry-run", "-at", over, "-column", "capped", "s", "u1"},
				{"-dry-run", "-column", "capped", "s", "u1", "3h"}, // the TTL form's dry run alike
			} {
				r = run(args...)
				assert.Equal(t, exitFindings, r.code, "%v: %s%s", args, r.stdout, r.stderr)
				assert.Contains(t, r.stderr, "TTL", args)
			}
			assert.Equal(t, []bigtable.Timestamp{at(time.Hour)}, cells("u1", "capped", "c"), "refused: nothing written")
			for _, epoch := range []string{"1970-01-01T00:00:00Z", "1969-12-31T23:00:00Z", "0001-01-01T00:00:00Z"} {
				r = run("-at", epoch, "s", "u1")
				assert.Equal(t, exitFindings, r.code, "%s: %s%s", epoch, r.stdout, r.stderr)
				assert.Contains(t, r.stderr, "timestamp before the epoch", epoch)
				assert.Empty(t, r.stdout, "refused before any read")
			}

			// A past instant deletes the live cells it applies to.
			r = run("-at", now.Add(-time.Hour).Format(time.RFC3339), "-column", "sess:a", "s", "u2")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, "1 rows read, 1 cells changed")
			assert.Empty(t, cells("u2", "sess", "a"), "deleted from storage")

			for _, args := range [][]string{
				{"-at", tArg, "s", "u1", "1h"},
				{"-at", tArg, "s", "u1", "persist"},
				{"-at", tArg, "-prefix", "u", "s", "1h"},
				{"-at", tArg, "s"},
				{"-at", tArg, "-prefix", "u", "s", "u1", "x"},
				{"-at", "tomorrow", "s", "u1"},
				{"-at", "2026-12-01", "s", "u1"},
			} {
				r := run(args...)
				assert.Equal(t, exitError, r.code, "%v: %s", args, r.stderr)
			}
		})
	}
}

// help expire and expire -h describe -at.
func TestExpireAtHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "expire"}, {"expire", "-h"}} {
		r := runRaw(context.Background(), args...)
		assert.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		out := r.stdout + r.stderr
		assert.Contains(t, out, "-at", args)
		assert.Contains(t, out, "EXPIREAT", args)
		assert.Contains(t, out, "RFC 3339", args)
	}
}
