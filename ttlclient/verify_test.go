package ttlclient_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// createRaw creates table with exactly the given GC rules, bypassing the
// schema.
func createRaw(t *testing.T, h *bttestharness.Harness, table string, rules map[string]bigtable.GCPolicy) {
	t.Helper()
	fams := map[string]bigtable.Family{}
	for f, r := range rules {
		fams[f] = bigtable.Family{GCPolicy: r}
	}
	require.NoError(t, h.Admin.CreateTableFromConf(context.Background(), &bigtable.TableConf{TableID: table, ColumnFamilies: fams}))
}

func TestOpenVerifiesGCRules(t *testing.T) {
	h := bttestharness.New(t)
	age := bigtable.MaxAgePolicy
	ver := bigtable.MaxVersionsPolicy
	cases := []struct {
		name     string
		schema   strategy.Schema
		rules    map[string]bigtable.GCPolicy
		kind     gcrule.Kind
		expected string
		actual   string
	}{
		{"wrong max age", strategy.Schema{"f": strategy.DefaultExpiry(48 * time.Hour)},
			map[string]bigtable.GCPolicy{"f": age(24 * time.Hour)}, gcrule.WrongMaxAge, "max_age=2d", "max_age=1d"},
		// FullGCPolicy would report 1.5s as 1s, a false match.
		{"sub-second max age", strategy.Schema{"f": strategy.OneSecond()},
			map[string]bigtable.GCPolicy{"f": age(1500 * time.Millisecond)}, gcrule.WrongMaxAge, "max_age=1s", "max_age=1s500ms"},
		{"age rule on a sequence family", strategy.Schema{"f": strategy.Sequence(3)},
			map[string]bigtable.GCPolicy{"f": bigtable.UnionPolicy(ver(3), age(time.Hour))}, gcrule.AgeRuleOnSequence, "max_versions=3", "union(max_versions=3, max_age=1h)"},
		{"missing family", strategy.Schema{"f": strategy.OneSecond(), "g": strategy.Unmanaged()},
			map[string]bigtable.GCPolicy{"f": age(time.Second)}, gcrule.MissingFamily, "any (unmanaged)", "missing family"},
		{"intersection rule", strategy.Schema{"f": strategy.OneSecond(strategy.WithMaxVersions(2))},
			map[string]bigtable.GCPolicy{"f": bigtable.IntersectionPolicy(age(time.Second), ver(2))}, gcrule.IntersectionRule, "union(max_age=1s, max_versions=2)", "intersection(max_age=1s, max_versions=2)"},
		{"no rule", strategy.Schema{"f": strategy.Sequence(2)},
			map[string]bigtable.GCPolicy{"f": bigtable.NoGcPolicy()}, gcrule.NoRule, "max_versions=2", "none (never collected)"},
		{"versions not in the policy", strategy.Schema{"f": strategy.OneSecond()},
			map[string]bigtable.GCPolicy{"f": bigtable.UnionPolicy(age(time.Second), ver(1))}, gcrule.WrongMaxVersions, "max_age=1s", "union(max_age=1s, max_versions=1)"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			table := "verify-" + itoa(int64(i))
			createRaw(t, h, table, c.rules)
			_, err := h.Client.Open(context.Background(), table, c.schema)
			require.Error(t, err)
			assert.ErrorIs(t, err, gcrule.ErrMismatch)
			var ge *gcrule.MismatchError
			require.True(t, errors.As(err, &ge), err)
			assert.Equal(t, table, ge.Table)
			assert.Equal(t, c.kind, ge.Kind)
			assert.Equal(t, c.expected, ge.Expected)
			assert.Equal(t, c.actual, ge.Actual)
			for _, part := range []string{table, ge.Family, c.expected, c.actual} {
				assert.Contains(t, err.Error(), part)
			}
			if c.kind == gcrule.IntersectionRule {
				assert.ErrorIs(t, err, strategy.ErrUnsupportedGCRule)
			}
			// The same check is available without opening.
			assert.ErrorIs(t, h.Client.Verify(context.Background(), table, c.schema), gcrule.ErrMismatch)
		})
	}
}

