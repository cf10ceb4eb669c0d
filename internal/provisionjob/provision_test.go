package provisionjob_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/gcrule"
	provision "github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/strategy"
)

func newProvisioner(h *bttestharness.Harness, out *bytes.Buffer, opts ...provision.Option) *provision.Provisioner {
	admin := gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance)
	return provision.New(admin, h.Raw, append([]provision.Option{provision.WithClock(h.Clock), provision.WithOutput(out)}, opts...)...)
}

func verify(t *testing.T, h *bttestharness.Harness, table string, schema strategy.Schema) error {
	t.Helper()
	return gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance).Verify(context.Background(), table, schema)
}

func TestApplyCreatesAndIsIdempotent(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	schema := strategy.Schema{
		"one":   strategy.OneSecond(),
		"def":   strategy.DefaultExpiry(48*time.Hour, strategy.WithMaxVersions(2)),
		"seq":   strategy.Sequence(3),
		"plain": strategy.Unmanaged(),
	}
	var out bytes.Buffer
	p := newProvisioner(h, &out)
	plan, err := p.Apply(ctx, "fresh", schema)
	require.NoError(t, err)
	assert.True(t, plan.CreateTable)
	assert.Len(t, plan.Changes, 4)
	assert.Contains(t, out.String(), `create family "one" with max_age=1s`)
	assert.Contains(t, out.String(), `create family "def" with union(max_age=2d, max_versions=2)`)
	assert.NotContains(t, out.String(), "caveat", "new families lower no rule")
	require.NoError(t, verify(t, h, "fresh", schema))

	out.Reset()
	plan, err = p.Apply(ctx, "fresh", schema)
	require.NoError(t, err)
	assert.True(t, plan.Empty())
	assert.Equal(t, "table \"fresh\": no change (every family matches the schema)\n", out.String())
}

func TestApplyFixesRulesAndPrintsCaveats(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"def": {GCPolicy: bigtable.MaxAgePolicy(24 * time.Hour)},
		"seq": {GCPolicy: bigtable.UnionPolicy(bigtable.MaxVersionsPolicy(5), bigtable.MaxAgePolicy(time.Hour))},
	}}))
	schema := strategy.Schema{"def": strategy.DefaultExpiry(48 * time.Hour), "seq": strategy.Sequence(5)}
	var out bytes.Buffer
	p := newProvisioner(h, &out)

	plan, err := p.Plan(ctx, "t", schema)
	require.NoError(t, err)
	require.Len(t, plan.Changes, 2)
	assert.Equal(t, provision.SetRule, plan.Changes[0].Action)
	assert.True(t, plan.Changes[0].Raises, "24h -> 48h")
	assert.True(t, plan.Changes[1].Raises, "the age rule goes away")
	assert.Empty(t, out.String(), "Plan changes and prints nothing")
	require.Error(t, verify(t, h, "t", schema))

	_, err = p.Apply(ctx, "t", schema)
	require.NoError(t, err)
	assert.Contains(t, out.String(), `family "def" (default-expiry(D=48h0m0s)): max_age=1d -> max_age=2d [raises]`)
	assert.Contains(t, out.String(), provision.Caveat)
	require.NoError(t, verify(t, h, "t", schema))

	// Lowering prints the caveat too.
	out.Reset()
	schema["def"] = strategy.DefaultExpiry(time.Hour)
	plan, err = p.Apply(ctx, "t", schema)
	require.NoError(t, err)
	assert.True(t, plan.Changes[0].Lowers)
	assert.Contains(t, out.String(), "[lowers]")
	assert.Contains(t, out.String(), provision.Caveat)
}

func TestOneSecondAdoptionRefusedOverRealTimestamps(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"s": {GCPolicy: bigtable.NoGcPolicy()}, "d": {GCPolicy: bigtable.NoGcPolicy()},
	}}))
	future := bigtable.Timestamp(h.Clock.Now().Add(time.Hour).UnixMicro()) / 1000 * 1000
	m := bigtable.NewMutation()
	m.Set("s", "future", future, []byte("ok: an expiry instant"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "a", m))
	schema := strategy.Schema{"s": strategy.OneSecond(), "d": strategy.DefaultExpiry(time.Hour)}

	var out bytes.Buffer
	p := newProvisioner(h, &out)
	plan, err := p.Plan(ctx, "t", schema)
	require.NoError(t, err)
	require.NoError(t, p.CheckAdoptions(ctx, plan), "only future timestamps")

	// A server-timestamp write, as legacy code or cbt makes.
	m = bigtable.NewMutation()
	m.Set("s", "legacy", bigtable.ServerTime, []byte("real"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "b", m))
	// The server stamped it with its real time: put the clock past that.
	h.Clock.Set(time.Now().Add(time.Second))

	_, err = p.Apply(ctx, "t", schema)
	require.ErrorIs(t, err, provision.ErrRealTimestamps)
	var rt *provision.AdoptionError
	require.True(t, errors.As(err, &rt))
	assert.Equal(t, provision.ErrRealTimestamps, rt.Err, "the first finding is the one named")
	assert.Equal(t, "s", rt.Family)
	assert.Equal(t, int64(1), rt.Cells)
	assert.Equal(t, "b", rt.Row)
	assert.Equal(t, "legacy", rt.Column)
	assert.Empty(t, out.String())
	var ms gcrule.Mismatches
	require.True(t, errors.As(verify(t, h, "t", schema), &ms))
	assert.Len(t, ms, 2, "nothing changed, not even the other family")

	_, err = newProvisioner(h, &out, provision.WithForce()).Apply(ctx, "t", schema)
	require.NoError(t, err)
	assert.Contains(t, out.String(), "forced:")
	require.NoError(t, verify(t, h, "t", schema))
}

// Execute with a schema other than the plan's could set a rule nobody
// planned (a family missing from it would lose its GC rule): it is refused
// before the table is touched.
func TestExecuteRefusesASchemaOtherThanThePlans(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"def": {GCPolicy: bigtable.MaxAgePolicy(time.Hour)},
	}}))
	planned := strategy.Schema{"def": strategy.DefaultExpiry(48 * time.Hour)}
	var out bytes.Buffer
	p := newProvisioner(h, &out)
	plan, err := p.Plan(ctx, "t", planned)
	require.NoError(t, err)
	require.Len(t, plan.Changes, 1)

	for name, other := range map[string]strategy.Schema{
		"other policy":   {"def": strategy.DefaultExpiry(2 * time.Hour)},
		"family missing": {"elsewhere": strategy.DefaultExpiry(48 * time.Hour)},
	} {
		err := p.Execute(ctx, plan, other)
		require.ErrorIs(t, err, provision.ErrPlanMismatch, name)
		assert.Contains(t, err.Error(), `family "def"`, name)
	}
	assert.Empty(t, out.String(), "nothing carried out")
	err = verify(t, h, "t", planned)
	require.Error(t, err, "the rule is still the old one")

	require.NoError(t, p.Execute(ctx, plan, planned))
	require.NoError(t, verify(t, h, "t", planned))
}
