package bttestharness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/testenv"
)

// EmulatorPath is where the Debian package google-cloud-cli-bigtable-emulator
// installs the gcloud Bigtable emulator.
const EmulatorPath = "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator"

// ErrNoEmulator: the cbtemulator binary cannot be found.
var ErrNoEmulator = errors.New("bttl: cbtemulator binary not found")

// FindEmulator locates cbtemulator: $BTTL_CBTEMULATOR, then EmulatorPath,
// then cbtemulator on $PATH.
func FindEmulator() (string, error) {
	if p := os.Getenv("BTTL_CBTEMULATOR"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: BTTL_CBTEMULATOR=%s: %v", ErrNoEmulator, p, err)
		}
		return p, nil
	}
	if _, err := os.Stat(EmulatorPath); err == nil {
		return EmulatorPath, nil
	}
	if p, err := exec.LookPath("cbtemulator"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w at %s or on $PATH (install the Debian package google-cloud-cli-bigtable-emulator)", ErrNoEmulator, EmulatorPath)
}

// Emulator is a cbtemulator child process listening on a loopback port.
// It keeps its port across Kill and Restart, so clients dialled to Addr
// reconnect to the restarted server.
type Emulator struct {
	// Addr is host:port of the emulator.
	Addr string

	path string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// emulatorStartTimeout bounds the wait for cbtemulator to report that it
// listens; it starts in milliseconds on an idle machine.
const emulatorStartTimeout = 30 * time.Second

// StartEmulator starts cbtemulator on a free loopback port and returns once
// it listens.
func StartEmulator(ctx context.Context) (*Emulator, error) {
	path, err := FindEmulator()
	if err != nil {
		return nil, err
	}
	// Port 0: the emulator picks the port itself and prints it, so no other
	// process can take it between choosing and binding.
	e := &Emulator{path: path}
	if err := e.start(ctx, "0"); err != nil {
		return nil, err
	}
	return e, nil
}

// start runs cbtemulator on port and waits for the line it prints once it
// listens ("Cloud Bigtable emulator running on HOST:PORT"), which names the
// port it really bound. A port already in use makes it exit instead.
func (e *Emulator) start(ctx context.Context, port string) error {
	cmd := exec.Command(e.path, "-host", "127.0.0.1", "-port", port)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return bttlerr.Wrap(err, "start %s", e.path)
	}
	stderr := &tailBuffer{max: 4096}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return bttlerr.Wrap(err, "start %s", e.path)
	}
	listening := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, addr, ok := strings.Cut(sc.Text(), "running on "); ok {
				listening <- strings.TrimSpace(addr)
				break
			}
		}
		// Keep draining: a full pipe would block the emulator, and Wait must
		// come after the last read.
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(done)
	}()
	e.mu.Lock()
	e.cmd, e.done = cmd, done
	e.mu.Unlock()

	timer := time.NewTimer(emulatorStartTimeout)
	defer timer.Stop()
	select {
	case addr := <-listening:
		if e.Addr != "" && addr != e.Addr {
			e.Kill()
			return fmt.Errorf("bttl: cbtemulator restarted on %s, not on %s", addr, e.Addr)
		}
		e.Addr = addr
		return nil
	case <-done:
		return fmt.Errorf("bttl: cbtemulator on port %s exited before listening: %s", port, strings.TrimSpace(string(stderr.b)))
	case <-ctx.Done():
		e.Kill()
		return ctx.Err()
	case <-timer.C:
		e.Kill()
		return fmt.Errorf("bttl: cbtemulator on port %s did not report listening within %v", port, emulatorStartTimeout)
	}
}

// tailBuffer keeps the last max bytes written to it: the emulator's error
// output (bttest logs every GC pass there), for the message when it fails
// to start. It is read only after cmd.Wait, which waits for the writes.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// Kill stops the emulator at once (SIGKILL) and waits for it to exit. Its
// data is lost. Killing a stopped emulator does nothing.
func (e *Emulator) Kill() {
	e.mu.Lock()
	cmd, done := e.cmd, e.done
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// ErrNoCPUTime: the emulator's CPU time cannot be read (it is not
// running, or the system has no /proc).
var ErrNoCPUTime = errors.New("bttl: no CPU time for cbtemulator")

// CPUTime is the CPU time (user and system) the running emulator process
// has used so far, from /proc (Linux): benchmarks compare the server's work
// behind two clients' requests with it.
func (e *Emulator) CPUTime() (time.Duration, error) {
	e.mu.Lock()
	cmd := e.cmd
	e.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return 0, ErrNoCPUTime
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoCPUTime, err)
	}
	// The fields after the command name in parentheses: state, ppid, ...,
	// utime and stime (the 12th and 13th), in clock ticks (USER_HZ, 100
	// on Linux).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: /proc/%d/stat: %q", ErrNoCPUTime, cmd.Process.Pid, s)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%w: /proc/%d/stat: %q", ErrNoCPUTime, cmd.Process.Pid, s)
	}
	return time.Duration(ut+st) * time.Second / 100, nil
}

// Restart kills the emulator if it runs and starts an empty one on the same
// port. It fails, saying so, if another process took the port meanwhile.
func (e *Emulator) Restart(ctx context.Context) error {
	e.Kill()
	_, port, err := net.SplitHostPort(e.Addr)
	if err != nil {
		return bttlerr.Wrap(err, "restart cbtemulator")
	}
	return e.start(ctx, port)
}

// NewEmulator starts cbtemulator for a test and kills it when the test ends.
// When the binary cannot be found the test is skipped, saying why, outside
// CI; in CI (CI=true), where .ci/run installs it, the test fails.
func NewEmulator(tb testing.TB) *Emulator {
	tb.Helper()
	if _, err := FindEmulator(); err != nil {
		testenv.Missing(tb, testenv.CBTEmulator, err)
	}
	e, err := StartEmulator(context.Background())
	if err != nil {
		tb.Fatalf("bttestharness: %v", err)
	}
	tb.Cleanup(e.Kill)
	return e
}

// NewOnEmulator starts cbtemulator and a harness connected to it, both
// stopped when the test ends.
func NewOnEmulator(tb testing.TB, cfg Config) (*Harness, *Emulator) {
	tb.Helper()
	e := NewEmulator(tb)
	cfg.Addr = e.Addr
	h, err := StartWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("bttestharness: %v", err)
	}
	tb.Cleanup(func() { _ = h.Close() })
	return h, e
}

// OnBothServers runs f as two subtests, "bttest" (the in-process server,
// or BIGTABLE_EMULATOR_HOST's) and "cbtemulator", each with a harness
// started with cfg and closed when the subtest ends: for tests that must
// hold on both emulators.
func OnBothServers(t *testing.T, cfg Config, f func(t *testing.T, h *Harness)) {
	t.Helper()
	t.Run("bttest", func(t *testing.T) {
		h, err := StartWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatalf("bttestharness: %v", err)
		}
		t.Cleanup(func() { _ = h.Close() })
		f(t, h)
	})
	t.Run("cbtemulator", func(t *testing.T) {
		h, _ := NewOnEmulator(t, cfg)
		f(t, h)
	})
}
