// Command testproxy serves the CloudBigtableV2TestProxy service of Google's
// Bigtable client conformance suite (github.com/googleapis/cloud-bigtable-clients-test)
// with bttl in the data path, so the suite's mock servers check the
// requests bttl sends and the suite checks what bttl returns.
//
// -variant picks the client under test:
//
//	raw                the plain bigtable.Client: the baseline
//	ttlclient          data calls through a ttlclient.Table
//	api                data calls through ttlclient.Table.API() (bigtable.TableAPI)
//	wireguard          a plain client whose connection carries the wire guard
//	guarded-ttlclient  ttlclient over a guarded connection
//
// The suite's tables are declared with the family it names ("f")
// unmanaged and every other family passed through as unmanaged
// (ttlclient.WithUnlistedFamilies, wireguard.WithUnlistedFamilies): the
// suite writes cells with its own timestamps and an empty family name,
// which only an unmanaged family accepts. run.sh runs the suite against
// every variant. The module is separate from github.com/bttl/bttl so that
// the library's users do not inherit the suite's dependencies.
//
// Written after the Go client's own proxy (internal/testproxy in
// cloud.google.com/go/bigtable), which is internal and cannot be imported.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	pb "github.com/googleapis/cloud-bigtable-clients-test/testproxypb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

var (
	port     = flag.Int("port", 9999, "port to serve the test proxy on (0: any free port)")
	addrFile = flag.String("addr_file", "", "if set, the address served is written to this file once listening")
	variant  = flag.String("variant", "raw", "client under test: raw | ttlclient | api | wireguard | guarded-ttlclient")
)

// variants maps each -variant to whether its data calls go through a
// ttlclient.Table and whether its connection carries the wire guard.
var variants = map[string]struct{ ttl, api, guard bool }{
	"raw":               {},
	"ttlclient":         {ttl: true},
	"api":               {ttl: true, api: true},
	"wireguard":         {guard: true},
	"guarded-ttlclient": {ttl: true, guard: true},
}

// suiteSchema is the schema every variant opens the suite's tables with:
// the one family the suite names in writes ("f"), unmanaged. Every other
// family (the suite's reads return "A" and "B"; CheckAndMutateRow writes
// family "") passes through unmanaged by WithUnlistedFamilies.
func suiteSchema() strategy.Schema { return strategy.Schema{"f": strategy.Unmanaged()} }

// suiteTables are the table IDs the suite uses, for the wire guard, which
// guards named tables.
var suiteTables = []string{"table"}

func main() {
	flag.Parse()
	if _, ok := variants[*variant]; !ok {
		log.Fatalf("unknown -variant %q", *variant)
	}
	lis, err := net.Listen("tcp", fmt.Sprintf("localhost:%d", *port))
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(lis.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	s := grpc.NewServer()
	pb.RegisterCloudBigtableV2TestProxyServer(s, &server{clients: map[string]*client{}})
	log.Printf("bttl test proxy (variant %s) listening at %v", *variant, lis.Addr())
	if err := s.Serve(lis); err != nil {
		log.Fatal(err)
	}
}

// server is the proxy: the clients the suite created, by ID.
type server struct {
	pb.UnimplementedCloudBigtableV2TestProxyServer
	mu      sync.Mutex
	clients map[string]*client
}

// client is one client the suite created.
type client struct {
	raw     *bigtable.Client
	ttl     *ttlclient.Client // nil for raw and wireguard
	api     bool
	timeout time.Duration // per operation; 0 for none

	mu     sync.Mutex
	tables map[string]dataTable
}

func (s *server) CreateClient(ctx context.Context, req *pb.CreateClientRequest) (*pb.CreateClientResponse, error) {
	if req.GetClientId() == "" || req.GetDataTarget() == "" || req.GetProjectId() == "" || req.GetInstanceId() == "" {
		return nil, status.Error(codes.InvalidArgument, "bttl test proxy: CreateClient needs client_id, data_target, project_id and instance_id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.clients[req.ClientId]; dup {
		return nil, status.Errorf(codes.AlreadyExists, "bttl test proxy: client %q exists", req.ClientId)
	}
	v := variants[*variant]
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if v.ttl {
		// bttl's interceptor, as ttlclient.NewClient dials it: Table.API
		// and reads with options are rewritten on the wire.
		dial = append(dial, ttlclient.DialOptions()...)
	}
	if v.guard {
		schemas := map[string]strategy.Schema{}
		for _, id := range suiteTables {
			schemas[id] = suiteSchema()
		}
		g, err := wireguard.New(schemas, wireguard.WithReadFilter(), wireguard.WithUnlistedFamilies(strategy.Unmanaged()))
		if err != nil {
			return nil, status.Errorf(codes.Internal, "bttl test proxy: wire guard: %v", err)
		}
		dial = append(dial, g.DialOptions()...)
	}
	conn, err := grpc.NewClient(req.DataTarget, dial...)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "bttl test proxy: dial: %v", err)
	}
	cfg := bigtable.ClientConfig{AppProfile: req.GetAppProfileId(), MetricsProvider: bigtable.NoopMetricsProvider{}}
	raw, err := bigtable.NewClientWithConfig(ctx, req.ProjectId, req.InstanceId, cfg, option.WithGRPCConn(conn))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "bttl test proxy: client: %v", err)
	}
	c := &client{raw: raw, api: v.api, tables: map[string]dataTable{}}
	if d := req.GetPerOperationTimeout(); d != nil {
		c.timeout = d.AsDuration()
	}
	if v.ttl {
		c.ttl = ttlclient.Wrap(raw, ttlclient.WithoutVerify(), ttlclient.WithUnlistedFamilies(strategy.Unmanaged()), ttlclient.WithLogger(slog.New(slog.DiscardHandler)))
	}
	s.clients[req.ClientId] = c
	return &pb.CreateClientResponse{}, nil
}

