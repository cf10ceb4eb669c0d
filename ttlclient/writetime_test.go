package ttlclient_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

func writeTimeSchema() strategy.Schema {
	return strategy.Schema{
		"one":    strategy.OneSecond(strategy.WithWriteTime()),
		"def":    strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime()),
		"single": strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime(), strategy.SingleValue()),
		"capped": strategy.OneSecond(strategy.WithWriteTime(), strategy.WithMaxVersions(2), strategy.WithDefaultTTL(time.Hour)),
		famSeq:   strategy.Sequence(2),
		"plain":  strategy.Unmanaged(),
	}
}

var writeTimeFamilies = []string{"one", "def", "single", "capped"}

// Acceptance 4: the write time comes back exact to the millisecond for
// every age strategy, after an extend too.
func TestWriteTimeIsExactAndSurvivesExpire(t *testing.T) {
	// No server GC: a 1s TTL in a default-expiry (1h) family is stored an
	// hour less a second in the past, which the server's GC, on the real
	// clock, collects once a second has passed (it did under load).
	e := newEnvNoGC(t, writeTimeSchema())
	written := e.h.Clock.Now().Add(700 * time.Microsecond) // a clock between milliseconds
	e.h.Clock.Set(written)
	for _, fam := range writeTimeFamilies {
		for _, ttl := range []time.Duration{time.Second, 3 * time.Hour} {
			e.setTTL(t, "r/"+ttl.String(), fam, "c", "v", ttl)
		}
	}
	want := written.Truncate(time.Millisecond)
	e.h.Clock.Advance(500 * time.Millisecond)
	for _, fam := range writeTimeFamilies {
		for _, ttl := range []time.Duration{time.Second, 3 * time.Hour} {
			row := "r/" + ttl.String()
			got, err := e.tbl.WriteTime(e.ctx, e.readCell(t, row, fam, "c"))
			require.NoError(t, err, fam)
			assert.True(t, want.Equal(got), "%s ttl %s: write time %s, want %s", fam, ttl, got, want)

			applied, err := e.tbl.Expire(e.ctx, row, fam, "c", 5*time.Hour)
			require.NoError(t, err)
			require.True(t, applied)
			it := e.readCell(t, row, fam, "c")
			got, err = e.tbl.WriteTime(e.ctx, it)
			require.NoError(t, err, fam)
			assert.True(t, want.Equal(got), "%s after Expire: write time %s, want %s", fam, got, want)
			left, err := e.tbl.RemainingTTL(it)
			require.NoError(t, err)
			now := e.h.Clock.Now() // between milliseconds: the expiry is ms(now+5h)
			assert.Equal(t, now.Add(5*time.Hour).Truncate(time.Millisecond).Sub(now), left)
			// Stored: the cell and its companion, at the same timestamp.
			r, err := e.h.Stored(e.ctx, e.tbl.Name(), row)
			require.NoError(t, err)
			require.Len(t, r[fam], 2, "%s: %v", fam, cells(r))
			assert.Equal(t, r[fam][0].Timestamp, r[fam][1].Timestamp)
			assert.Equal(t, fam+":"+strategy.WriteTimePrefix+"c", r[fam][1].Column)
		}
	}
}

// Reads through bttl never return a companion, and a caller's limit or
// offset filter counts only real cells.
func TestReadsHideCompanions(t *testing.T) {
	e := newEnv(t, writeTimeSchema())
	m := ttlclient.NewMutation()
	for _, c := range []string{"a", "b", "\xfe"} {
		m.SetTTL("def", c, time.Hour, []byte(c))
	}
	e.apply(t, "r", m)
	assert.Equal(t, []string{"def:a@" + itoa(int64(e.now())) + "=a", "def:b@" + itoa(int64(e.now())) + "=b", "def:\xfe@" + itoa(int64(e.now())) + "=\xfe"}, e.read(t, "r"))
	assert.Len(t, e.stored(t, "r"), 6, "three cells, three companions")
	assert.Equal(t, []string{"def:\xfe@" + itoa(int64(e.now())) + "=\xfe"}, e.read(t, "r", bigtable.RowFilter(bigtable.CellsPerRowOffsetFilter(2))))
	assert.Equal(t, []string{"def:a@" + itoa(int64(e.now())) + "=a"}, e.read(t, "r", bigtable.RowFilter(bigtable.CellsPerRowLimitFilter(1))))

	// ExpireRow moves the three cells, not the companions as cells of
	// their own; each companion moves with its cell.
	moved, err := e.tbl.ExpireRow(e.ctx, "r", 2*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 3, moved)
	assert.Len(t, e.stored(t, "r"), 6)
}

