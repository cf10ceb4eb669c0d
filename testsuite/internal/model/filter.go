package model

import (
	"fmt"
	"strings"

	"cloud.google.com/go/bigtable"
)

// Filter is a caller's read filter with its meaning in the model: Apply
// maps one row's cells (in Bigtable order) to what the filter keeps, and
// Bigtable is the same filter for the real client.
type Filter interface {
	Apply(cs []Cell) []Cell
	Bigtable() bigtable.Filter
	String() string
}

// LatestN keeps the n newest cells of each column (CellsPerColumnLimit).
func LatestN(n int) Filter { return latestN(n) }

type latestN int

func (f latestN) Apply(cs []Cell) []Cell {
	var out []Cell
	count := 0
	for i, c := range cs {
		if i == 0 || c.Family != cs[i-1].Family || c.Column != cs[i-1].Column {
			count = 0
		}
		if count < int(f) {
			out = append(out, c)
		}
		count++
	}
	return out
}
func (f latestN) Bigtable() bigtable.Filter { return bigtable.LatestNFilter(int(f)) }
func (f latestN) String() string            { return fmt.Sprintf("LatestN(%d)", int(f)) }

// ColumnRange keeps the columns of family in [start, end); end "" is no
// bound.
func ColumnRange(family, start, end string) Filter { return columnRange{family, start, end} }

type columnRange struct{ family, start, end string }

func (f columnRange) Apply(cs []Cell) []Cell {
	return keepIf(cs, func(c Cell) bool {
		return c.Family == f.family && c.Column >= f.start && (f.end == "" || c.Column < f.end)
	})
}
func (f columnRange) Bigtable() bigtable.Filter {
	return bigtable.ColumnRangeFilter(f.family, f.start, f.end)
}
func (f columnRange) String() string {
	return fmt.Sprintf("ColumnRange(%s,%q,%q)", f.family, f.start, f.end)
}

// TimestampRange keeps stored timestamps in [start, end), end 0 no bound.
// Bounds are whole milliseconds, as the client sends them.
func TimestampRange(start, end int64) Filter { return tsRange{ms(start), ms(end)} }

type tsRange struct{ start, end int64 }

func (f tsRange) Apply(cs []Cell) []Cell {
	return keepIf(cs, func(c Cell) bool { return c.TS >= f.start && (f.end == 0 || c.TS < f.end) })
}
func (f tsRange) Bigtable() bigtable.Filter {
	return bigtable.TimestampRangeFilterMicros(bigtable.Timestamp(f.start), bigtable.Timestamp(f.end))
}
func (f tsRange) String() string { return fmt.Sprintf("TimestampRange(%d,%d)", f.start, f.end) }

// ValueRange keeps values in [start, end); end "" is no bound.
func ValueRange(start, end string) Filter { return valueRange{start, end} }

type valueRange struct{ start, end string }

func (f valueRange) Apply(cs []Cell) []Cell {
	return keepIf(cs, func(c Cell) bool { return c.Value >= f.start && (f.end == "" || c.Value < f.end) })
}
func (f valueRange) Bigtable() bigtable.Filter {
	var end []byte
	if f.end != "" {
		end = []byte(f.end)
	}
	return bigtable.ValueRangeFilter([]byte(f.start), end)
}
func (f valueRange) String() string { return fmt.Sprintf("ValueRange(%q,%q)", f.start, f.end) }

// StripValue empties every value.
func StripValue() Filter { return stripValue{} }

type stripValue struct{}

func (stripValue) Apply(cs []Cell) []Cell {
	out := make([]Cell, len(cs))
	for i, c := range cs {
		c.Value = ""
		out[i] = c
	}
	return out
}
func (stripValue) Bigtable() bigtable.Filter { return bigtable.StripValueFilter() }
func (stripValue) String() string            { return "StripValue" }

// Chain applies fs in order. It needs at least two filters: servers refuse
// a chain of one.
func Chain(fs ...Filter) Filter {
	if len(fs) < 2 {
		panic("model.Chain needs at least two filters")
	}
	return chain(fs)
}

type chain []Filter

func (f chain) Apply(cs []Cell) []Cell {
	for _, sub := range f {
		if len(cs) == 0 {
			return nil
		}
		cs = sub.Apply(cs)
	}
	return cs
}
func (f chain) Bigtable() bigtable.Filter {
	subs := make([]bigtable.Filter, len(f))
	for i, sub := range f {
		subs[i] = sub.Bigtable()
	}
	return bigtable.ChainFilters(subs...)
}
func (f chain) String() string {
	parts := make([]string, len(f))
	for i, sub := range f {
		parts[i] = sub.String()
	}
	return "Chain(" + strings.Join(parts, ", ") + ")"
}

func keepIf(cs []Cell, keep func(Cell) bool) []Cell {
	var out []Cell
	for _, c := range cs {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}
