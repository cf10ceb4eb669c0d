package strategy

import (
	"encoding/binary"
	"errors"

	"cloud.google.com/go/bigtable"
)

// WriteTimePrefix starts the qualifier of every write-time companion cell
// (WithWriteTime): the companion of column c is WriteTimeColumn(c), in the
// same family, at the same timestamp as the cell it describes, so the
// family's GC rule removes both together. It begins with 0xFF 0xFF, so it
// sorts after every qualifier not starting with those bytes and reads hide
// companions with one column range, no regex. Qualifiers from 0xFF 0xFF on
// are reserved in a family with write times (docs/design.md#write-time).
const WriteTimePrefix = "\xff\xffbttl.wt\x00"

// ReservedQualifierStart is the first qualifier reserved in a family with
// write times.
const ReservedQualifierStart = "\xff\xff"

// WriteTimeColumn is the qualifier of column's write-time companion.
func WriteTimeColumn(column string) string { return WriteTimePrefix + column }

// WriteTimeValue is a companion's value: the write time in microseconds
// since the epoch, truncated to the millisecond, 8 bytes big-endian.
func WriteTimeValue(writeTime bigtable.Timestamp) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(Millis(writeTime)))
}

// ErrWriteTimeValue: a companion's value is not the 8 bytes WriteTimeValue
// writes.
var ErrWriteTimeValue = errors.New("bttl: write-time companion value is not 8 bytes")

// ParseWriteTime reads a companion's value back.
func ParseWriteTime(v []byte) (bigtable.Timestamp, error) {
	if len(v) != 8 {
		return 0, ErrWriteTimeValue
	}
	return bigtable.Timestamp(binary.BigEndian.Uint64(v)), nil
}
