package changestreams

import (
	"context"
	"time"

	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
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
	stream, err := streamConfig(req.GetTable().GetChangeStreamConfig())
	if err != nil {
		return nil, err
	}
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
	t := s.tableLocked(name)
	t.rules, t.stream = rules, stream
	return s.withTable(tbl, t), nil
}

// withTable is tbl as the backend returned it with what this server keeps
// instead: the families' GC rules and the change stream configuration.
func (s *Server) withTable(tbl *btapb.Table, t *table) *btapb.Table {
	tbl = proto.Clone(tbl).(*btapb.Table)
	for fam, cf := range tbl.ColumnFamilies {
		if r, ok := t.rules[fam]; ok {
			cf.GcRule = r
		}
	}
	if t.stream != nil {
		tbl.ChangeStreamConfig = proto.Clone(t.stream).(*btapb.ChangeStreamConfig)
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
	return a.s.withTable(tbl, a.s.tableLocked(req.Name)), nil
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
	return s.withTable(tbl, t), nil
}

// Change stream configuration, from the field docs of table.proto and
// bigtable_table_admin.proto (google/bigtable/admin/v2):
//   - Table.change_stream_config: "If specified, enable the change stream
//     on this table. Otherwise, the change stream is disabled and the
//     change stream is not retained."
//   - ChangeStreamConfig.retention_period: "Values must be at least 1 day
//     and at most 7 days, and will be truncated to microsecond
//     granularity." (The status code of a value out of range is not
//     documented: INVALID_ARGUMENT here.)
//   - UpdateTableRequest.update_mask: "Currently UpdateTable is only
//     supported for the following fields: change_stream_config,
//     change_stream_config.retention_period, deletion_protection,
//     row_key_schema. If column_families is set in update_mask, it will
//     return an UNIMPLEMENTED error."
//
// The configuration is stored and returned by GetTable (and CreateTable,
// UpdateTable); ReadChangeStream does not check it (docs/emulators.md).
// bttest itself keeps no change stream configuration: its UpdateTable sets
// deletion protection from the request whatever the mask says, and its
// GetTable returns no change_stream_config.

const (
	minRetention = 24 * time.Hour
	maxRetention = 7 * 24 * time.Hour
)

// streamConfig validates and truncates a requested configuration (nil:
// the stream disabled).
func streamConfig(c *btapb.ChangeStreamConfig) (*btapb.ChangeStreamConfig, error) {
	if c == nil {
		return nil, nil
	}
	if c.RetentionPeriod == nil {
		return nil, status.Error(codes.InvalidArgument, "change_stream_config needs retention_period")
	}
	if err := c.RetentionPeriod.CheckValid(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "change_stream_config.retention_period: %v", err)
	}
	d := c.RetentionPeriod.AsDuration().Truncate(time.Microsecond)
	if d < minRetention || d > maxRetention {
		return nil, status.Errorf(codes.InvalidArgument, "change_stream_config.retention_period %s: must be at least 1 day and at most 7 days", d)
	}
	return &btapb.ChangeStreamConfig{RetentionPeriod: durationpb.New(d)}, nil
}

func (a *adminServer) UpdateTable(ctx context.Context, req *btapb.UpdateTableRequest) (*longrunningpb.Operation, error) {
	s := a.s
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, status.Error(codes.InvalidArgument, "update_mask is required")
	}
	name := req.GetTable().GetName()
	if _, err := s.admin.GetTable(ctx, &btapb.GetTableRequest{Name: name, View: btapb.Table_NAME_ONLY}); err != nil {
		return nil, err
	}
	var stream *btapb.ChangeStreamConfig
	setStream, protect := false, false
	for _, p := range paths {
		switch p {
		case "change_stream_config":
			cfg, err := streamConfig(req.GetTable().GetChangeStreamConfig())
			if err != nil {
				return nil, err
			}
			stream, setStream = cfg, true
		case "change_stream_config.retention_period":
			cfg := req.GetTable().GetChangeStreamConfig()
			if cfg.GetRetentionPeriod() == nil {
				return nil, status.Error(codes.InvalidArgument, "update_mask change_stream_config.retention_period needs table.change_stream_config.retention_period")
			}
			cfg, err := streamConfig(cfg)
			if err != nil {
				return nil, err
			}
			stream, setStream = cfg, true
		case "deletion_protection":
			protect = true
		case "column_families":
			return nil, status.Error(codes.Unimplemented, "update_mask column_families: use ModifyColumnFamilies")
		case "row_key_schema":
			return nil, status.Error(codes.Unimplemented, "update_mask row_key_schema: not modelled by this server")
		default:
			return nil, status.Errorf(codes.InvalidArgument, "update_mask path %q: UpdateTable supports change_stream_config, change_stream_config.retention_period, deletion_protection and row_key_schema", p)
		}
	}
	if protect {
		// Forwarded alone: bttest reads deletion_protection whatever the
		// mask says.
		fwd := &btapb.UpdateTableRequest{
			Table:      &btapb.Table{Name: name, DeletionProtection: req.GetTable().GetDeletionProtection()},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"deletion_protection"}},
		}
		if _, err := s.admin.UpdateTable(ctx, fwd); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	t := s.tableLocked(name)
	if setStream {
		t.stream = stream
	}
	s.mu.Unlock()
	tbl, err := a.GetTable(ctx, &btapb.GetTableRequest{Name: name, View: btapb.Table_SCHEMA_VIEW})
	if err != nil {
		return nil, err
	}
	resp, err := anypb.New(tbl)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &longrunningpb.Operation{Name: name + "/operations/update", Done: true, Result: &longrunningpb.Operation_Response{Response: resp}}, nil
}
