package ttlclient

import (
	"reflect"
	"unsafe"

	"cloud.google.com/go/bigtable"
)

// bigtable.RowFilter returns an opaque ReadOption, and the last RowFilter
// given is the one a read uses. To put the TTL filter first while callers
// keep passing bigtable.RowFilter, the table has to see the caller's filter:
// it reads it out of the option's one field. The layout is checked once at
// start-up against the client version in use; if it ever changes, reads
// that carry a RowFilter fail with ErrUnsupportedReadOption instead of
// dropping either filter. CheckCompatibility reports it (check
// "row-filter"), and NewClient and Wrap log it.
var (
	rowFilterType  = reflect.TypeOf(bigtable.RowFilter(bigtable.PassAllFilter()))
	filterType     = reflect.TypeOf((*bigtable.Filter)(nil)).Elem()
	rowFilterKnown = rowFilterType.Kind() == reflect.Struct &&
		rowFilterType.NumField() == 1 &&
		rowFilterType.Field(0).Type == filterType &&
		rowFilterType.Size() == filterType.Size() &&
		rowFilterSelfCheck()
)

// isRowFilter reports whether opt is a bigtable.RowFilter option.
func isRowFilter(opt bigtable.ReadOption) bool {
	return opt != nil && reflect.TypeOf(opt) == rowFilterType
}

// rowFilterOf returns the filter inside a bigtable.RowFilter option. It is
// on every read's path, so it reads the boxed struct in place rather than
// copying it through reflect (which allocated once per read).
func rowFilterOf(opt bigtable.ReadOption) (bigtable.Filter, bool) {
	if !rowFilterKnown {
		return nil, false
	}
	return unboxRowFilter(opt), true
}

// unboxRowFilter reads the Filter field of the rowFilter struct opt holds.
// A struct of two words is stored behind the interface's data pointer, and
// its only field is at offset 0.
func unboxRowFilter(opt bigtable.ReadOption) bigtable.Filter {
	type iface struct {
		tab  unsafe.Pointer
		data unsafe.Pointer
	}
	return *(*bigtable.Filter)((*iface)(unsafe.Pointer(&opt)).data)
}

// rowFilterSelfCheck proves the in-place read on this client version: it
// must give back the filter an option was made with.
func rowFilterSelfCheck() bool {
	want := bigtable.LatestNFilter(7)
	got := unboxRowFilter(bigtable.RowFilter(want))
	return got != nil && reflect.TypeOf(got) == reflect.TypeOf(want) && got.String() == want.String()
}