func TestOpenAcceptsMatchingRules(t *testing.T) {
	h := bttestharness.New(t)
	createRaw(t, h, "ok", map[string]bigtable.GCPolicy{
		// Members in another order, nested unions and a redundant larger
		// age mean the same rule.
		"one":   bigtable.UnionPolicy(bigtable.MaxVersionsPolicy(2), bigtable.UnionPolicy(bigtable.MaxAgePolicy(time.Second), bigtable.MaxAgePolicy(time.Hour))),
		"def":   bigtable.MaxAgePolicy(1500 * time.Millisecond),
		"seq":   bigtable.MaxVersionsPolicy(4),
		"plain": bigtable.IntersectionPolicy(bigtable.MaxAgePolicy(time.Hour), bigtable.MaxVersionsPolicy(1)),
	})
	schema := strategy.Schema{
		"one":   strategy.OneSecond(strategy.WithMaxVersions(2)),
		"def":   strategy.DefaultExpiry(1500 * time.Millisecond),
		"seq":   strategy.Sequence(4),
		"plain": strategy.Unmanaged(), // any rule
	}
	_, err := h.Client.Open(context.Background(), "ok", schema)
	require.NoError(t, err)
	require.NoError(t, h.Client.Verify(context.Background(), "ok", schema))
}

func TestOpenReportsEveryMismatchingFamily(t *testing.T) {
	h := bttestharness.New(t)
	createRaw(t, h, "two", map[string]bigtable.GCPolicy{"a": bigtable.MaxAgePolicy(time.Hour)})
	err := h.Client.Verify(context.Background(), "two", strategy.Schema{"a": strategy.Sequence(1), "b": strategy.OneSecond()})
	var all gcrule.Mismatches
	require.True(t, errors.As(err, &all), err)
	require.Len(t, all, 2)
	assert.Equal(t, "a", all[0].Family)
	assert.Equal(t, gcrule.AgeRuleOnSequence, all[0].Kind)
	assert.Equal(t, "b", all[1].Family)
	assert.Equal(t, gcrule.MissingFamily, all[1].Kind)
}

func TestOpenWithoutAdminClient(t *testing.T) {
	h := bttestharness.New(t)
	require.NoError(t, h.CreateTable(context.Background(), "t", mixedSchema()))
	var logs bytes.Buffer
	c := ttlclient.Wrap(h.Raw, ttlclient.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	_, err := c.Open(context.Background(), "t", mixedSchema())
	require.ErrorIs(t, err, ttlclient.ErrNoAdminClient)
	var ne *ttlclient.NoAdminError
	require.True(t, errors.As(err, &ne))
	assert.Equal(t, "t", ne.Table)
	assert.Contains(t, err.Error(), "WithAdminClient")
	assert.Contains(t, err.Error(), "WithoutVerify")
	assert.Empty(t, logs.String())

	tbl, err := c.Open(context.Background(), "t", mixedSchema(), ttlclient.WithoutVerify())
	require.NoError(t, err)
	assert.Equal(t, "t", tbl.Name())
	assert.Contains(t, logs.String(), "not verified")
	assert.Contains(t, logs.String(), "table=t")
}

func TestOpenVerifyErrorsAndTimeout(t *testing.T) {
	h := bttestharness.New(t)
	_, err := h.Client.Open(context.Background(), "no-such-table", mixedSchema())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no-such-table")
	assert.NotErrorIs(t, err, gcrule.ErrMismatch)

	// An expired verify deadline fails Open rather than skipping the check.
	require.NoError(t, h.CreateTable(context.Background(), "t", mixedSchema()))
	_, err = h.Client.Open(context.Background(), "t", mixedSchema(), ttlclient.WithVerifyTimeout(time.Nanosecond))
	require.Error(t, err)
}

func TestNewClientVerifiesWithItsOwnAdminClient(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	createRaw(t, h, "wrong", map[string]bigtable.GCPolicy{"f": bigtable.MaxAgePolicy(time.Hour)})
	require.NoError(t, h.CreateTable(ctx, "right", strategy.Schema{"f": strategy.Sequence(2)}))
	t.Setenv("BIGTABLE_EMULATOR_HOST", h.Addr)
	c, err := ttlclient.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	_, err = c.Open(ctx, "wrong", strategy.Schema{"f": strategy.Sequence(2)})
	assert.ErrorIs(t, err, gcrule.ErrMismatch)
	_, err = c.Open(ctx, "right", strategy.Schema{"f": strategy.Sequence(2)})
	assert.NoError(t, err)
}
