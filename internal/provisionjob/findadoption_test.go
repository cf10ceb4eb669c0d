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
	provision "github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/strategy"
)

// Two findings of different kinds in one refusal: one-second expiry over a
// real timestamp (family "b", a rule change, checked first) and write
// times over a reserved column (family "a", rule unchanged). Before the
// five error types became one, errors.As(err, &hc) with a
// *HiddenColumnsError found "a"'s finding wherever it was in the join;
// the migration CHANGELOG gives (errors.As into an *AdoptionError, then
// errors.Is on it) finds "b"'s and reports no hidden columns.
// FindAdoptionError finds each finding by its kind.
func TestFindAdoptionErrorByKind(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", strategy.Schema{"a": strategy.DefaultExpiry(time.Hour), "b": strategy.Unmanaged()}))
	m := bigtable.NewMutation()
	m.Set("a", "\xff\xffold", bigtable.Time(h.Clock.Now()), []byte("live data"))
	m.Set("b", "tok", bigtable.Time(h.Clock.Now().Add(-time.Hour)), []byte("legacy"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r1", m))
	schema := strategy.Schema{"a": strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime()), "b": strategy.OneSecond()}

	var out bytes.Buffer
	_, err := newProvisioner(h, &out).Apply(ctx, "t", schema)
	require.ErrorIs(t, err, provision.ErrHiddenColumns)
	require.ErrorIs(t, err, provision.ErrRealTimestamps)

	hc := provision.FindAdoptionError(err, provision.ErrHiddenColumns)
	require.NotNil(t, hc, "the hidden columns finding, though not the first")
	assert.Equal(t, "a", hc.Family)
	assert.Equal(t, int64(1), hc.Cells)
	assert.Equal(t, "\xff\xffold", hc.Column)
	rt := provision.FindAdoptionError(err, provision.ErrRealTimestamps)
	require.NotNil(t, rt)
	assert.Equal(t, "b", rt.Family)
	assert.Nil(t, provision.FindAdoptionError(err, provision.ErrNotSequenceNumbers), "no such finding")
	assert.Nil(t, provision.FindAdoptionError(nil, provision.ErrHiddenColumns))
	assert.Equal(t, rt, provision.FindAdoptionError(err, provision.ErrUnsafeAdoption), "ErrUnsafeAdoption: the first finding, as errors.As")
	wrapped := provision.FindAdoptionError(errors.Join(errors.New("other"), errors.Join(rt, hc)), provision.ErrHiddenColumns)
	assert.Equal(t, hc, wrapped, "found in a nested join")
}
