package toolcheck

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/internal/testenv"
)

// find looks for tool where the tests that need it look.
func find(tool testenv.Tool) error {
	switch tool {
	case testenv.CBTEmulator:
		_, err := bttestharness.FindEmulator()
		return err
	case testenv.CBT:
		_, err := os.Stat("/usr/bin/cbt") // the path cmd/bttl's and internal/provisionjob's tests run
		return err
	default:
		_, err := exec.LookPath(tool.Name)
		return err
	}
}

// users is, per tool, the module's packages whose tests need it: those
// naming it through testenv, and for cbtemulator those starting one
// through bttest_harness.
func users(t *testing.T) map[string][]string {
	t.Helper()
	vars := map[string]testenv.Tool{"CBTEmulator": testenv.CBTEmulator, "CBT": testenv.CBT,
		"Prometheus": testenv.Prometheus, "Promtool": testenv.Promtool, "GNUTime": testenv.GNUTime}
	ref := regexp.MustCompile(`testenv\.(CBTEmulator|CBT|Prometheus|Promtool|GNUTime)\b`)
	emu := regexp.MustCompile(`bttestharness\.(NewEmulator|NewOnEmulator|StartEmulator)\(`)
	// internal/promtest finds Prometheus for the tests that start one.
	prom := regexp.MustCompile(`promtest\.(Tool|Start)\(`)
	found := map[string]map[string]bool{}
	add := func(tool, pkg string) {
		if found[tool] == nil {
			found[tool] = map[string]bool{}
		}
		found[tool][pkg] = true
	}
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || path != root && fileExists(filepath.Join(path, "go.mod"))) {
			return filepath.SkipDir // another module (testsuite/testproxy) or data
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasPrefix(filepath.ToSlash(path), "../internal/testenv/") || strings.HasPrefix(filepath.ToSlash(path), "../zz_toolcheck/") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, root+string(filepath.Separator))))
		for _, m := range ref.FindAllStringSubmatch(string(src), -1) {
			add(vars[m[1]].Name, pkg)
		}
		if strings.HasSuffix(path, "_test.go") && emu.MatchString(string(src)) {
			add(testenv.CBTEmulator.Name, pkg)
		}
		if strings.HasSuffix(path, "_test.go") && prom.MatchString(string(src)) {
			add(testenv.Prometheus.Name, pkg)
			add(testenv.Promtool.Name, pkg)
		}
		return nil
	})
	require.NoError(t, err)
	out := map[string][]string{}
	for tool, pkgs := range found {
		for pkg := range pkgs {
			out[tool] = append(out[tool], pkg)
		}
		sort.Strings(out[tool])
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// report is the message naming the missing tools, what skipped without
// each, and the command installing them all.
func report(missing []testenv.Tool, used map[string][]string) string {
	var b strings.Builder
	b.WriteString("go test ./... skipped what needs a missing tool:")
	for _, tool := range missing {
		fmt.Fprintf(&b, "\n  %s: %s, in %s", tool.Name, tool.Covers, strings.Join(used[tool.Name], ", "))
	}
	fmt.Fprintf(&b, "\ninstall: %s\n(CI=true or BTTL_REQUIRE_TOOLS=1 fails each test instead)", testenv.Install(missing...))
	return b.String()
}

// TestEveryToolInstalled ends a local go test ./... with the tools it
// missed (see the package comment).
func TestEveryToolInstalled(t *testing.T) {
	var missing []testenv.Tool
	for _, tool := range testenv.Tools {
		if err := find(tool); err != nil {
			t.Logf("%s: %v", tool.Name, err)
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := report(missing, users(t))
	if testenv.InCI() || os.Getenv("BTTL_REQUIRE_TOOLS") == "1" {
		t.Fatal(msg)
	}
	// A local run on a fresh machine still passes (README's test command),
	// and says what it skipped where it can be seen: go test shows a
	// passing package's output only with -v, so the summary also goes to
	// the terminal the run was started from, when there is one.
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		fmt.Fprintf(tty, "\nbttl: %s\n", msg)
		_ = tty.Close()
	}
	t.Skip(msg)
}

// The report names each missing tool, where it is needed, and one install
// command for them all.
func TestReportNamesToolsPackagesAndInstall(t *testing.T) {
	got := report([]testenv.Tool{testenv.CBTEmulator, testenv.Prometheus, testenv.Promtool},
		map[string][]string{"cbtemulator": {"ttlclient", "wireguard"}, "prometheus": {"metrics"}, "promtool": {"metrics"}})
	assert.Contains(t, got, "cbtemulator: "+testenv.CBTEmulator.Covers+", in ttlclient, wireguard")
	assert.Contains(t, got, "prometheus: "+testenv.Prometheus.Covers+", in metrics")
	assert.Contains(t, got, "install: sudo apt-get install google-cloud-cli-bigtable-emulator prometheus\n")
}

// Every tool's users are found in the tree as it is: the scan is not
// vacuous.
func TestUsersFoundInTheTree(t *testing.T) {
	used := users(t)
	for _, tool := range testenv.Tools {
		assert.NotEmpty(t, used[tool.Name], tool.Name)
	}
	assert.Contains(t, used["cbtemulator"], "ttlclient")
	assert.Contains(t, used["prometheus"], "metrics")
}

// This package's line ends go test ./... only while its import path sorts
// last among the module's packages.
func TestLastInGoTestOrder(t *testing.T) {
	list := exec.Command("go", "list", "./...")
	list.Dir = ".." // the module's root
	out, err := list.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	self, err := exec.Command("go", "list", ".").Output()
	require.NoError(t, err)
	pkgs := strings.Fields(string(out))
	require.NotEmpty(t, pkgs)
	assert.Equal(t, strings.TrimSpace(string(self)), pkgs[len(pkgs)-1], "a package sorts after zz_toolcheck: rename it or this")
}
