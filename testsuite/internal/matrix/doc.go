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
// A failure names the seed, the step and a diff. A seed replays the
// suite's draws, not real time (the clock is kept ahead of it, and the
// servers' GC runs on it), so a failure about cells also carries what a
// flake needs (diagnose.go): each failing cell's row history with the
// model's instant, the injected clock's and the wall clock's readings at
// every entry, the model's time-to-idle decisions with their figures, and
// what the model and the server store in the failing column; on the
// ttlclient paths the library's time-to-idle results must match the
// model's after every read. BTTL_SEED replays a run's operations; BTTL_OPS sets its length; BTTL_MATRIX selects matrix cells
// (server/path/option, a path.Match pattern) and BTTL_MATRIX_STEPS splits a
// total over them. The long run over the whole matrix
// (docs/correctness.md#matrix):
//
//	BTTL_MATRIX='*' BTTL_MATRIX_STEPS=1000000 go test -run '^TestMatrix$' -v -timeout 0 ./testsuite/internal/matrix
package matrix
