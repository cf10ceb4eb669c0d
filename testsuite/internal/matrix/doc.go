// Package matrix is bttl's randomized conformance suite: it drives a
// client path (a Target) with random writes (TTLs, sequence numbers,
// explicit timestamps, single-value writes, every kind of delete, bulk and
// conditional mutations), lifecycle operations where the path has them,
// caller filters and clock moves, on a real server whose own GC runs
// whenever it runs, and after every step compares ReadRow and ReadRows, and
// every refusal's class, with the reference model (package testsuite/internal/model).
//
// The composition matrix (matrix.go, TestMatrix) runs the same history
// through every client path (Paths) with every family option
// (FamilyOptions: the model's OptionColumns, none and mixed) on both servers; docs/design.md#composition says which
// combinations are supported and which are refused.
//
// A failure names the seed, the step and a diff. BTTL_SEED replays a run's
// operations; BTTL_OPS sets its length; BTTL_MATRIX selects matrix cells
// (server/path/option, a path.Match pattern) and BTTL_MATRIX_STEPS splits a
// total over them. The long run over the whole matrix
// (docs/correctness.md#matrix):
//
//	BTTL_MATRIX='*' BTTL_MATRIX_STEPS=1000000 go test -run '^TestMatrix$' -v -timeout 0 ./testsuite/internal/matrix
package matrix
