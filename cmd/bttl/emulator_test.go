package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// cbtemulatorPath and cbtPath are the gcloud Bigtable emulator and the cbt
// CLI, which .ci/run installs.
const (
	cbtemulatorPath = "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator"
	cbtPath         = "/usr/bin/cbt"
)

// startCBTEmulator runs cbtemulator as a child process on a free port and
// returns its address; it is killed when the test ends.
func startCBTEmulator(t *testing.T) string {
	t.Helper()
	for _, p := range []string{cbtemulatorPath, cbtPath} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s not installed (.ci/run installs it): %v", p, err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(cbtemulatorPath, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start cbtemulator: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("cbtemulator did not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a child process's start, no clock to inject
	}
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
