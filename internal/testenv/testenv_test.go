package testenv

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInstallNamesEachPackageOnce(t *testing.T) {
	assert.Equal(t, "sudo apt-get install google-cloud-cli-bigtable-emulator google-cloud-cli-cbt prometheus", Install(Tools...))
}

// missingIn runs Missing in a child test binary with CI set as given and
// returns its output and whether it failed.
func missingIn(t *testing.T, ci string) (string, bool) {
	t.Helper()
	cmd := exec.Command(testBinary(t), "-test.run=^TestHelperMissing$", "-test.v")
	cmd.Env = append(cmd.Environ(), "BTTL_TESTENV_HELPER=1", "CI="+ci)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return string(out), err != nil
}

func testBinary(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	require.NoError(t, err)
	return p
}

// A missing tool skips the test outside CI and fails it in CI, and both
// messages name the tool and its install command.
func TestMissingSkipsLocallyAndFailsInCI(t *testing.T) {
	out, failed := missingIn(t, "")
	assert.False(t, failed, out)
	assert.Contains(t, out, "--- SKIP: TestHelperMissing")
	assert.Contains(t, out, "skipping: cbt not found: not on PATH (install: sudo apt-get install google-cloud-cli-cbt")

	out, failed = missingIn(t, "true")
	assert.True(t, failed, out)
	assert.Contains(t, out, "--- FAIL: TestHelperMissing")
	assert.Contains(t, out, "cbt not found, and CI=true requires it: not on PATH (install: sudo apt-get install google-cloud-cli-cbt)")
	assert.False(t, strings.Contains(out, "--- SKIP"), out)
}

func TestHelperMissing(t *testing.T) {
	if os.Getenv("BTTL_TESTENV_HELPER") != "1" {
		t.Skip("run by TestMissingSkipsLocallyAndFailsInCI in a child process")
	}
	Missing(t, CBT, errors.New("not on PATH"))
}
