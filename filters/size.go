package filters

import (
	"errors"
	"fmt"

	"cloud.google.com/go/bigtable"
	"google.golang.org/protobuf/proto"
)

// MaxFilterBytes is the largest row filter Bigtable serves, in bytes of its
// serialized proto: a larger one fails with INVALID_ARGUMENT "Row filter
// exceeds maximum size of 20480 bytes" (Bigtable's quotas page, row
// filters; the Java client checks the same 20 KiB before sending).
const MaxFilterBytes = 20 << 10

// ErrFilterTooLarge: the TTL filter of a schema is larger than
// MaxFilterBytes, so every filtered read would be refused by the server;
// see *SizeError.
var ErrFilterTooLarge = errors.New("bttl: TTL filter larger than Bigtable serves")

// SizeError is a TTL filter over the limit: its size, the limit, and
// whether the table's families were known (WithFamilies), without which the
// families outside the schema are matched by a complement regex that grows
// with the managed names.
type SizeError struct {
	Bytes         int
	Limit         int
	FamiliesKnown bool
}

func (e *SizeError) Error() string {
	msg := fmt.Sprintf("%v: %d bytes, limit %d", ErrFilterTooLarge, e.Bytes, e.Limit)
	if !e.FamiliesKnown {
		msg += " (the families were not read from the table, so a complement regex matches the others: " +
			"verifying the table's GC rules reads them and makes the filter regex-free and smaller)"
	}
	return msg
}

func (e *SizeError) Unwrap() error { return ErrFilterTooLarge }

// Size is the size in bytes of the serialized TTL filter at read time now,
// as a read sends it (0 when the schema manages no family). A caller's
// filter adds its own size to every read it is given to.
func (b *Builder) Size(now bigtable.Timestamp) int {
	p := b.TTLProto(now)
	if p == nil {
		return 0
	}
	return proto.Size(p)
}

// CheckSize returns a *SizeError (wrapping ErrFilterTooLarge) when the TTL
// filter is larger than MaxFilterBytes. Only the age rules' time bounds
// change with the read time; the size is taken at a read time where every
// bound has its longest encoding (8 bytes, up to the year 4253), so a check
// when a table is opened holds for every read after it.
func (b *Builder) CheckSize() error {
	if n := b.Size(sizeProbe); n > MaxFilterBytes {
		return &SizeError{Bytes: n, Limit: MaxFilterBytes, FamiliesKnown: b.exact != nil}
	}
	return nil
}

// sizeProbe is a read time whose age bounds all encode in 8 bytes (the most
// a bound below 2^56 microseconds takes) for any max age under 2,200 years.
const sizeProbe = bigtable.Timestamp(1<<56 - 1<<30)
