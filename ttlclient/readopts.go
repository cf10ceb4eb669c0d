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
// dropping either filter.
var (
	rowFilterType  = reflect.TypeOf(bigtable.RowFilter(bigtable.PassAllFilter()))
	filterType     = reflect.TypeOf((*bigtable.Filter)(nil)).Elem()
	rowFilterKnown = rowFilterType.Kind() == reflect.Struct &&
		rowFilterType.NumField() == 1 &&
		rowFilterType.Field(0).Type == filterType
)

// isRowFilter reports whether opt is a bigtable.RowFilter option.
func isRowFilter(opt bigtable.ReadOption) bool {
	return opt != nil && reflect.TypeOf(opt) == rowFilterType
}

// rowFilterOf returns the filter inside a bigtable.RowFilter option.
func rowFilterOf(opt bigtable.ReadOption) (bigtable.Filter, bool) {
	if !rowFilterKnown {
		return nil, false
	}
	v := reflect.New(rowFilterType).Elem()
	v.Set(reflect.ValueOf(opt))
	field := v.Field(0)
	f := reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem().Interface()
	if f == nil {
		return nil, true
	}
	return f.(bigtable.Filter), true
}
