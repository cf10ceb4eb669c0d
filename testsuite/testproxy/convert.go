package main

import (
	"strings"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	statpb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/ttlclient"
)

// mutationSink is what the suite's mutations are replayed into: a
// *bigtable.Mutation or a *ttlclient.Mutation, whose methods are the same.
type mutationSink interface {
	Set(family, column string, ts bigtable.Timestamp, value []byte)
	DeleteCellsInColumn(family, column string)
	DeleteTimestampRange(family, column string, start, end bigtable.Timestamp)
	DeleteCellsInFamily(family string)
	DeleteRow()
	AddIntToCell(family, column string, ts bigtable.Timestamp, value int64)
	MergeBytesToCell(family, column string, ts bigtable.Timestamp, value []byte)
}

// ttlSink is a *ttlclient.Mutation as a mutationSink.
type ttlSink struct{ *ttlclient.Mutation }

func (s ttlSink) Set(family, column string, ts bigtable.Timestamp, value []byte) {
	s.Mutation.Set(family, column, ts, value)
}

// replay applies the wire mutations to m, each through the client's own
// method, so the client builds the request as an application would.
func replay(m mutationSink, ms []*btpb.Mutation) error {
	for _, pb := range ms {
		switch x := pb.GetMutation().(type) {
		case *btpb.Mutation_SetCell_:
			c := x.SetCell
			m.Set(c.GetFamilyName(), string(c.GetColumnQualifier()), bigtable.Timestamp(c.GetTimestampMicros()), c.GetValue())
		case *btpb.Mutation_DeleteFromColumn_:
			d := x.DeleteFromColumn
			if r := d.GetTimeRange(); r != nil {
				m.DeleteTimestampRange(d.GetFamilyName(), string(d.GetColumnQualifier()),
					bigtable.Timestamp(r.GetStartTimestampMicros()), bigtable.Timestamp(r.GetEndTimestampMicros()))
			} else {
				m.DeleteCellsInColumn(d.GetFamilyName(), string(d.GetColumnQualifier()))
			}
		case *btpb.Mutation_DeleteFromFamily_:
			m.DeleteCellsInFamily(x.DeleteFromFamily.GetFamilyName())
		case *btpb.Mutation_DeleteFromRow_:
			m.DeleteRow()
		case *btpb.Mutation_AddToCell_:
			a := x.AddToCell
			m.AddIntToCell(a.GetFamilyName(), string(a.GetColumnQualifier().GetRawValue()),
				bigtable.Timestamp(a.GetTimestamp().GetRawTimestampMicros()), a.GetInput().GetIntValue())
		case *btpb.Mutation_MergeToCell_:
			a := x.MergeToCell
			m.MergeBytesToCell(a.GetFamilyName(), string(a.GetColumnQualifier().GetRawValue()),
				bigtable.Timestamp(a.GetTimestamp().GetRawTimestampMicros()), a.GetInput().GetRawValue())
		default:
			return status.Errorf(codes.InvalidArgument, "bttl test proxy: mutation %T not supported", x)
		}
	}
	return nil
}

// rowSet is the client's RowSet for the wire one: keys if any are given
// (the suite never mixes them with ranges), else ranges, else every row.
func rowSet(rs *btpb.RowSet) bigtable.RowSet {
	if keys := rs.GetRowKeys(); len(keys) > 0 {
		l := make(bigtable.RowList, len(keys))
		for i, k := range keys {
			l[i] = string(k)
		}
		return l
	}
	ranges := rs.GetRowRanges()
	if len(ranges) == 0 {
		return bigtable.InfiniteRange("")
	}
	l := make(bigtable.RowRangeList, 0, len(ranges))
	for _, r := range ranges {
		var start, end string
		var startOpen, endClosed, unbounded bool
		switch s := r.GetStartKey().(type) {
		case *btpb.RowRange_StartKeyClosed:
			start = string(s.StartKeyClosed)
		case *btpb.RowRange_StartKeyOpen:
			start, startOpen = string(s.StartKeyOpen), true
		}
		switch e := r.GetEndKey().(type) {
		case *btpb.RowRange_EndKeyClosed:
			end, endClosed = string(e.EndKeyClosed), true
		case *btpb.RowRange_EndKeyOpen:
			end = string(e.EndKeyOpen)
		default:
			unbounded = true
		}
		switch {
		case unbounded && startOpen:
			l = append(l, bigtable.NewOpenClosedRange(start, ""))
		case unbounded:
			l = append(l, bigtable.InfiniteRange(start))
		case startOpen && endClosed:
			l = append(l, bigtable.NewOpenClosedRange(start, end))
		case startOpen:
			l = append(l, bigtable.NewOpenRange(start, end))
		case endClosed:
			l = append(l, bigtable.NewClosedRange(start, end))
		default:
			l = append(l, bigtable.NewRange(start, end))
		}
	}
	return l
}

