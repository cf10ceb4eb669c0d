// Package testenv is the one place bttl's tests learn that an external
// tool they need (cbtemulator, cbt, Prometheus) is missing. Missing skips
// the test outside CI, naming the tool and the command that installs it,
// and fails it in CI (CI=true), where .ci/run installs every tool; the
// package zz_toolcheck, last in go test ./...'s order, ends a local run
// with the list of missing tools (CONTRIBUTING.md#test-tiers).
//
// It imports only the standard library, so every package's tests (and
// bttest_harness) can use it.
package testenv

import (
	"os"
	"strings"
	"testing"
)

// Tool is an external program some tests need.
type Tool struct {
	Name    string // the program, as the messages name it
	Package string // the Debian package that installs it
	Covers  string // what skips without it
}

var (
	// CBTEmulator is Google's Bigtable emulator, the second real server
	// (bttestharness.FindEmulator finds it).
	CBTEmulator = Tool{Name: "cbtemulator", Package: "google-cloud-cli-bigtable-emulator",
		Covers: "every test and benchmark on the second server (cbtemulator)"}
	// CBT is Google's cbt CLI, a real raw writer and reader.
	CBT = Tool{Name: "cbt", Package: "google-cloud-cli-cbt",
		Covers: "the tests that write and read with the real cbt"}
	// Prometheus runs the dashboard's queries on a real server.
	Prometheus = Tool{Name: "prometheus", Package: "prometheus",
		Covers: "the dashboard's and alerts' queries on a real Prometheus"}
	// Promtool checks the alerting rules.
	Promtool = Tool{Name: "promtool", Package: "prometheus",
		Covers: "the alerting rules' unit tests (promtool test rules)"}
	// GNUTime measures a built binary's peak memory.
	GNUTime = Tool{Name: "/usr/bin/time", Package: "time",
		Covers: "TestAuditMemory (only with BTTL_AUDIT_CELLS set)"}
)

// Tools is every tool the default test run needs (GNUTime serves an
// opt-in test only).
var Tools = []Tool{CBTEmulator, CBT, Prometheus, Promtool}

// InCI reports whether the tests run in CI (CI=true), where a missing
// tool is a failure.
func InCI() bool { return os.Getenv("CI") == "true" }

// Install is the command that installs tools' packages.
func Install(tools ...Tool) string {
	var pkgs []string
	seen := map[string]bool{}
	for _, t := range tools {
		if !seen[t.Package] {
			seen[t.Package] = true
			pkgs = append(pkgs, t.Package)
		}
	}
	return "sudo apt-get install " + strings.Join(pkgs, " ")
}

// Missing ends the test because tool was not found (err says where it was
// looked for): in CI it fails, elsewhere it skips. Both messages name the
// tool and the command that installs it.
func Missing(tb testing.TB, tool Tool, err error) {
	tb.Helper()
	if InCI() {
		tb.Fatalf("%s not found, and CI=true requires it: %v (install: %s)", tool.Name, err, Install(tool))
	}
	tb.Skipf("skipping: %s not found: %v (install: %s; CI=true fails instead)", tool.Name, err, Install(tool))
}
