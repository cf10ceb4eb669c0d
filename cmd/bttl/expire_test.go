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

const expireSchemaYAML = `
tables:
  s:
    sess: {strategy: one-second}
    capped: {strategy: one-second, max_ttl: 2h}
    doc: {strategy: sequence, versions: 2}
`

// bttl expire: -dry-run changes nothing and says what would; -if is
// checked per cell; a row range and -column select the cells; persist is
// refused where the cap forbids it (exit 1); bad usage exits 2. On bttest
// and on cbtemulator (driven by the real binary, as an operator's would be).
func TestExpireCommand(t *testing.T) {
	for _, server := range []string{"bttest", "cbtemulator"} {
		t.Run(server, func(t *testing.T) {
			ac, dc, addr := serverClients(t, server)
			ctx := context.Background()
			require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "s", ColumnFamilies: map[string]bigtable.Family{
				"sess": {}, "capped": {}, "doc": {},
			}}))
			schema := writeFile(t, "schema.yaml", expireSchemaYAML)
			now := time.Now()
			at := func(d time.Duration) bigtable.Timestamp { return strategy.Millis(bigtable.Time(now.Add(d))) }
			tbl := dc.Open("s")
			for row, cells := range map[string][][2]any{
				"u1": {{"a", 10 * time.Minute}, {"b", 3 * time.Hour}},
				"u2": {{"a", 5 * time.Minute}},
			} {
				m := bigtable.NewMutation()
				for _, c := range cells {
					m.Set("sess", c[0].(string), at(c[1].(time.Duration)), []byte("v"))
				}
				m.Set("capped", "c", at(time.Hour), []byte("v"))
				m.Set("doc", "d", 1000, []byte("v"))
				require.NoError(t, tbl.Apply(ctx, row, m))
			}
			ts := func(row, fam, col string) bigtable.Timestamp {
				t.Helper()
				r, err := tbl.ReadRow(ctx, row, bigtable.RowFilter(bigtable.ChainFilters(bigtable.ColumnRangeFilter(fam, col, col+"\x00"), bigtable.LatestNFilter(1))))
				require.NoError(t, err)
				require.Len(t, r[fam], 1)
				return r[fam][0].Timestamp
			}
			near := func(want, got bigtable.Timestamp, what string) {
				t.Helper()
				assert.InDelta(t, float64(want), float64(got), float64(time.Minute/time.Microsecond), what)
			}

			r := bttl(t, addr, "", "-schema", schema, "expire", "-dry-run", "-if", "GT", "-column", "sess", "s", "u1", "1h")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, `"u1" sess:"a" @`)
			assert.Regexp(t, `sess:"a" @\d+ expires \S+ -> \S+: would set`, r.stdout)
			assert.Regexp(t, `sess:"b" @\d+ expires \S+ -> \S+: not met`, r.stdout)
			assert.Contains(t, r.stdout, "1 rows read, 1 cells would change")
			assert.Equal(t, at(10*time.Minute), ts("u1", "sess", "a"), "dry run: nothing written")

			r = bttl(t, addr, "", "-schema", schema, "expire", "-if", "GT", "-column", "sess", "s", "u1", "1h")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, "1 rows read, 1 cells changed")
			near(at(time.Hour), ts("u1", "sess", "a"), "a extended")
			assert.Equal(t, at(3*time.Hour), ts("u1", "sess", "b"), "b: GT not met")
			assert.Equal(t, bigtable.Timestamp(1000), ts("u1", "doc", "d"), "sequence cells left alone")

			r = bttl(t, addr, "", "-schema", schema, "expire", "-prefix", "u", "-column", "sess:a", "s", "2h")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, "2 rows read, 2 cells changed")
			near(at(2*time.Hour), ts("u1", "sess", "a"), "u1 a")
			near(at(2*time.Hour), ts("u2", "sess", "a"), "u2 a")

			r = bttl(t, addr, "", "-schema", schema, "expire", "-column", "sess:b", "s", "u1", "persist")
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Equal(t, strategy.MaxTimestamp, ts("u1", "sess", "b"))

			r = bttl(t, addr, "", "-schema", schema, "expire", "-column", "capped", "s", "u1", "persist")
			assert.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
			assert.Contains(t, r.stderr, "cannot keep a cell without a TTL")
			assert.Equal(t, at(time.Hour), ts("u1", "capped", "c"), "refused: nothing written")

			for _, args := range [][]string{
				{"expire", "-if", "XY", "s", "u1", "1h"},
				{"expire", "s", "u1", "0s"},
				{"expire", "s", "1h"},
				{"expire", "-prefix", "u", "s", "u1", "1h"},
				{"expire", "-column", "doc", "s", "u1", "1h"},
				{"expire", "nosuch", "u1", "1h"},
			} {
				r := bttl(t, addr, "", append([]string{"-schema", schema}, args...)...)
				assert.Equal(t, exitError, r.code, "%v: %s", args, r.stderr)
			}
		})
	}
}
