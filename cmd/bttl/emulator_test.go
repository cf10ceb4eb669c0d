package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/internal/testenv"
)

// cbtPath is the cbt CLI, which .ci/run installs (Debian package
// google-cloud-cli-cbt).
const cbtPath = "/usr/bin/cbt"

// startCBTEmulator runs cbtemulator as a child process and returns its
// address; it is killed when the test ends. Without cbtemulator or cbt the
// test is skipped, naming the missing binary, or fails in CI (CI=true).
func startCBTEmulator(t *testing.T) string {
	t.Helper()
	return startCBTEmulatorProcess(t).Addr
}

// startCBTEmulatorProcess is startCBTEmulator for tests that kill it.
func startCBTEmulatorProcess(t *testing.T) *bttestharness.Emulator {
	t.Helper()
	if _, err := os.Stat(cbtPath); err != nil {
		testenv.Missing(t, testenv.CBT, err)
	}
	if _, err := bttestharness.FindEmulator(); err != nil {
		testenv.Missing(t, testenv.CBTEmulator, err)
	}
	return bttestharness.NewEmulator(t)
}

// cbt runs the real cbt CLI against the emulator at addr.
func cbt(t *testing.T, addr string, args ...string) string {
	t.Helper()
	// Any -creds value skips cbt's gcloud credential lookup (a second per
	// call); the emulator takes no credentials.
	creds := filepath.Join(t.TempDir(), "no-credentials.json")
	cmd := exec.Command(cbtPath, append([]string{"-project", "p", "-instance", "i", "-creds", creds}, args...)...)
	cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cbt %v: %v\n%s", args, err, out)
	}
	return string(out)
}
