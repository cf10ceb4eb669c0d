package provisionjob_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	provision "github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/internal/testenv"
	"github.com/bttl/bttl/strategy"
)

const cbtPath = "/usr/bin/cbt"

// onCBTEmulator starts cbtemulator with a harness on it, and returns a
// function running the real cbt against it. Without cbt the test is
// skipped outside CI and fails in CI.
func onCBTEmulator(t *testing.T) (*bttestharness.Harness, func(args ...string)) {
	t.Helper()
	if _, err := os.Stat(cbtPath); err != nil {
		testenv.Missing(t, testenv.CBT, err)
	}
	h, _ := bttestharness.NewOnEmulator(t, bttestharness.Config{})
	// Any -creds value skips cbt's credential lookup; the emulator takes none.
	creds := filepath.Join(t.TempDir(), "no-credentials.json")
	return h, func(args ...string) {
		t.Helper()
		cmd := exec.Command(cbtPath, append([]string{"-project", bttestharness.Project, "-instance", bttestharness.Instance, "-creds", creds}, args...)...)
		cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+h.Addr)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "cbt %v: %s", args, out)
	}
}

// Acceptance 0 on cbtemulator with cells written by cbt: Sequence(3) ->
// DefaultExpiry(48h) over 150 seq*1000 cells is refused with
// an *AdoptionError (ErrAgeOverSequence); the rule and the cells stay.
func TestEmulatorSequenceToAgeRefused(t *testing.T) {
	h, cbt := onCBTEmulator(t)
	ctx := context.Background()
	cbt("createtable", "seqt", "families=doc:maxversions=3")
	for r := 0; r < 10; r++ {
		args := []string{"set", "seqt", fmt.Sprintf("doc#%02d", r)}
		for c := 0; c < 5; c++ {
			for seq := 1; seq <= 3; seq++ {
				args = append(args, fmt.Sprintf("doc:c%d=v%d@%d", c, seq, seq*1000))
			}
		}
		cbt(args...)
	}
	require.Equal(t, 150, countCells(t, h, "seqt"))
	target := strategy.Schema{"doc": strategy.DefaultExpiry(48 * time.Hour)}

	var out bytes.Buffer
	_, err := newProvisioner(h, &out).Apply(ctx, "seqt", target)
	require.ErrorIs(t, err, provision.ErrAgeOverSequence)
	var sc *provision.AdoptionError
	require.True(t, errors.As(err, &sc))
	assert.Equal(t, provision.ErrAgeOverSequence, sc.Err, "the first finding is the one named")
	assert.Equal(t, "seqt", sc.Table)
	assert.Equal(t, "doc", sc.Family)
	assert.Equal(t, int64(150), sc.Cells)
	assert.Equal(t, "doc#00", sc.Row)
	assert.Empty(t, out.String())
	require.NoError(t, verify(t, h, "seqt", strategy.Schema{"doc": strategy.Sequence(3)}), "the rule stays")
	assert.Equal(t, 150, countCells(t, h, "seqt"), "every cell stays")
}

// Acceptance 1 on cbtemulator: three `cbt set` cells (real timestamps)
// under Sequence(3) are refused with an *AdoptionError
// (ErrNotSequenceNumbers); forced, the rule is set and the output says
// what is hidden.
func TestEmulatorSequenceOverCBTCellsRefused(t *testing.T) {
	h, cbt := onCBTEmulator(t)
	ctx := context.Background()
	cbt("createtable", "seqt")
	cbt("createfamily", "seqt", "doc")
	for _, v := range []string{"legacy-a", "legacy-b", "legacy-c"} {
		cbt("set", "seqt", "d1", "doc:body="+v)
	}
	schema := strategy.Schema{"doc": strategy.Sequence(3)}

	var out bytes.Buffer
	_, err := newProvisioner(h, &out).Apply(ctx, "seqt", schema)
	require.ErrorIs(t, err, provision.ErrNotSequenceNumbers)
	var ns *provision.AdoptionError
	require.True(t, errors.As(err, &ns))
	assert.Equal(t, provision.ErrNotSequenceNumbers, ns.Err, "the first finding is the one named")
	assert.Equal(t, "doc", ns.Family)
	assert.Equal(t, int64(3), ns.Cells)
	assert.Equal(t, int64(3), ns.RealTimes)
	assert.Equal(t, "d1", ns.Row)
	assert.Equal(t, "body", ns.Column)
	assert.Empty(t, out.String())
	require.Error(t, verify(t, h, "seqt", schema), "nothing changed")

	_, err = newProvisioner(h, &out, provision.WithForce()).Apply(ctx, "seqt", schema)
	require.NoError(t, err)
	assert.Contains(t, out.String(), "forced: they outrank every sequence number, so reads through bttl return them and hide new writes")
	require.NoError(t, verify(t, h, "seqt", schema))
}
