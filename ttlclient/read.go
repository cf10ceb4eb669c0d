package ttlclient

import (
	"context"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// The read path after table.go's entry points (ReadRow, ReadRows): the
// options a read sends (the TTL filter before the caller's); observe.go
// has the shadow read it may leave behind, internal/lifecycle's idle.go the
// time-to-idle look at the rows returned (docs/design.md#code-paths).

// readCall is the mark of a read and the options to send: on a
// connection carrying bttl's interceptor the interceptor puts the TTL
// filter before the request's filter (the caller's RowFilter, whichever
// option gave it), so opts go as they are; without it, a read with no
// option gets the TTL filter as its RowFilter, and a read with options,
// one of which may be a RowFilter bttl cannot see, is refused
// (ErrNotDialed) rather than sent without the TTL filter or without the
// caller's filter.
func (t *Table) readCall(ctx context.Context, opts []bigtable.ReadOption) (*wireCall, []bigtable.ReadOption, error) {
	call := t.newCall(false, true)
	if !t.filters.Managed() {
		return call, opts, nil
	}
	if len(opts) == 0 {
		if t.wireState.Peek() {
			return call, opts, nil
		}
		if t.checkWire(ctx, "") != nil {
			return call, []bigtable.ReadOption{t.ttlOption(t.now())}, nil
		}
		return call, opts, nil
	}
	if err := t.checkWire(ctx, "a read with options"); err != nil {
		return nil, nil, err
	}
	return call, opts, nil
}

// cachedOption is the TTL filter of one millisecond as a read option.
type cachedOption struct {
	milli int64
	opt   bigtable.ReadOption
}

// ttlOption is bigtable.RowFilter(TTL filter at now), made once per
// millisecond like the filter it holds.
func (t *Table) ttlOption(now bigtable.Timestamp) bigtable.ReadOption {
	milli := int64(strategy.Millis(now)) / 1000
	if c := t.ttlOpt.Load(); c != nil && (c.milli == milli || !t.hasAge) {
		return c.opt
	}
	o := bigtable.RowFilter(t.filters.TTL(now))
	t.ttlOpt.Store(&cachedOption{milli: milli, opt: o})
	return o
}
