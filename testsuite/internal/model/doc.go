// Package model is the reference model of bttl's core property
// (docs/design.md#live-rule): given every write, delete and GC rule, and a read time t, the
// exact cells a complete GC at t keeps, in Bigtable's order (row, family,
// column, timestamp descending), with a caller's filter applied after that
// view.
//
// It is written from the design's formulas, in plain Go, and shares no code
// with packages strategy, filters or ttlclient: it only reads a schema's
// parameters (kind, D, N, single value, write time, idle TTL, max TTL and
// clamping), and names the option columns of the composition matrix
// (OptionColumns), so that a new option's effect and its column are added
// together. It also says which writes must be refused, and with which
// class of error (Class), for the path a Semantics describes: ttlclient,
// or a plain client through the wire guard. The conformance suite compares
// the library's reads and refusals with it.
package model
