package filters_test

import (
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// readAt is a fixed read time so the outputs below are stable.
var readAt = bigtable.Time(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))

func ExampleNew() {
	b, err := filters.New(strategy.Schema{
		"clicks": strategy.DefaultExpiry(48 * time.Hour),
		"doc":    strategy.Sequence(3),
		"meta":   strategy.Unmanaged(),
	})
	if err != nil {
		panic(err)
	}
	// One branch per managed family (a column range with no bounds selects
	// the family by name), one for every other family.
	fmt.Println(b.TTL(readAt))
	// Output: ((columnRangeFilter(clicks,,) | timestamp_range(1893326400001000,0)) + (columnRangeFilter(doc,,) | col(*,3)) + col(^(?s:(?:[^cd].*|c(?:(?:[^l].*|l(?:(?:[^i].*|i(?:(?:[^c].*|c(?:(?:[^k].*|k(?:(?:[^s].*|s(?:.+))?))?))?))?))?)|d(?:(?:[^o].*|o(?:(?:[^c].*|c(?:.+))?))?))?)$:))
}

func ExampleBuilder_Managed() {
	plain, _ := filters.New(strategy.Schema{"meta": strategy.Unmanaged()})
	ttl, _ := filters.New(strategy.Schema{"s": strategy.OneSecond()})
	fmt.Println(plain.Managed(), ttl.Managed())
	// Output: false true
}

func ExampleBuilder_TTL() {
	b, _ := filters.New(strategy.Schema{"s": strategy.OneSecond(), "meta": strategy.Unmanaged()})
	// Live cells of a one-second family have timestamps after the read time.
	// Every managed family expires by age, so the filter is split at that
	// bound: every cell after it, and before it only the other families'.
	fmt.Println(b.TTL(readAt))
	// Output: (timestamp_range(1893499200001000,0) + (timestamp_range(0,1893499200001000) | col(^(?s:(?:[^s].*|s(?:.+))?)$:)))
}

func ExampleBuilder_Compose() {
	b, _ := filters.New(strategy.Schema{"doc": strategy.Sequence(2), "meta": strategy.Unmanaged()})
	// The TTL filter first, the caller's after it: the caller's value filter
	// cannot match a version beyond the 2 kept.
	fmt.Println(b.Compose(readAt, bigtable.ValueFilter("draft")))
	// Output: (((columnRangeFilter(doc,,) | col(*,2)) + col(^(?s:(?:[^d].*|d(?:(?:[^o].*|o(?:(?:[^c].*|c(?:.+))?))?))?)$:)) | value_match(draft))
}

func ExampleBuilder_Expired() {
	b, _ := filters.New(strategy.Schema{"clicks": strategy.DefaultExpiry(time.Hour)})
	// Only the cells expired at readAt, values stripped: what GC still owes.
	fmt.Println(b.Expired(readAt))
	// Output: ((columnRangeFilter(clicks,,) | timestamp_range(0,1893495600001000)) | strip_value())
}

func ExampleFamilyRegex() {
	fmt.Println(filters.FamilyRegex("events.v2"))
	// Output: ^events\.v2$
}

func ExampleComplementRegex() {
	// Matches every family name except "a" and "ab".
	fmt.Println(filters.ComplementRegex([]string{"a", "ab"}))
	// Output: ^(?s:(?:[^a].*|a(?:[^b].*|b(?:.+)))?)$
}

func ExampleBuilder_TTLProto() {
	b, _ := filters.New(strategy.Schema{"s": strategy.OneSecond(), "doc": strategy.Sequence(3)})
	// The same filter as TTL(readAt), as the proto a ReadRowsRequest
	// carries: for code that edits requests itself, like the wire guard.
	p := b.TTLProto(readAt)
	for _, branch := range p.GetInterleave().GetFilters() {
		if chain := branch.GetChain(); chain != nil {
			// (Printing protos directly is deliberately unstable.)
			// A family is selected by a column range over all its columns
			// (exact, and no regex for the server to run per cell).
			fam := chain.GetFilters()[0].GetColumnRangeFilter().GetFamilyName()
			limit := chain.GetFilters()[1]
			if rng := limit.GetTimestampRangeFilter(); rng != nil {
				fmt.Println(fam, "timestamps from", rng.GetStartTimestampMicros())
			} else {
				fmt.Println(fam, "cells per column", limit.GetCellsPerColumnLimitFilter())
			}
		} else {
			fmt.Println("unmanaged families:", branch.GetFamilyNameRegexFilter() != "")
		}
	}
	// Output:
	// doc cells per column 3
	// s timestamps from 1893499200001000
	// unmanaged families: true
}

func ExampleChainProto() {
	user := &btpb.RowFilter{Filter: &btpb.RowFilter_ValueRegexFilter{ValueRegexFilter: []byte("x")}}
	// Servers refuse a chain of one filter: with no TTL filter, the
	// caller's goes alone.
	fmt.Println(filters.ChainProto(nil, user) == user)
	b, _ := filters.New(strategy.Schema{"doc": strategy.Sequence(3)})
	fmt.Println(len(filters.ChainProto(b.TTLProto(readAt), user).GetChain().GetFilters()))
	// Output:
	// true
	// 2
}

func ExampleWithFamilies() {
	schema := strategy.Schema{
		"clicks": strategy.DefaultExpiry(48 * time.Hour),
		"views":  strategy.DefaultExpiry(48 * time.Hour),
		"doc":    strategy.Sequence(3),
	}
	// The table's families, as read when it was opened: every family is
	// selected by name (no regex), clicks and views share one branch, and
	// meta passes untouched.
	b, _ := filters.New(schema, filters.WithFamilies([]string{"clicks", "views", "doc", "meta"}))
	fmt.Println(b.TTL(readAt))
	// One rule for every family: the filter is that rule alone.
	one, _ := filters.New(strategy.Schema{"s": strategy.OneSecond()}, filters.WithFamilies([]string{"s"}))
	fmt.Println(one.TTL(readAt))
	// Output:
	// (((columnRangeFilter(clicks,,) + columnRangeFilter(views,,)) | timestamp_range(1893326400001000,0)) + (columnRangeFilter(doc,,) | col(*,3)) + columnRangeFilter(meta,,))
	// timestamp_range(1893499200001000,0)
}

func ExampleBuilder_Size() {
	b, _ := filters.New(strategy.Schema{"s": strategy.OneSecond()}, filters.WithFamilies([]string{"s", "meta"}))
	// Bytes of the serialized filter a read sends.
	fmt.Println(b.Size(readAt), "of at most", filters.MaxFilterBytes)
	// Output: 36 of at most 20480
}

func ExampleBuilder_CheckSize() {
	// Without the table's families, the families outside the schema are
	// matched by a regex that grows with the managed names.
	schema := strategy.Schema{}
	for i := 0; i < 100; i++ {
		schema[fmt.Sprintf("%c%c_events_%09d", 'a'+i%26, 'a'+i/26, i*7919)] = strategy.OneSecond()
	}
	b, _ := filters.New(schema)
	err := b.CheckSize()
	fmt.Println(errors.Is(err, filters.ErrFilterTooLarge))
	var se *filters.SizeError
	if errors.As(err, &se) {
		fmt.Println(se.Bytes > se.Limit, se.FamiliesKnown)
	}
	// Output:
	// true
	// true false
}
