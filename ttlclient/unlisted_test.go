package ttlclient_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// cellsOf is r's cells of the families keep selects, as
// family:column@ts=value, without the row key (rows written through bttl
// and through the raw client are compared).
func cellsOf(r bigtable.Row, keep func(fam string) bool) []string {
	var out []string
	for fam, items := range r {
		if !keep(fam) {
			continue
		}
		for _, it := range items {
			out = append(out, fmt.Sprintf("%s@%d=%q", it.Column, it.Timestamp, it.Value))
		}
	}
	sort.Strings(out)
	return out
}

// A 30-family table opened with a 2-family schema and
// WithUnlistedFamilies(Unmanaged()) reads and writes the other 28 families
// exactly as the raw client does, on both servers; the 2 managed families are
// still filtered, on reads of one family and of all; without the option the
// same writes are refused (issue 28).
func TestUnlistedFamiliesPassThroughAsRaw(t *testing.T) {
	onBothServers(t, false, func(t *testing.T, h *bttestharness.Harness, _ *viewShim) {
		ctx := context.Background()
		full := strategy.Schema{famDef: strategy.DefaultExpiry(defaultD), famSeq: strategy.Sequence(2)}
		var unlisted []string
		for i := range 28 {
			f := fmt.Sprintf("u%02d", i)
			unlisted = append(unlisted, f)
			full[f] = strategy.Unmanaged()
		}
		require.NoError(t, h.CreateTable(ctx, "wide", full))
		schema := strategy.Schema{famDef: full[famDef], famSeq: full[famSeq]}
		tbl, err := h.Client.Open(ctx, "wide", schema, ttlclient.WithUnlistedFamilies(strategy.Unmanaged()))
		require.NoError(t, err)
		raw := h.Raw.Open("wide")
		isUnlisted := func(f string) bool { return f != famDef && f != famSeq }

		// The same operations on every unlisted family, through bttl on
		// row "b" and through the raw client on row "r".
		now := bigtable.Time(h.Clock.Now()).TruncateToMilliseconds()
		ms := bigtable.Timestamp(1000)
		write := func(set func(fam, col string, ts bigtable.Timestamp, v []byte), delCol func(fam, col string), delRange func(fam, col string, s, e bigtable.Timestamp)) {
			for i, f := range unlisted {
				set(f, "a", now-bigtable.Timestamp(i)*ms, []byte("v1-"+f))
				set(f, "a", now-bigtable.Timestamp(i+100)*ms, []byte("v0-"+f))
				set(f, "b", 5*ms, []byte("old"))
				set(f, "c", 7*ms, []byte("gone"))
				set(f, "d", 9*ms, []byte("ranged"))
				set(f, "d", 11*ms, []byte("kept"))
				delCol(f, "c")
				delRange(f, "d", 8*ms, 10*ms)
			}
		}
		bm := ttlclient.NewMutation()
		write(func(fam, col string, ts bigtable.Timestamp, v []byte) { bm.Set(fam, col, ts, v) }, bm.DeleteCellsInColumn, bm.DeleteTimestampRange)
		require.NoError(t, tbl.Apply(ctx, "b", bm))
		rm := bigtable.NewMutation()
		write(rm.Set, rm.DeleteCellsInColumn, rm.DeleteTimestampRange)
		require.NoError(t, raw.Apply(ctx, "r", rm))

		// ReadModifyWrite on unlisted families, both ways.
		for _, row := range []string{"b", "r"} {
			for _, f := range unlisted[:3] {
				if row == "b" {
					rmw := ttlclient.NewReadModifyWrite()
					rmw.AppendValue(f, "app", []byte("x"))
					_, err := tbl.ApplyReadModifyWrite(ctx, row, rmw)
					require.NoError(t, err)
				} else {
					rmw := bigtable.NewReadModifyWrite()
					rmw.AppendValue(f, "app", []byte("x"))
					_, err := raw.ApplyReadModifyWrite(ctx, row, rmw)
					require.NoError(t, err)
				}
			}
		}

		storedB, err := raw.ReadRow(ctx, "b")
		require.NoError(t, err)
		storedR, err := raw.ReadRow(ctx, "r")
		require.NoError(t, err)
		// Appends get server timestamps: compare them without.
		noTS := func(cells []string) []string {
			out := make([]string, len(cells))
			for i, c := range cells {
				if strings.Contains(c, ":app@") {
					c = c[:strings.Index(c, "@")] + c[strings.Index(c, "="):]
				}
				out[i] = c
			}
			return out
		}
		want := noTS(cellsOf(storedR, isUnlisted))
		require.Len(t, want, 28*4+3, "the raw writes stored 4 cells per family (a twice, b, d outside the range) and 3 appends")
		assert.Equal(t, want, noTS(cellsOf(storedB, isUnlisted)), "bttl stored the unlisted families' cells as the raw client did")

		// Managed families beside them: an expired default-expiry cell and
		// a third sequence version, stored past bttl.
		m := bigtable.NewMutation()
		m.Set(famDef, "c", now-bigtable.Timestamp(2*defaultD/time.Microsecond), []byte("expired"))
		m.Set(famDef, "c", now, []byte("live"))
		for seq := int64(1); seq <= 3; seq++ {
			m.Set(famSeq, "c", bigtable.Timestamp(seq*1000), []byte(fmt.Sprint("seq", seq)))
		}
		require.NoError(t, raw.Apply(ctx, "r", m))

		// Reads of every family: unlisted ones as the raw client reads
		// them; managed ones filtered.
		for _, opts := range [][]bigtable.ReadOption{
			nil,
			{bigtable.RowFilter(bigtable.LatestNFilter(1))},
			{bigtable.RowFilter(bigtable.ColumnFilter("a|b"))},
		} {
			got, err := tbl.ReadRow(ctx, "r", opts...)
			require.NoError(t, err)
			rawGot, err := raw.ReadRow(ctx, "r", opts...)
			require.NoError(t, err)
			assert.Equal(t, cellsOf(rawGot, isUnlisted), cellsOf(got, isUnlisted))
			assert.NotEmpty(t, cellsOf(got, isUnlisted))
			managed := cellsOf(got, func(f string) bool { return !isUnlisted(f) })
			for _, c := range managed {
				assert.NotContains(t, c, "expired", "an expired cell of a managed family was read")
				assert.NotContains(t, c, "seq1", "a sequence version past N was read")
			}
		}
		got, err := tbl.ReadRow(ctx, "r")
		require.NoError(t, err)
		assert.Equal(t, []string{
			fmt.Sprintf("def:c@%d=%q", now, "live"),
			`seq:c@2000="seq2"`, `seq:c@3000="seq3"`,
		}, cellsOf(got, func(f string) bool { return !isUnlisted(f) }))

		// A family created after Open passes too, written and read.
		require.NoError(t, h.Admin.CreateColumnFamily(ctx, "wide", "late"))
		lm := ttlclient.NewMutation()
		lm.Set("late", "c", 3*ms, []byte("new"))
		require.NoError(t, tbl.Apply(ctx, "b", lm))
		got, err = tbl.ReadRow(ctx, "b", bigtable.RowFilter(bigtable.FamilyFilter("late")))
		require.NoError(t, err)
		assert.Equal(t, []string{`late:c@3000="new"`}, cellsOf(got, func(string) bool { return true }))

		// The default stays strict: the same write without the option is
		// refused before any RPC.
		strict, err := h.Client.Open(ctx, "wide", schema)
		require.NoError(t, err)
		sm := ttlclient.NewMutation()
		sm.Set(unlisted[0], "z", ms, []byte("v"))
		require.ErrorIs(t, strict.Apply(ctx, "s", sm), ttlclient.ErrUnknownFamily)
		stored, err := raw.ReadRow(ctx, "s")
		require.NoError(t, err)
		assert.Empty(t, stored)
	})
}

// WithUnlistedFamilies takes Unmanaged() only: Open refuses another policy.
func TestUnlistedFamiliesMustBeUnmanaged(t *testing.T) {
	h := bttestharness.New(t)
	require.NoError(t, h.CreateTable(context.Background(), "t", strategy.Schema{famPlain: strategy.Unmanaged()}))
	for _, p := range []strategy.Policy{strategy.OneSecond(), strategy.Sequence(2), strategy.DefaultExpiry(time.Hour)} {
		_, err := h.Client.Open(context.Background(), "t", strategy.Schema{famPlain: strategy.Unmanaged()}, ttlclient.WithUnlistedFamilies(p))
		require.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	}
}
