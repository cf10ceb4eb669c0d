// Package toolcheck ends a local go test ./... with what it could not
// run. Its directory sorts last among the module's import paths, and go
// test prints packages in that order, so its line is the last one.
//
// Tests needing an external tool (cbtemulator, cbt, Prometheus) skip when
// it is missing (internal/testenv.Missing), and go test hides a passing
// package's output and caches its result: a skip is invisible in a plain
// run. A passing package's output shows only with -v, so when a tool is
// missing TestEveryToolInstalled writes, to the terminal the run was
// started from (when there is one), each tool, what skipped for want of
// it (by package) and the command that installs it, then skips: a local
// run on a fresh machine still passes. In CI (CI=true), or with
// BTTL_REQUIRE_TOOLS=1, a missing tool fails every test that needs it,
// and this one.
//
// It holds no code: only this test. See CONTRIBUTING.md#test-tiers.
package toolcheck