// filter is the client's Filter for the wire one (nil for none).
func filter(f *btpb.RowFilter) (bigtable.Filter, error) {
	if f == nil {
		return nil, nil
	}
	list := func(pbs []*btpb.RowFilter) ([]bigtable.Filter, error) {
		out := make([]bigtable.Filter, 0, len(pbs))
		for _, pb := range pbs {
			g, err := filter(pb)
			if err != nil {
				return nil, err
			}
			out = append(out, g)
		}
		return out, nil
	}
	switch x := f.GetFilter().(type) {
	case *btpb.RowFilter_Chain_:
		fs, err := list(x.Chain.GetFilters())
		return bigtable.ChainFilters(fs...), err
	case *btpb.RowFilter_Interleave_:
		fs, err := list(x.Interleave.GetFilters())
		return bigtable.InterleaveFilters(fs...), err
	case *btpb.RowFilter_Condition_:
		c := x.Condition
		fs, err := list([]*btpb.RowFilter{c.GetPredicateFilter(), c.GetTrueFilter(), c.GetFalseFilter()})
		if err != nil {
			return nil, err
		}
		return bigtable.ConditionFilter(fs[0], fs[1], fs[2]), nil
	case *btpb.RowFilter_PassAllFilter:
		return bigtable.PassAllFilter(), nil
	case *btpb.RowFilter_BlockAllFilter:
		return bigtable.BlockAllFilter(), nil
	case *btpb.RowFilter_RowKeyRegexFilter:
		return bigtable.RowKeyFilter(string(x.RowKeyRegexFilter)), nil
	case *btpb.RowFilter_RowSampleFilter:
		return bigtable.RowSampleFilter(x.RowSampleFilter), nil
	case *btpb.RowFilter_FamilyNameRegexFilter:
		return bigtable.FamilyFilter(x.FamilyNameRegexFilter), nil
	case *btpb.RowFilter_ColumnQualifierRegexFilter:
		return bigtable.ColumnFilter(string(x.ColumnQualifierRegexFilter)), nil
	case *btpb.RowFilter_ColumnRangeFilter:
		r := x.ColumnRangeFilter
		var start, end string
		switch s := r.GetStartQualifier().(type) {
		case *btpb.ColumnRange_StartQualifierClosed:
			start = string(s.StartQualifierClosed)
		case *btpb.ColumnRange_StartQualifierOpen:
			start = string(s.StartQualifierOpen)
		}
		switch e := r.GetEndQualifier().(type) {
		case *btpb.ColumnRange_EndQualifierClosed:
			end = string(e.EndQualifierClosed)
		case *btpb.ColumnRange_EndQualifierOpen:
			end = string(e.EndQualifierOpen)
		}
		return bigtable.ColumnRangeFilter(r.GetFamilyName(), start, end), nil
	case *btpb.RowFilter_TimestampRangeFilter:
		r := x.TimestampRangeFilter
		return bigtable.TimestampRangeFilterMicros(bigtable.Timestamp(r.GetStartTimestampMicros()), bigtable.Timestamp(r.GetEndTimestampMicros())), nil
	case *btpb.RowFilter_ValueRegexFilter:
		return bigtable.ValueFilter(string(x.ValueRegexFilter)), nil
	case *btpb.RowFilter_ValueRangeFilter:
		r := x.ValueRangeFilter
		var start, end []byte
		switch s := r.GetStartValue().(type) {
		case *btpb.ValueRange_StartValueClosed:
			start = s.StartValueClosed
		case *btpb.ValueRange_StartValueOpen:
			start = s.StartValueOpen
		}
		switch e := r.GetEndValue().(type) {
		case *btpb.ValueRange_EndValueClosed:
			end = e.EndValueClosed
		case *btpb.ValueRange_EndValueOpen:
			end = e.EndValueOpen
		}
		return bigtable.ValueRangeFilter(start, end), nil
	case *btpb.RowFilter_CellsPerRowOffsetFilter:
		return bigtable.CellsPerRowOffsetFilter(int(x.CellsPerRowOffsetFilter)), nil
	case *btpb.RowFilter_CellsPerRowLimitFilter:
		return bigtable.CellsPerRowLimitFilter(int(x.CellsPerRowLimitFilter)), nil
	case *btpb.RowFilter_CellsPerColumnLimitFilter:
		return bigtable.LatestNFilter(int(x.CellsPerColumnLimitFilter)), nil
	case *btpb.RowFilter_StripValueTransformer:
		return bigtable.StripValueFilter(), nil
	case *btpb.RowFilter_ApplyLabelTransformer:
		return bigtable.LabelFilter(x.ApplyLabelTransformer), nil
	}
	return nil, status.Errorf(codes.InvalidArgument, "bttl test proxy: filter %T not supported", f.GetFilter())
}

// rowProto is the wire Row for the client's: families in the order the
// client gives them, consecutive cells of one column under one Column.
func rowProto(r bigtable.Row) *btpb.Row {
	if r == nil {
		return nil
	}
	out := &btpb.Row{Key: []byte(r.Key())}
	for fam, items := range r {
		pf := &btpb.Family{Name: fam}
		var col *btpb.Column
		for _, it := range items {
			q := strings.TrimPrefix(it.Column, fam+":")
			if col == nil || string(col.Qualifier) != q {
				col = &btpb.Column{Qualifier: []byte(q)}
				pf.Columns = append(pf.Columns, col)
			}
			col.Cells = append(col.Cells, &btpb.Cell{TimestampMicros: int64(it.Timestamp), Value: it.Value, Labels: it.Labels})
		}
		out.Families = append(out.Families, pf)
	}
	return out
}

// statusOf is err as the suite reads it: its gRPC status, which a bttl
// refusal carries too (InvalidArgument or FailedPrecondition).
func statusOf(err error) *statpb.Status {
	if err == nil {
		return &statpb.Status{Code: int32(codes.OK)}
	}
	st, _ := status.FromError(err) // Unknown, with err's text, for an error without a status
	return &statpb.Status{Code: int32(st.Code()), Message: st.Message()}
}

// tableID is the last segment of projects/p/instances/i/tables/t.
func tableID(name string) (string, error) {
	parts := strings.Split(name, "/")
	if len(parts) != 6 || parts[4] != "tables" || parts[5] == "" {
		return "", status.Errorf(codes.InvalidArgument, "bttl test proxy: table name %q is not projects/*/instances/*/tables/*", name)
	}
	return parts[5], nil
}
