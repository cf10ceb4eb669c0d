// Package companion tells write-time companions (strategy.WithWriteTime)
// from data in the stored cells of a family: the one definition of a
// companion. filters.Explain (bttl lookup) shows it per cell, audit
// reports companions apart from data, and provision's adoption scan counts
// reserved qualifiers that are not companions as data the option hides
// (docs/design.md#write-time). A companion is paired: written with its
// cell, at its timestamp, as bttl writes it; an orphaned one (its cell
// deleted or moved without it, or written by hand) records nothing and is
// an ordinary hidden reserved cell.
package companion

import (
	"strings"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// Kind is what a stored cell of a write-time family is.
type Kind uint8

const (
	// Data: a qualifier below strategy.ReservedQualifierStart, which reads
	// through bttl return.
	Data Kind = iota
	// Companion: the companion of a data cell of the same row: qualifier
	// strategy.WriteTimeColumn(c) for a column c that is not reserved,
	// with a cell of c at the same timestamp. Its value is not checked.
	Companion
	// Hidden: any other qualifier from strategy.ReservedQualifierStart on
	// (a column written before the family had write times, an orphaned
	// companion, or a forged one with no cell of its column at its
	// timestamp): stored, and hidden from every read through bttl by the
	// write-time read filter. A forged companion beside a cell of its
	// column at the same timestamp is classified Companion: the pairing,
	// not the value, is the definition, and the wire guard refuses such a
	// forgery at write time (rule reserved-column).
	Hidden
)

// Classify returns the kind of each of items, the cells of a family with
// write times in one row as ReadRows returns them (Column
// "family:qualifier"), or nil when every one is Data (the common case,
// without allocating). In a family without write times every qualifier is
// data: callers do not classify its cells.
func Classify(family string, items []bigtable.ReadItem) []Kind {
	prefix := len(family) + 1
	reserved := func(it bigtable.ReadItem) bool {
		return strings.HasPrefix(it.Column[min(prefix, len(it.Column)):], strategy.ReservedQualifierStart)
	}
	found := false
	for _, it := range items {
		if found = reserved(it); found {
			break
		}
	}
	if !found {
		return nil
	}
	type cell struct {
		column string
		ts     bigtable.Timestamp
	}
	data := map[cell]bool{}
	kinds := make([]Kind, len(items))
	for i, it := range items {
		if reserved(it) {
			kinds[i] = Hidden
			continue
		}
		data[cell{it.Column[prefix:], it.Timestamp}] = true
	}
	for i, it := range items {
		if kinds[i] != Hidden {
			continue
		}
		if c, ok := strings.CutPrefix(it.Column[prefix:], strategy.WriteTimePrefix); ok && data[cell{c, it.Timestamp}] {
			kinds[i] = Companion // c is not reserved: data holds only unreserved columns
		}
	}
	return kinds
}
