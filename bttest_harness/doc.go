// Package bttestharness runs Cloud Bigtable's in-process emulator (bttest)
// with everything bttl's tests and examples need: a table whose families
// carry exactly the GC rules a schema requires, a ttlclient.Table on it
// driven by a manual clock, and a raw client to see what is physically
// stored, expired-but-not-collected cells included.
//
// When BIGTABLE_EMULATOR_HOST is set, the harness talks to that emulator
// instead of starting one.
package bttestharness
