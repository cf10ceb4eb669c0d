package examples

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
)

// proofs are, per program, output lines that show it did its job. A program
// not listed here (a new example) must still exit 0 and print something.
var proofs = map[string][]string{
	"quickstart": {
		`^wrote row user#1: `, // the first line says what was done, not a refusal
		`guardrail, as expected: a server-timestamp write to the one-second family is refused before it is sent \(bttl: server timestamp`,
		`read through bttl \(3 cells\): doc:body="revision 2" doc:body="revision 3" meta:owner="ada"`,
	},
	"clickevents": {
		// The 1-hour customer's events are gone at t0+1h (but still stored),
		// the 3-day customer's are there at t0+2d, the default ones are not.
		`at t0\+1h: customer-03's 1h events: 0 readable, 3 still stored until GC`,
		`at t0\+2d: customer-07's 3-day events: 3 readable; customer-00's 2-day events: 0 readable`,
		`at t0\+3d: customer-07's 3-day events: 0 readable`,
		`customer-03\s+1h\s+3/3\s+0/3\s+0/3\s+0/3`,
		`customer-07\s+72h\s+3/3\s+3/3\s+3/3\s+0/3`,
	},
	"onesecond": {
		`at t0\+31s\s+3 live: \[banner cart token\]`,
		`at t0\+25h0m0s\s+0 live: \[\]`,
		`server-timestamp write: refused=true \(ErrServerTimestamp\)`,
		`real-timestamp write:\s+refused=true \(ErrAlreadyExpired\)`,
	},
	"sequence": {
		`allocated 12 distinct sequence numbers 1\.\.12: true`,
		`read through bttl: 3 revisions: \[12 11 10\]`,
		`after a late write of revision 2, the latest is still revision 12`,
		`increment on the sequence family: refused=true`,
	},
	"metrics": {
		// Expired cells the server has not collected: walked past by
		// shadow reads (observations), and stored now (the audit's stock).
		`bttl_shadow_read_expired_cells_total\{family="session",strategy="one-second",table="events"\} 25`,
		`bttl_shadow_read_expired_cells_total\{family="clicks",strategy="default-expiry",table="events"\} 50`,
		`bttl_audit_expired_not_collected_cells\{family="session",strategy="one-second",table="events"\} 20`,
		`bttl_audit_expired_not_collected_cells\{family="clicks",strategy="default-expiry",table="events"\} 40`,
		`bttl_refusals_total\{family="session",reason="server_timestamp",table="events"\} 1`,
	},
	"sessions": {
		// Used every minute: never expires, refresh writes bounded by the
		// debounce; idle: expires 30m after its last refresh; logout and
		// "remember me" through Expire.
		`at t0\+2h\s+alice: 30m left\s+bob: expired\s+carol: 718h left\s+dave: expired`,
		`at t0\+50m bob's session has expired \(last used at t0\+20m\)`,
		`at t0\+16m dave's session has expired \(last used at t0\+14m\)`,
		`alice's 120 minutes of use cost 30 refresh writes, at most 41`,
	},
	"migrate": {
		`default-expiry adoption keeps 3 of 5 pre-existing cells`,
		`one-second adoption would keep 0 of 5`,
		`after adoption, read through bttl: 3 of 5 pre-existing cells: \[viewed-1h-ago viewed-30h-ago viewed-47h-ago\]`,
		`at t0\+2h0m0s\s+read through bttl: \[legacy-servertime new-default viewed-1h-ago viewed-30h-ago\]`,
	},
}

// TestEveryExampleRuns builds every program under examples/ once and runs
// each as a user would, with no flags, checking its proof lines.
func TestEveryExampleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every example")
	}
	t.Parallel()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	mains := mainPackages(t, root)
	require.NotEmpty(t, mains)

	// One go build for all of them shares the work; the binaries run
	// without the race detector, like `go run` does.
	bin := t.TempDir()
	// -s -w: no symbol table or DWARF, which cuts link time by about 40%.
	args := append([]string{"build", "-ldflags=-s -w", "-o", bin + string(filepath.Separator)}, mains...)
	build := exec.Command("go", args...)
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	t.Run("embedded", func(t *testing.T) {
		// The programs' default: an in-process emulator of their own.
		runAll(t, root, bin, mains, withoutEnv("BIGTABLE_EMULATOR_HOST"))
	})
	t.Run("cbtemulator", func(t *testing.T) {
		// The same programs against a separate emulator process, through
		// BIGTABLE_EMULATOR_HOST; they share it, each with its own table.
		addr := bttestharness.NewEmulator(t).Addr // skipped, saying why, without the binary
		runAll(t, root, bin, mains, append(withoutEnv("BIGTABLE_EMULATOR_HOST"), "BIGTABLE_EMULATOR_HOST="+addr))
	})
}

func runAll(t *testing.T, root, bin string, mains, env []string) {
	for _, pkg := range mains {
		name := filepath.Base(pkg)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, name))
			cmd.Dir = root
			cmd.Env = env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			elapsed := time.Since(start)
			require.NoError(t, err, "%s failed\nstdout:\n%s\nstderr:\n%s", name, stdout.String(), stderr.String())
			t.Logf("%s ran in %s", name, elapsed.Round(time.Millisecond))
			assert.Less(t, elapsed, 30*time.Second, "an example must finish in under 30 s")
			text := stdout.String()
			require.NotEmpty(t, strings.TrimSpace(text), "%s printed nothing", name)
			for _, p := range proofs[name] {
				assert.Regexp(t, regexp.MustCompile(p), text, "%s output lacks its proof line", name)
			}
		})
	}
}

func withoutEnv(key string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, key+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// TestProofsNameRealExamples keeps the proofs table in step with the
// directories: a renamed example would otherwise lose its checks silently.
func TestProofsNameRealExamples(t *testing.T) {
	for name := range proofs {
		_, err := os.Stat(filepath.Join(name, "main.go"))
		assert.NoError(t, err, "proofs names %q, which is not an example directory", name)
	}
}

// mainPackages lists the import paths of the main packages under examples/.
func mainPackages(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "./examples/...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var pkgs []string
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			pkgs = append(pkgs, line)
		}
	}
	return pkgs
}
