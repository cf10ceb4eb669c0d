package main

import (
	"context"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/ttlclient"
)

// dataTable is a variant's table: the reads of bigtable.TableAPI, and the
// writes taking the suite's wire mutations, which each variant builds with
// its own client's mutation type.
type dataTable interface {
	ReadRow(ctx context.Context, row string, opts ...bigtable.ReadOption) (bigtable.Row, error)
	ReadRows(ctx context.Context, arg bigtable.RowSet, f func(bigtable.Row) bool, opts ...bigtable.ReadOption) error
	SampleRowKeys(ctx context.Context) ([]string, error)
	apply(ctx context.Context, row string, ms []*btpb.Mutation) error
	applyBulk(ctx context.Context, rows []string, ms [][]*btpb.Mutation) ([]error, error)
	applyCond(ctx context.Context, row string, pred bigtable.Filter, mtrue, mfalse []*btpb.Mutation) (matched bool, err error)
	readModifyWrite(ctx context.Context, row string, rules []*btpb.ReadModifyWriteRule) (bigtable.Row, error)
}

// apiTable is a bigtable.TableAPI: the raw client's table (raw,
// wireguard) or ttlclient.Table.API() (api).
type apiTable struct{ bigtable.TableAPI }

func rawMutation(ms []*btpb.Mutation) (*bigtable.Mutation, error) {
	m := bigtable.NewMutation()
	return m, replay(m, ms)
}

func (t apiTable) apply(ctx context.Context, row string, ms []*btpb.Mutation) error {
	m, err := rawMutation(ms)
	if err != nil {
		return err
	}
	return t.Apply(ctx, row, m)
}

func (t apiTable) applyBulk(ctx context.Context, rows []string, ms [][]*btpb.Mutation) ([]error, error) {
	muts, err := each(ms, rawMutation)
	if err != nil {
		return nil, err
	}
	return t.ApplyBulk(ctx, rows, muts)
}

func (t apiTable) applyCond(ctx context.Context, row string, pred bigtable.Filter, mtrue, mfalse []*btpb.Mutation) (bool, error) {
	mt, mf, err := branches(mtrue, mfalse, rawMutation)
	if err != nil {
		return false, err
	}
	var matched bool
	err = t.Apply(ctx, row, bigtable.NewCondMutation(pred, mt, mf), bigtable.GetCondMutationResult(&matched))
	return matched, err
}

func (t apiTable) readModifyWrite(ctx context.Context, row string, rules []*btpb.ReadModifyWriteRule) (bigtable.Row, error) {
	m := bigtable.NewReadModifyWrite()
	replayRMW(m, rules)
	return t.ApplyReadModifyWrite(ctx, row, m)
}

// ttlTable is a *ttlclient.Table, written to with ttlclient's own
// mutation types (ttlclient, guarded-ttlclient).
type ttlTable struct{ *ttlclient.Table }

func ttlMutation(ms []*btpb.Mutation) (*ttlclient.Mutation, error) {
	m := ttlclient.NewMutation()
	return m, replay(ttlSink{m}, ms)
}

func (t ttlTable) apply(ctx context.Context, row string, ms []*btpb.Mutation) error {
	m, err := ttlMutation(ms)
	if err != nil {
		return err
	}
	return t.Apply(ctx, row, m)
}

func (t ttlTable) applyBulk(ctx context.Context, rows []string, ms [][]*btpb.Mutation) ([]error, error) {
	muts, err := each(ms, ttlMutation)
	if err != nil {
		return nil, err
	}
	return t.ApplyBulk(ctx, rows, muts)
}

func (t ttlTable) applyCond(ctx context.Context, row string, pred bigtable.Filter, mtrue, mfalse []*btpb.Mutation) (bool, error) {
	mt, mf, err := branches(mtrue, mfalse, ttlMutation)
	if err != nil {
		return false, err
	}
	var matched bool
	err = t.Apply(ctx, row, ttlclient.NewCondMutation(pred, mt, mf), bigtable.GetCondMutationResult(&matched))
	return matched, err
}

func (t ttlTable) readModifyWrite(ctx context.Context, row string, rules []*btpb.ReadModifyWriteRule) (bigtable.Row, error) {
	m := ttlclient.NewReadModifyWrite()
	replayRMW(m, rules)
	return t.ApplyReadModifyWrite(ctx, row, m)
}

// replayRMW applies the wire rules to m (a *bigtable.ReadModifyWrite or a
// *ttlclient.ReadModifyWrite).
func replayRMW(m interface {
	AppendValue(family, column string, v []byte)
	Increment(family, column string, delta int64)
}, rules []*btpb.ReadModifyWriteRule) {
	for _, r := range rules {
		switch x := r.GetRule().(type) {
		case *btpb.ReadModifyWriteRule_AppendValue:
			m.AppendValue(r.GetFamilyName(), string(r.GetColumnQualifier()), x.AppendValue)
		case *btpb.ReadModifyWriteRule_IncrementAmount:
			m.Increment(r.GetFamilyName(), string(r.GetColumnQualifier()), x.IncrementAmount)
		}
	}
}

// each builds every row's mutation.
func each[M any](ms [][]*btpb.Mutation, build func([]*btpb.Mutation) (*M, error)) ([]*M, error) {
	out := make([]*M, len(ms))
	for i := range ms {
		var err error
		if out[i], err = build(ms[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// branches builds a conditional mutation's two branches; a branch without
// mutations is absent (nil), as the client sends it.
func branches[M any](mtrue, mfalse []*btpb.Mutation, build func([]*btpb.Mutation) (*M, error)) (mt, mf *M, err error) {
	if len(mtrue) > 0 {
		if mt, err = build(mtrue); err != nil {
			return nil, nil, err
		}
	}
	if len(mfalse) > 0 {
		if mf, err = build(mfalse); err != nil {
			return nil, nil, err
		}
	}
	return mt, mf, nil
}
