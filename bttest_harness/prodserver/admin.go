package prodserver

import (
	"context"
	"strconv"
	"strings"

	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// tableAdminServer serves the table admin calls bttl and its tests make.
// Changes to a table (create, delete, column families and their GC rules,
// dropping rows) go to every backend at once, clusters and Data Boost
// replicas: production replicates "New and deleted tables", "Added and
// removed column families" and "Changes to a column family's garbage
// collection policy" (Replication overview) asynchronously, the double
// synchronously. Reads of the schema go to the first cluster.
// GenerateConsistencyToken and CheckConsistency report the replicator, so
// bigtable.AdminClient.WaitForReplication works (it polls every 10 s; tests
// call Server.Flush instead).
type tableAdminServer struct {
	btapb.UnimplementedBigtableTableAdminServer
	s *Server
}

// backends are every backend: the clusters in order, then the Data Boost
// replicas in cluster order.
func (s *Server) backends() []*backend {
	var out []*backend
	for _, id := range s.order {
		out = append(out, s.clusters[id])
	}
	for _, id := range s.order {
		if b := s.boost[id]; b != nil {
			out = append(out, b)
		}
	}
	return out
}

func (s *Server) first() *backend { return s.clusters[s.order[0]] }

// fanOut runs call on every backend and returns the first backend's
// answer; the first error stops it.
func fanOut[T any](s *Server, call func(*backend) (T, error)) (T, error) {
	var first T
	for i, b := range s.backends() {
		r, err := call(b)
		if err != nil {
			return r, err
		}
		if i == 0 {
			first = r
		}
	}
	return first, nil
}

func (a *tableAdminServer) CreateTable(ctx context.Context, req *btapb.CreateTableRequest) (*btapb.Table, error) {
	return fanOut(a.s, func(b *backend) (*btapb.Table, error) { return b.admin.CreateTable(ctx, req) })
}

func (a *tableAdminServer) DeleteTable(ctx context.Context, req *btapb.DeleteTableRequest) (*emptypb.Empty, error) {
	return fanOut(a.s, func(b *backend) (*emptypb.Empty, error) { return b.admin.DeleteTable(ctx, req) })
}

func (a *tableAdminServer) ModifyColumnFamilies(ctx context.Context, req *btapb.ModifyColumnFamiliesRequest) (*btapb.Table, error) {
	return fanOut(a.s, func(b *backend) (*btapb.Table, error) { return b.admin.ModifyColumnFamilies(ctx, req) })
}

func (a *tableAdminServer) DropRowRange(ctx context.Context, req *btapb.DropRowRangeRequest) (*emptypb.Empty, error) {
	return fanOut(a.s, func(b *backend) (*emptypb.Empty, error) { return b.admin.DropRowRange(ctx, req) })
}

func (a *tableAdminServer) GetTable(ctx context.Context, req *btapb.GetTableRequest) (*btapb.Table, error) {
	return a.s.first().admin.GetTable(ctx, req)
}

func (a *tableAdminServer) ListTables(ctx context.Context, req *btapb.ListTablesRequest) (*btapb.ListTablesResponse, error) {
	return a.s.first().admin.ListTables(ctx, req)
}

// GenerateConsistencyToken's token is the number of writes accepted so far.
func (a *tableAdminServer) GenerateConsistencyToken(ctx context.Context, req *btapb.GenerateConsistencyTokenRequest) (*btapb.GenerateConsistencyTokenResponse, error) {
	return &btapb.GenerateConsistencyTokenResponse{ConsistencyToken: strconv.FormatUint(a.s.repl.token(), 10)}, nil
}

// CheckConsistency is consistent once every write up to the token has
// reached every cluster (with the DataBoostReadLocalWrites mode: every
// Data Boost replica). The double's token covers every table.
func (a *tableAdminServer) CheckConsistency(ctx context.Context, req *btapb.CheckConsistencyRequest) (*btapb.CheckConsistencyResponse, error) {
	token, err := strconv.ParseUint(req.GetConsistencyToken(), 10, 64)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "prodserver: consistency token %q is not one this server made", req.GetConsistencyToken())
	}
	return &btapb.CheckConsistencyResponse{Consistent: a.s.repl.caughtUp(token, req.GetDataBoostReadLocalWrites() != nil)}, nil
}

// instanceAdminServer shows the instance's clusters and app profiles, so
// a client with an instance admin client can check the profiles it will
// use. It changes nothing.
type instanceAdminServer struct {
	btapb.UnimplementedBigtableInstanceAdminServer
	s *Server
}

func (a *instanceAdminServer) GetAppProfile(ctx context.Context, req *btapb.GetAppProfileRequest) (*btapb.AppProfile, error) {
	instance, id, ok := strings.Cut(req.GetName(), "/appProfiles/")
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "prodserver: malformed app profile name %q", req.GetName())
	}
	p, ok := a.s.profiles[id]
	if !ok {
		return nil, unknownProfile(id)
	}
	return p.proto(instance), nil
}

func (a *instanceAdminServer) ListAppProfiles(ctx context.Context, req *btapb.ListAppProfilesRequest) (*btapb.ListAppProfilesResponse, error) {
	resp := &btapb.ListAppProfilesResponse{}
	for _, p := range a.s.sortedProfiles() {
		resp.AppProfiles = append(resp.AppProfiles, p.proto(req.GetParent()))
	}
	return resp, nil
}

func (a *instanceAdminServer) GetCluster(ctx context.Context, req *btapb.GetClusterRequest) (*btapb.Cluster, error) {
	_, id, _ := strings.Cut(req.GetName(), "/clusters/")
	if a.s.clusters[id] == nil {
		return nil, status.Errorf(codes.NotFound, "prodserver: no cluster %q", id)
	}
	return &btapb.Cluster{Name: req.GetName(), State: btapb.Cluster_READY}, nil
}

func (a *instanceAdminServer) ListClusters(ctx context.Context, req *btapb.ListClustersRequest) (*btapb.ListClustersResponse, error) {
	resp := &btapb.ListClustersResponse{}
	for _, id := range a.s.order {
		resp.Clusters = append(resp.Clusters, &btapb.Cluster{Name: req.GetParent() + "/clusters/" + id, State: btapb.Cluster_READY})
	}
	return resp, nil
}
