package prodserver

import (
	"context"
	"errors"
	"io"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// dataServer serves the Bigtable data API: each call is checked against
// its profile and the limits, then forwarded to the backend its profile
// routes to through that backend's generated client. Methods it does not
// implement (SQL, change streams, sessions) answer UNIMPLEMENTED, as the
// emulators do.
type dataServer struct {
	btpb.UnimplementedBigtableServer
	s *Server
}

// rowWrite is one row's mutations as the backend applied them, for the
// replicator.
type rowWrite struct {
	key  []byte
	muts []*btpb.Mutation
}

// write forwards a write to cluster b and enqueues what it applied for
// replication, both under b's write lock, so the other clusters apply
// writes in the order b did.
func (s *Server) write(b *backend, table string, do func() ([]rowWrite, error)) error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	rows, err := do()
	if len(rows) > 0 {
		s.repl.enqueue(s.cluster(b), table, rows)
	}
	return err
}

func (d *dataServer) ReadRows(req *btpb.ReadRowsRequest, stream btpb.Bigtable_ReadRowsServer) error {
	s := d.s
	p, err := s.resolve(req.GetAppProfileId(), false, false)
	if err != nil {
		return err
	}
	for _, k := range req.GetRows().GetRowKeys() {
		if err := checkRowKey(k); err != nil {
			return s.refuse(err)
		}
	}
	if err := checkFilter(req.GetFilter()); err != nil {
		return s.refuse(err)
	}
	if s.fault(Call{Method: "ReadRows", Profile: p.id, Table: req.GetTableName()}, false) == FaultThrottle {
		return s.throttle()
	}
	cs, err := s.target(p).data.ReadRows(stream.Context(), req)
	if err != nil {
		return err
	}
	// Read the backend's answer to its end before sending any of it: a
	// slow client, or one writing from its ReadRows callback, then never
	// holds the backend's read gate.
	var out []*btpb.ReadRowsResponse
	for {
		m, err := cs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	for _, m := range out {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

func (d *dataServer) SampleRowKeys(req *btpb.SampleRowKeysRequest, stream btpb.Bigtable_SampleRowKeysServer) error {
	s := d.s
	p, err := s.resolve(req.GetAppProfileId(), false, false)
	if err != nil {
		return err
	}
	if s.fault(Call{Method: "SampleRowKeys", Profile: p.id, Table: req.GetTableName()}, false) == FaultThrottle {
		return s.throttle()
	}
	cs, err := s.target(p).data.SampleRowKeys(stream.Context(), req)
	if err != nil {
		return err
	}
	for {
		m, err := cs.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
}

func (d *dataServer) PingAndWarm(ctx context.Context, req *btpb.PingAndWarmRequest) (*btpb.PingAndWarmResponse, error) {
	if _, err := d.s.resolve(req.GetAppProfileId(), false, false); err != nil {
		return nil, err
	}
	return &btpb.PingAndWarmResponse{}, nil
}

func (d *dataServer) MutateRow(ctx context.Context, req *btpb.MutateRowRequest) (*btpb.MutateRowResponse, error) {
	s := d.s
	p, err := s.resolve(req.GetAppProfileId(), true, false)
	if err != nil {
		return nil, err
	}
	if err := checkRowKey(req.GetRowKey()); err != nil {
		return nil, s.refuse(err)
	}
	if n := len(req.GetMutations()); n > s.maxMutations() {
		return nil, s.refuse(tooManyMutations(n, s.maxMutations()))
	}
	if err := prepareMutations(req.GetMutations(), nowMicros()); err != nil {
		return nil, s.refuse(err)
	}
	f := s.fault(Call{Method: "MutateRow", Profile: p.id, Table: req.GetTableName()}, true)
	if f == FaultThrottle {
		return nil, s.throttle()
	}
	b := s.target(p)
	var resp *btpb.MutateRowResponse
	err = s.write(b, req.GetTableName(), func() ([]rowWrite, error) {
		var err error
		if resp, err = b.data.MutateRow(ctx, req); err != nil {
			return nil, err
		}
		return []rowWrite{{key: req.GetRowKey(), muts: req.GetMutations()}}, nil
	})
	if err != nil {
		return nil, err
	}
	if f == FaultUnavailableAfterApply {
		return nil, s.unavailableAfterApply()
	}
	return resp, nil
}

// MutateRows checks each entry on its own: an entry a rule refuses gets
// its own INVALID_ARGUMENT status and the others are applied, as
// MutateRowsResponse reports each entry's status. Too many mutations in
// total refuses the whole request.
func (d *dataServer) MutateRows(req *btpb.MutateRowsRequest, stream btpb.Bigtable_MutateRowsServer) error {
	s := d.s
	p, err := s.resolve(req.GetAppProfileId(), true, false)
	if err != nil {
		return err
	}
	total := 0
	for _, e := range req.GetEntries() {
		total += len(e.GetMutations())
	}
	if total > s.maxMutations() {
		return s.refuse(tooManyMutations(total, s.maxMutations()))
	}
	now := nowMicros()
	results := make([]*btpb.MutateRowsResponse_Entry, len(req.GetEntries()))
	fwd := &btpb.MutateRowsRequest{TableName: req.GetTableName(), AuthorizedViewName: req.GetAuthorizedViewName(), AppProfileId: req.GetAppProfileId()}
	var index []int // fwd's entry i is req's entry index[i]
	for i, e := range req.GetEntries() {
		err := checkRowKey(e.GetRowKey())
		if err == nil {
			err = prepareMutations(e.GetMutations(), now)
		}
		if err != nil {
			s.refused.Add(1)
			results[i] = &btpb.MutateRowsResponse_Entry{Index: int64(i), Status: status.Convert(err).Proto()}
			continue
		}
		fwd.Entries = append(fwd.Entries, e)
		index = append(index, i)
	}
	f := s.fault(Call{Method: "MutateRows", Profile: p.id, Table: req.GetTableName()}, true)
	if f == FaultThrottle {
		return s.throttle()
	}
	if len(fwd.Entries) > 0 {
		b := s.target(p)
		err := s.write(b, req.GetTableName(), func() ([]rowWrite, error) {
			cs, err := b.data.MutateRows(stream.Context(), fwd)
			if err != nil {
				return nil, err
			}
			var rows []rowWrite
			for {
				m, err := cs.Recv()
				if errors.Is(err, io.EOF) {
					return rows, nil
				}
				if err != nil {
					return rows, err
				}
				for _, e := range m.GetEntries() {
					j := int(e.GetIndex())
					if j < 0 || j >= len(index) {
						return rows, status.Errorf(codes.Internal, "prodserver: backend answered for entry %d of %d", j, len(index))
					}
					results[index[j]] = &btpb.MutateRowsResponse_Entry{Index: int64(index[j]), Status: e.GetStatus()}
					if codes.Code(e.GetStatus().GetCode()) == codes.OK {
						rows = append(rows, rowWrite{key: fwd.Entries[j].GetRowKey(), muts: fwd.Entries[j].GetMutations()})
					}
				}
			}
		})
		if err != nil {
			return err
		}
	}
	if f == FaultUnavailableAfterApply {
		return s.unavailableAfterApply()
	}
	resp := &btpb.MutateRowsResponse{}
	for i, e := range results {
		if e == nil {
			return status.Errorf(codes.Internal, "prodserver: backend gave no status for entry %d", i)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return stream.Send(resp)
}

// CheckAndMutateRow replicates the branch the backend applied.
func (d *dataServer) CheckAndMutateRow(ctx context.Context, req *btpb.CheckAndMutateRowRequest) (*btpb.CheckAndMutateRowResponse, error) {
	s := d.s
	p, err := s.resolve(req.GetAppProfileId(), true, true)
	if err != nil {
		return nil, err
	}
	if err := checkRowKey(req.GetRowKey()); err != nil {
		return nil, s.refuse(err)
	}
	if err := checkFilter(req.GetPredicateFilter()); err != nil {
		return nil, s.refuse(err)
	}
	for _, muts := range [][]*btpb.Mutation{req.GetTrueMutations(), req.GetFalseMutations()} {
		if len(muts) > s.maxMutations() {
			return nil, s.refuse(tooManyMutations(len(muts), s.maxMutations()))
		}
	}
	now := nowMicros()
	if err := prepareMutations(req.GetTrueMutations(), now); err != nil {
		return nil, s.refuse(err)
	}
	if err := prepareMutations(req.GetFalseMutations(), now); err != nil {
		return nil, s.refuse(err)
	}
	f := s.fault(Call{Method: "CheckAndMutateRow", Profile: p.id, Table: req.GetTableName()}, true)
	if f == FaultThrottle {
		return nil, s.throttle()
	}
	b := s.target(p)
	var resp *btpb.CheckAndMutateRowResponse
	err = s.write(b, req.GetTableName(), func() ([]rowWrite, error) {
		var err error
		if resp, err = b.data.CheckAndMutateRow(ctx, req); err != nil {
			return nil, err
		}
		applied := req.GetFalseMutations()
		if resp.GetPredicateMatched() {
			applied = req.GetTrueMutations()
		}
		if len(applied) == 0 {
			return nil, nil
		}
		return []rowWrite{{key: req.GetRowKey(), muts: applied}}, nil
	})
	if err != nil {
		return nil, err
	}
	if f == FaultUnavailableAfterApply {
		return nil, s.unavailableAfterApply()
	}
	return resp, nil
}

// ReadModifyWriteRow replicates the cells it produced, with their
// timestamps, not the rules: the other clusters get the result.
func (d *dataServer) ReadModifyWriteRow(ctx context.Context, req *btpb.ReadModifyWriteRowRequest) (*btpb.ReadModifyWriteRowResponse, error) {
	s := d.s
	p, err := s.resolve(req.GetAppProfileId(), true, true)
	if err != nil {
		return nil, err
	}
	if err := checkRowKey(req.GetRowKey()); err != nil {
		return nil, s.refuse(err)
	}
	if n := len(req.GetRules()); n > s.maxMutations() {
		return nil, s.refuse(tooManyMutations(n, s.maxMutations()))
	}
	f := s.fault(Call{Method: "ReadModifyWriteRow", Profile: p.id, Table: req.GetTableName()}, true)
	if f == FaultThrottle {
		return nil, s.throttle()
	}
	b := s.target(p)
	var resp *btpb.ReadModifyWriteRowResponse
	err = s.write(b, req.GetTableName(), func() ([]rowWrite, error) {
		var err error
		if resp, err = b.data.ReadModifyWriteRow(ctx, req); err != nil {
			return nil, err
		}
		var muts []*btpb.Mutation
		for _, fam := range resp.GetRow().GetFamilies() {
			for _, col := range fam.GetColumns() {
				for _, c := range col.GetCells() {
					muts = append(muts, &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
						FamilyName: fam.GetName(), ColumnQualifier: col.GetQualifier(), TimestampMicros: c.GetTimestampMicros(), Value: c.GetValue(),
					}}})
				}
			}
		}
		if len(muts) == 0 {
			return nil, nil
		}
		return []rowWrite{{key: req.GetRowKey(), muts: muts}}, nil
	})
	if err != nil {
		return nil, err
	}
	if f == FaultUnavailableAfterApply {
		return nil, s.unavailableAfterApply()
	}
	return resp, nil
}
