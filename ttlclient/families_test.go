package ttlclient_test

import (
	"context"
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Open reads the table's families and builds the read filter for them: no
// family regex, and a bare rule when one rule covers every family.
func TestOpenBuildsTheFilterForTheTablesFamilies(t *testing.T) {
	h := bttestharness.New(t)
	one := h.MustTable(t, "one", strategy.Schema{"s": strategy.OneSecond()})
	f := one.Filters().TTL(one.Now()).String()
	assert.True(t, strings.HasPrefix(f, "timestamp_range("), "one family alone: its rule only, got %s", f)

	mixed := h.MustTable(t, "mixed", mixedSchema())
	f = mixed.Filters().TTL(mixed.Now()).String()
	assert.NotContains(t, f, "col(^", "no family regex: %s", f)
	assert.Contains(t, f, bigtable.ColumnRangeFilter(famPlain, "", "").String())

	// WithoutVerify reads no family: families outside the schema are
	// matched by the complement regex.
	blind, err := h.Client.Open(context.Background(), "mixed", mixedSchema(), ttlclient.WithoutVerify(), ttlclient.WithLogger(quietLogger()))
	require.NoError(t, err)
	assert.Contains(t, blind.Filters().TTL(blind.Now()).String(), "col(^")
}

// A family created after Open is not in the filter: reads return none of
// its cells until the table is opened again; when one rule covers every
// family the table had, its cells are read under that rule instead. No
// expired cell of a schema family is ever returned. WithoutVerify reads it
// untouched.
func TestFamilyCreatedAfterOpen(t *testing.T) {
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	defer h.Close()
	ctx := context.Background()
	now := h.Clock.Now()
	old := bigtable.Time(now.Add(-2 * time.Hour))  // older than the default-expiry bound
	recent := bigtable.Time(now.Add(-time.Minute)) // younger than it
	addLate := func(t *testing.T, table string) {
		t.Helper()
		require.NoError(t, h.Admin.CreateColumnFamily(ctx, table, "late"))
		m := bigtable.NewMutation()
		m.Set("late", "old", old-old%1000, []byte("o"))
		m.Set("late", "recent", recent-recent%1000, []byte("r"))
		require.NoError(t, h.Raw.Open(table).Apply(ctx, "row", m))
	}
	lateCells := func(t *testing.T, tbl *ttlclient.Table) []string {
		t.Helper()
		r, err := tbl.ReadRow(ctx, "row")
		require.NoError(t, err)
		var out []string
		for _, it := range r["late"] {
			out = append(out, it.Column)
		}
		return out
	}
	expiredHidden := func(t *testing.T, tbl *ttlclient.Table, fam string) {
		t.Helper()
		m := bigtable.NewMutation()
		m.Set(fam, "expired", old-old%1000, []byte("x"))
		require.NoError(t, tbl.Raw().Apply(ctx, "row", m))
		r, err := tbl.ReadRow(ctx, "row")
		require.NoError(t, err)
		for _, it := range r[fam] {
			assert.NotEqual(t, fam+":expired", it.Column, "expired cell of a schema family returned")
		}
	}

	t.Run("hidden until re-open", func(t *testing.T) {
		schema := strategy.Schema{"def": strategy.DefaultExpiry(time.Hour), "plain": strategy.Unmanaged()}
		tbl := h.MustTable(t, "several", schema)
		addLate(t, "several")
		assert.Empty(t, lateCells(t, tbl))
		expiredHidden(t, tbl, "def")
		reopened, err := h.Client.Open(ctx, "several", schema)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"late:old", "late:recent"}, lateCells(t, reopened))
	})
	t.Run("one rule for every family", func(t *testing.T) {
		schema := strategy.Schema{"def": strategy.DefaultExpiry(time.Hour)}
		tbl := h.MustTable(t, "alone", schema)
		addLate(t, "alone")
		assert.Equal(t, []string{"late:recent"}, lateCells(t, tbl), "read under the one rule (max age 1h)")
		expiredHidden(t, tbl, "def")
		reopened, err := h.Client.Open(ctx, "alone", schema)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"late:old", "late:recent"}, lateCells(t, reopened))
	})
	t.Run("without verify", func(t *testing.T) {
		schema := strategy.Schema{"def": strategy.DefaultExpiry(time.Hour)}
		require.NoError(t, h.CreateTable(ctx, "blind", schema))
		tbl, err := h.Client.Open(ctx, "blind", schema, ttlclient.WithoutVerify(), ttlclient.WithLogger(quietLogger()))
		require.NoError(t, err)
		addLate(t, "blind")
		assert.ElementsMatch(t, []string{"late:old", "late:recent"}, lateCells(t, tbl))
		expiredHidden(t, tbl, "def")
	})
}

// The read filter's size is checked when the table is opened: a schema
// whose filter is over the largest Bigtable serves fails Open with
// filters.ErrFilterTooLarge and a *filters.SizeError, before any read. With the
// families read from the table the same schema fits.
func TestOpenRefusesAFilterOverTheLimit(t *testing.T) {
	letters := rand.New(rand.NewSource(1)) // fixed: the same names every run
	schema := strategy.Schema{}
	for len(schema) < 100 {
		var sb strings.Builder
		for sb.Len() < 20 {
			sb.WriteByte(byte('a' + letters.Intn(26)))
		}
		schema[sb.String()] = strategy.OneSecond()
	}
	h := bttestharness.New(t)
	rec := metrics.New()
	_, err := h.Client.Open(context.Background(), "wide", schema, ttlclient.WithoutVerify(), ttlclient.WithLogger(quietLogger()), ttlclient.WithRecorder(rec))
	require.Error(t, err)
	assert.True(t, errors.Is(err, filters.ErrFilterTooLarge))
	var se *filters.SizeError
	require.True(t, errors.As(err, &se))
	assert.Greater(t, se.Bytes, filters.MaxFilterBytes)
	assert.Contains(t, err.Error(), `open table "wide"`)
	assert.Equal(t, map[string]float64{"wide//filter_too_large": 1}, refusals(t, rec))

	tbl := h.MustTable(t, "wide", schema)
	size := tbl.Filters().Size(tbl.Now())
	assert.Less(t, size, filters.MaxFilterBytes)
	t.Logf("100 one-second families of 20 bytes: %d bytes without the families (refused), %d with them", se.Bytes, size)
}
