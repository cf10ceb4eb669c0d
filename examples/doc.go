// Package examples holds no code: each directory below it is a program a
// new user runs with `go run ./examples/<name>`, on the embedded Bigtable
// emulator (or BIGTABLE_EMULATOR_HOST when set). The test in this directory
// builds and runs every one of them and checks that its output shows what
// the program is for, once on each program's own in-process emulator and
// once with all of them sharing one cbtemulator: give a new example a table
// name no other example uses.
//
//   - quickstart: the three strategies side by side.
//   - clickevents: ten customers' click events, three retentions, one table.
//   - onesecond: per-cell expiry and the guardrails of a one-second family.
//   - sequence: the last N revisions of a document, sequence numbers
//     allocated safely by concurrent writers.
//   - migrate: adopting default expiry on a table already holding data.
//   - sessions: web sessions with time-to-idle, a logout and "remember me"
//     (Expire).
package examples