func TestWriteTimeErrorsAndReservedColumns(t *testing.T) {
	e := newEnv(t, writeTimeSchema())
	m := ttlclient.NewMutation()
	m.SetVersion(famSeq, "c", 1, []byte("v"))
	m.Set("plain", "c", 1000, []byte("v"))
	e.apply(t, "r", m)
	for _, fam := range []string{famSeq, "plain"} {
		_, err := e.tbl.WriteTime(e.ctx, e.readCell(t, "r", fam, "c"))
		require.ErrorIs(t, err, ttlclient.ErrNotApplicable, fam)
	}
	plainAge := newEnv(t, mixedSchema())
	plainAge.setTTL(t, "r", famDef, "c", "v", time.Hour)
	_, err := plainAge.tbl.WriteTime(plainAge.ctx, plainAge.readCell(t, "r", famDef, "c"))
	require.ErrorIs(t, err, ttlclient.ErrNotApplicable, "an age family without WithWriteTime")

	// A cell written past bttl has no companion.
	mut := bigtable.NewMutation()
	mut.Set("def", "raw", bigtable.Timestamp(e.h.Clock.Now().UnixMicro()), []byte("v"))
	require.NoError(t, e.h.Raw.Open(e.tbl.Name()).Apply(e.ctx, "r", mut))
	_, err = e.tbl.WriteTime(e.ctx, e.readCell(t, "r", "def", "raw"))
	require.ErrorIs(t, err, ttlclient.ErrNoWriteTime)

	before := e.stored(t, "r")
	for _, col := range []string{"\xff\xff", "\xff\xffx", strategy.WriteTimePrefix + "c"} {
		m := ttlclient.NewMutation()
		m.Set("def", col, bigtable.ServerTime, []byte("v"))
		require.ErrorIs(t, e.tbl.Apply(e.ctx, "r", m), ttlclient.ErrReservedColumn)
		m = ttlclient.NewMutation()
		m.DeleteCellsInColumn("one", col)
		require.ErrorIs(t, e.tbl.Apply(e.ctx, "r", m), ttlclient.ErrReservedColumn)
		_, err := e.tbl.Expire(e.ctx, "r", "def", col, time.Hour)
		require.ErrorIs(t, err, ttlclient.ErrReservedColumn)
	}
	assert.Equal(t, before, e.stored(t, "r"))
	// A column starting with one 0xFF byte is an ordinary column.
	m = ttlclient.NewMutation()
	m.Set("def", "\xffa", bigtable.ServerTime, []byte("v"))
	e.apply(t, "r", m)
}

// Deletes through bttl take the companions with them; a single-value
// write replaces the older companions as it replaces the older cells.
func TestDeletesTakeCompanions(t *testing.T) {
	e := newEnv(t, writeTimeSchema())
	e.setTTL(t, "r", "single", "c", "v1", time.Hour)
	e.setTTL(t, "r", "single", "c", "v2", 2*time.Hour)
	assert.Len(t, e.stored(t, "r"), 2, "one cell, one companion")
	e.setTTL(t, "r", "def", "c", "v", time.Hour)
	e.setTTL(t, "r", "def", "d", "v", time.Hour)
	m := ttlclient.NewMutation()
	m.DeleteCellsInColumn("def", "c")
	m.DeleteTimestampRange("def", "d", 0, 0)
	m.DeleteCellsInColumn("single", "c")
	e.apply(t, "r", m)
	assert.Empty(t, e.stored(t, "r"))
}

// Acceptance 4: a companion expires with its cell. The servers collect on
// real time, so this waits for their GC (every 0.5-1.5 s).
func TestCompanionIsCollectedWithItsCell(t *testing.T) {
	for _, server := range []string{"bttest", "cbtemulator"} {
		t.Run(server, func(t *testing.T) {
			var h *bttestharness.Harness
			if server == "bttest" {
				h = bttestharness.New(t)
			} else {
				h, _ = bttestharness.NewOnEmulator(t, bttestharness.Config{})
			}
			ctx := context.Background()
			tbl := h.MustTable(t, "gc", writeTimeSchema())
			h.Clock.Set(time.Now()) // the servers' GC runs on real time
			m := ttlclient.NewMutation()
			m.SetTTL("one", "c", time.Millisecond, []byte("v"))
			m.SetTTL("def", "c", time.Millisecond, []byte("v"))
			m.Set("plain", "keep", 1000, []byte("row stays"))
			require.NoError(t, tbl.Apply(ctx, "r", m))
			r, err := h.Stored(ctx, tbl.Name(), "r")
			require.NoError(t, err)
			require.Len(t, r["one"], 2)
			require.Len(t, r["def"], 2)
			require.Eventually(t, func() bool {
				r, err := h.Stored(ctx, tbl.Name(), "r")
				require.NoError(t, err)
				return len(r["one"]) == 0 && len(r["def"]) == 0
			}, 20*time.Second, 100*time.Millisecond, "GC collects each cell and its companion")
		})
	}
}

// The cost of a companion: the extra SetCell in the request, measured for
// a typical qualifier.
func TestCompanionWireCost(t *testing.T) {
	e := newEnv(t, writeTimeSchema())
	ts := bigtable.Timestamp(e.h.Clock.Now().UnixMicro())
	sc := &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
		FamilyName:      "def",
		ColumnQualifier: []byte(strategy.WriteTimePrefix + "token"),
		TimestampMicros: int64(ts),
		Value:           make([]byte, 8),
	}}}
	n := proto.Size(sc)
	t.Logf("companion of def:token: %d bytes on the wire (qualifier %d bytes = %d prefix + column, value 8, timestamp varint)",
		n, len(strategy.WriteTimePrefix)+len("token"), len(strategy.WriteTimePrefix))
	assert.Equal(t, 2+2+len("def")+2+len(strategy.WriteTimePrefix)+len("token")+1+8+2+8, n, "SetCell: family, qualifier, 8-byte timestamp varint, 8-byte value")
	assert.True(t, strings.HasPrefix(strategy.WriteTimePrefix, "\xff\xff"))
}
