package bttestharness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// EmulatorPath is where the Debian package google-cloud-cli-bigtable-emulator
// installs the gcloud Bigtable emulator.
const EmulatorPath = "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator"

// ErrNoEmulator: the cbtemulator binary cannot be found.
var ErrNoEmulator = errors.New("bttestharness: cbtemulator binary not found")

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
	port int
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// StartEmulator starts cbtemulator on a free loopback port and waits until
// it accepts connections.
func StartEmulator(ctx context.Context) (*Emulator, error) {
	path, err := FindEmulator()
	if err != nil {
		return nil, err
	}
	var last error
	// A port found free can be taken before the child binds it: retry.
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		e := &Emulator{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), path: path, port: port}
		if last = e.start(ctx); last == nil {
			return e, nil
		}
	}
	return nil, last
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (e *Emulator) start(ctx context.Context) error {
	cmd := exec.Command(e.path, "-host", "127.0.0.1", "-port", strconv.Itoa(e.port))
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", e.path, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	e.mu.Lock()
	e.cmd, e.done = cmd, done
	e.mu.Unlock()

	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("cbtemulator on port %d exited before answering", e.port)
		case <-ctx.Done():
			e.Kill()
			return ctx.Err()
		default:
		}
		c, err := net.DialTimeout("tcp", e.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			e.Kill()
			return fmt.Errorf("cbtemulator on %s did not answer within 15s: %w", e.Addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a child process's readiness: no clock to inject
	}
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

// Restart kills the emulator if it runs and starts an empty one on the same
// port.
func (e *Emulator) Restart(ctx context.Context) error {
	e.Kill()
	return e.start(ctx)
}

// NewEmulator starts cbtemulator for a test and kills it when the test ends.
// The test is skipped, saying why, only when the binary cannot be found.
func NewEmulator(tb testing.TB) *Emulator {
	tb.Helper()
	if _, err := FindEmulator(); err != nil {
		tb.Skipf("skipping: %v", err)
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
