// Package toolcheck ends a local go test ./... with what it could not
// run. Its directory sorts last among the module's import paths, and go
// test prints packages in that order, so its line is the last one.
//
// Tests needing an external tool (cbtemulator, cbt, Prometheus) skip when
// it is missing (internal/testenv.Missing), and go test hides a passing
// package's output and caches its result: a skip is invisible in a plain
// run. The only line a plain go test ./... always shows is a failure, so
// TestEveryToolInstalled fails when a tool is missing, naming each tool,
// what skipped for want of it (by package) and the command that installs
// it. BTTL_ALLOW_MISSING_TOOLS=1 accepts the smaller run (the test then
// skips, with the same message, visible with -v). In CI (CI=true) a
// missing tool fails every test that needs it, and this one.
//
// It holds no code: only this test. See CONTRIBUTING.md#test-tiers.
package toolcheck
