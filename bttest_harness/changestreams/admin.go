package changestreams

import (
	"context"

	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// adminServer forwards the table admin calls tests need. The families' GC
// rules are kept by the server, not given to the backend: bttest would
// otherwise collect garbage on its own, every second or so, and those
// deletions would be missing from the change stream. Server.RunGC applies
// them instead.
type adminServer struct {
	btapb.UnimplementedBigtableTableAdminServer
	s *Server
}

func (a *adminServer) CreateTable(ctx context.Context, req *btapb.CreateTableRequest) (*btapb.Table, error) {
	s := a.s
	req = proto.Clone(req).(*btapb.CreateTableRequest)
	rules := map[string]*btapb.GcRule{}
	for fam, cf := range req.GetTable().GetColumnFamilies() {
		if cf.GcRule != nil {
			rules[fam] = cf.GcRule
		}
		cf.GcRule = nil
	}
	tbl, err := s.admin.CreateTable(ctx, req)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := req.Parent + "/tables/" + req.TableId
	delete(s.tables, name)
	s.tableLocked(name).rules = rules
	return s.withRules(tbl, rules), nil
}

func (s *Server) withRules(tbl *btapb.Table, rules map[string]*btapb.GcRule) *btapb.Table {
	tbl = proto.Clone(tbl).(*btapb.Table)
	for fam, cf := range tbl.ColumnFamilies {
		if r, ok := rules[fam]; ok {
			cf.GcRule = r
		}
	}
	return tbl
}

func (a *adminServer) GetTable(ctx context.Context, req *btapb.GetTableRequest) (*btapb.Table, error) {
	tbl, err := a.s.admin.GetTable(ctx, req)
	if err != nil {
		return nil, err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	return a.s.withRules(tbl, a.s.tableLocked(req.Name).rules), nil
}

func (a *adminServer) ListTables(ctx context.Context, req *btapb.ListTablesRequest) (*btapb.ListTablesResponse, error) {
	return a.s.admin.ListTables(ctx, req)
}

func (a *adminServer) DeleteTable(ctx context.Context, req *btapb.DeleteTableRequest) (*emptypb.Empty, error) {
	resp, err := a.s.admin.DeleteTable(ctx, req)
	if err == nil {
		a.s.mu.Lock()
		delete(a.s.tables, req.Name)
		a.s.mu.Unlock()
	}
	return resp, err
}

func (a *adminServer) ModifyColumnFamilies(ctx context.Context, req *btapb.ModifyColumnFamiliesRequest) (*btapb.Table, error) {
	s := a.s
	req = proto.Clone(req).(*btapb.ModifyColumnFamiliesRequest)
	rules := map[string]*btapb.GcRule{}
	dropped := map[string]bool{}
	for _, m := range req.Modifications {
		switch mod := m.Mod.(type) {
		case *btapb.ModifyColumnFamiliesRequest_Modification_Create:
			rules[m.Id] = mod.Create.GcRule
			mod.Create.GcRule = nil
		case *btapb.ModifyColumnFamiliesRequest_Modification_Update:
			rules[m.Id] = mod.Update.GcRule
			mod.Update.GcRule = nil
		case *btapb.ModifyColumnFamiliesRequest_Modification_Drop:
			dropped[m.Id] = true
		}
	}
	tbl, err := s.admin.ModifyColumnFamilies(ctx, req)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tableLocked(req.Name)
	for fam, r := range rules {
		if r == nil {
			delete(t.rules, fam)
		} else {
			t.rules[fam] = r
		}
	}
	for fam := range dropped {
		delete(t.rules, fam)
	}
	return s.withRules(tbl, t.rules), nil
}