func (s *server) CloseClient(ctx context.Context, req *pb.CloseClientRequest) (*pb.CloseClientResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[req.GetClientId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "bttl test proxy: no client %q", req.GetClientId())
	}
	if c.ttl != nil {
		c.ttl.Close() // stops bttl's background work; the raw client is closed below
	}
	c.raw.Close()
	return &pb.CloseClientResponse{}, nil
}

func (s *server) RemoveClient(ctx context.Context, req *pb.RemoveClientRequest) (*pb.RemoveClientResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[req.GetClientId()]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "bttl test proxy: no client %q", req.GetClientId())
	}
	delete(s.clients, req.GetClientId())
	return &pb.RemoveClientResponse{}, nil
}

// table is the client and its table named tableName, with ctx bounded by
// the client's per-operation timeout.
func (s *server) table(ctx context.Context, clientID, tableName string) (context.Context, context.CancelFunc, dataTable, error) {
	s.mu.Lock()
	c, ok := s.clients[clientID]
	s.mu.Unlock()
	if !ok {
		return nil, nil, nil, status.Errorf(codes.NotFound, "bttl test proxy: no client %q", clientID)
	}
	id, err := tableID(tableName)
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := c.open(id)
	if err != nil {
		return nil, nil, nil, err
	}
	if c.timeout > 0 {
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		return ctx, cancel, t, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	return ctx, cancel, t, nil
}

// open is the client's table id, opened once and kept for the client's
// later calls: not bound to the call that opened it.
func (c *client) open(id string) (dataTable, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tables[id]; ok {
		return t, nil
	}
	var t dataTable
	switch {
	case c.ttl == nil:
		t = apiTable{c.raw.Open(id)}
	default:
		tt, err := c.ttl.Open(context.Background(), id, suiteSchema())
		if err != nil {
			return nil, status.Errorf(codes.Internal, "bttl test proxy: open %q: %v", id, err)
		}
		if c.api {
			t = apiTable{tt.API()}
		} else {
			t = ttlTable{tt}
		}
	}
	c.tables[id] = t
	return t, nil
}

func (s *server) ReadRow(ctx context.Context, req *pb.ReadRowRequest) (*pb.RowResult, error) {
	ctx, cancel, t, err := s.table(ctx, req.GetClientId(), req.GetTableName())
	if err != nil {
		return nil, err
	}
	defer cancel()
	var opts []bigtable.ReadOption
	if f, err := filter(req.GetFilter()); err != nil {
		return nil, err
	} else if f != nil {
		opts = append(opts, bigtable.RowFilter(f))
	}
	r, err := t.ReadRow(ctx, req.GetRowKey(), opts...)
	return &pb.RowResult{Status: statusOf(err), Row: rowProto(r)}, nil
}

func (s *server) ReadRows(ctx context.Context, req *pb.ReadRowsRequest) (*pb.RowsResult, error) {
	rr := req.GetRequest()
	if rr == nil {
		return nil, status.Error(codes.InvalidArgument, "bttl test proxy: ReadRows without a request")
	}
	ctx, cancel, t, err := s.table(ctx, req.GetClientId(), rr.GetTableName())
	if err != nil {
		return nil, err
	}
	defer cancel()
	var opts []bigtable.ReadOption
	if f, err := filter(rr.GetFilter()); err != nil {
		return nil, err
	} else if f != nil {
		opts = append(opts, bigtable.RowFilter(f))
	}
	if rr.GetReversed() {
		opts = append(opts, bigtable.ReverseScan())
	}
	if n := rr.GetRowsLimit(); n > 0 {
		opts = append(opts, bigtable.LimitRows(n))
	}
	res := &pb.RowsResult{}
	var n int32
	err = t.ReadRows(ctx, rowSet(rr.GetRows()), func(r bigtable.Row) bool {
		n++
		if n == req.GetCancelAfterRows() {
			return false // as the Go client's proxy: the row that reaches the count is dropped
		}
		res.Rows = append(res.Rows, rowProto(r))
		return true
	}, opts...)
	res.Status = statusOf(err)
	if err != nil {
		res.Rows = nil
	}
	return res, nil
}

func (s *server) MutateRow(ctx context.Context, req *pb.MutateRowRequest) (*pb.MutateRowResult, error) {
	mr := req.GetRequest()
	if mr == nil {
		return nil, status.Error(codes.InvalidArgument, "bttl test proxy: MutateRow without a request")
	}
	ctx, cancel, t, err := s.table(ctx, req.GetClientId(), mr.GetTableName())
	if err != nil {
		return nil, err
	}
	defer cancel()
	return &pb.MutateRowResult{Status: statusOf(t.apply(ctx, string(mr.GetRowKey()), mr.GetMutations()))}, nil
}

func (s *server) BulkMutateRows(ctx context.Context, req *pb.MutateRowsRequest) (*pb.MutateRowsResult, error) {
	mr := req.GetRequest()
	if mr == nil {
		return nil, status.Error(codes.InvalidArgument, "bttl test proxy: BulkMutateRows without a request")
	}
	ctx, cancel, t, err := s.table(ctx, req.GetClientId(), mr.GetTableName())
	if err != nil {
		return nil, err
	}
	defer cancel()
	keys := make([]string, len(mr.GetEntries()))
	muts := make([][]*btpb.Mutation, len(keys))
	for i, e := range mr.GetEntries() {
		keys[i], muts[i] = string(e.GetRowKey()), e.GetMutations()
	}
	errs, err := t.applyBulk(ctx, keys, muts)
	res := &pb.MutateRowsResult{Status: statusOf(err)}
	switch {
	case err != nil:
		// As the Go client's proxy: the whole call's error is every entry's.
		for i := range keys {
			res.Entries = append(res.Entries, &btpb.MutateRowsResponse_Entry{Index: int64(i), Status: res.Status})
		}
	default:
		for i, e := range errs {
			if e != nil {
				res.Entries = append(res.Entries, &btpb.MutateRowsResponse_Entry{Index: int64(i), Status: statusOf(e)})
			}
		}
	}
	return res, nil
}

func (s *server) CheckAndMutateRow(ctx context.Context, req *pb.CheckAndMutateRowRequest) (*pb.CheckAndMutateRowResult, error) {
	cr := req.GetRequest()
	if cr == nil {
		return nil, status.Error(codes.InvalidArgument, "bttl test proxy: CheckAndMutateRow without a request")
	}
	ctx, cancel, t, err := s.table(ctx, req.GetClientId(), cr.GetTableName())
	if err != nil {
		return nil, err
	}
	defer cancel()
	pred, err := filter(cr.GetPredicateFilter())
	if err != nil {
		return nil, err
	}
	matched, err := t.applyCond(ctx, string(cr.GetRowKey()), pred, cr.GetTrueMutations(), cr.GetFalseMutations())
	res := &pb.CheckAndMutateRowResult{Status: statusOf(err)}
	if err == nil {
		res.Result = &btpb.CheckAndMutateRowResponse{PredicateMatched: matched}
	}
	return res, nil
}

func (s *server) SampleRowKeys(ctx context.Context, req *pb.SampleRowKeysRequest) (*pb.SampleRowKeysResult, error) {
	sr := req.GetRequest()
	if sr == nil {
		return nil, status.Error(codes.InvalidArgument, "bttl test proxy: SampleRowKeys without a request")
	}
	ctx, cancel, t, err := s.table(ctx, req.GetClientId(), sr.GetTableName())
	if err != nil {
		return nil, err
	}
	defer cancel()
	keys, err := t.SampleRowKeys(ctx)
	res := &pb.SampleRowKeysResult{Status: statusOf(err)}
	if err == nil {
		for _, k := range keys {
			res.Samples = append(res.Samples, &btpb.SampleRowKeysResponse{RowKey: []byte(k)})
		}
	}
	return res, nil
}

func (s *server) ReadModifyWriteRow(ctx context.Context, req *pb.ReadModifyWriteRowRequest) (*pb.RowResult, error) {
	rr := req.GetRequest()
	if rr == nil {
		return nil, status.Error(codes.InvalidArgument, "bttl test proxy: ReadModifyWriteRow without a request")
	}
	ctx, cancel, t, err := s.table(ctx, req.GetClientId(), rr.GetTableName())
	if err != nil {
		return nil, err
	}
	defer cancel()
	r, err := t.readModifyWrite(ctx, string(rr.GetRowKey()), rr.GetRules())
	return &pb.RowResult{Status: statusOf(err), Row: rowProto(r)}, nil
}
