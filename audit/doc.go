// Package audit scans a table and reports, per column family, what a
// schema's strategies make of the cells actually stored: live cells,
// expired cells GC has not collected yet (count, bytes, oldest expiry),
// cells at or before now in a one-second family (real or server
// timestamps: a one-second adoption would delete them), sequence cells
// beyond the N versions kept, cells of a sequence family whose timestamps
// are not sequence numbers (real times there hide every later write),
// cells of an age family whose timestamps are sequence numbers (the age
// rule deletes them), and rows over 100 MB. In a family with write times,
// companions are counted apart from the data, and so are cells under the
// reserved qualifiers that are not companions (hidden from reads). A
// timestamp before
// strategy.RealTimeFloor (2000-01-01) is read as a sequence number, one at
// or after it as a real time.
//
// Memory stays bounded whatever the table size: rows are streamed and only
// per-family counters are kept (plus the row being read, which the client
// holds whole).
package audit
