package prodserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// DefaultCluster is the cluster's ID when Config.Clusters is empty.
const DefaultCluster = "cluster-a"

// DefaultDataBoostLag is how stale a Data Boost read may be: "Data Boost
// reads are only guaranteed to see the results of writes that were written
// at least 30 minutes ago. This means newly written values may not become
// visible for up to 30m, and also means that old values may remain visible
// for up to 30m after being deleted or overwritten."
// (AppProfile.DataBoostIsolationReadOnly, google/bigtable/admin/v2/instance.proto)
const DefaultDataBoostLag = 30 * time.Minute

// DefaultRetryDelay is the delay a throttled request's RetryInfo asks for
// when Config.RetryDelay is zero.
const DefaultRetryDelay = 20 * time.Millisecond

// maxMessageBytes bounds the messages the server and its backends take.
// gRPC's default of 4 MiB would refuse a request of MaxMutations mutations
// before the double's own limit could. 256 MiB is the size of the
// largest row production reads in full (Row in data.proto: "Rows which
// exceed 256MiB in size cannot be read in full").
const maxMessageBytes = 256 << 20

// replicationPassTimeout bounds one pass of the replicator against a
// backend, so that a dead backend cannot hang Flush or Close.
const replicationPassTimeout = 30 * time.Second

// Clock tells the time the replicator judges lags by. *bttestharness.ManualClock
// and strategy.Clock implementations satisfy it.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Cluster is one cluster of the emulated instance: a backend Bigtable
// server.
type Cluster struct {
	// ID names the cluster, as profiles route to it.
	ID string
	// Addr is a backend to use (cbtemulator, say); empty starts an
	// in-process bttest server that Close stops.
	Addr string
}

// Fault is what Config.Fault injects into one call.
type Fault int

const (
	// FaultNone leaves the call to the configured rates.
	FaultNone Fault = iota
	// FaultNo forces no fault on the call, whatever the rates.
	FaultNo
	// FaultThrottle refuses the call with RESOURCE_EXHAUSTED and RetryInfo
	// before the backend sees it.
	FaultThrottle
	// FaultUnavailableAfterApply has the backend apply a write, then answers
	// UNAVAILABLE. It applies to MutateRow, MutateRows, CheckAndMutateRow and
	// ReadModifyWriteRow; on a read it is FaultNone.
	FaultUnavailableAfterApply
)

// Call describes a data call to Config.Fault.
type Call struct {
	// Method is the gRPC method's short name ("MutateRow", "ReadRows", ...).
	Method string
	// Profile is the app profile's ID as resolved ("default" for none).
	Profile string
	// Table is the table's full resource name.
	Table string
}

// Config describes the emulated instance and the server's faults.
type Config struct {
	// Clusters are the instance's clusters; empty means one in-process
	// cluster, DefaultCluster. Two or more make a replicated instance.
	Clusters []Cluster
	// Profiles are the instance's app profiles. A request naming any other
	// profile is refused. Without a profile with ID DefaultProfileID, the
	// default profile is single-cluster transactional for one cluster and
	// multi-cluster for more (see defaultProfile).
	Profiles []AppProfile
	// Lag is how long after a write was accepted on one cluster the
	// replicator applies it to the others.
	Lag time.Duration
	// DataBoostLag is how stale a Data Boost profile's reads are; zero means
	// DefaultDataBoostLag.
	DataBoostLag time.Duration
	// Clock judges the lags. Nil: real time, and a background replicator
	// applies each write when it falls due. Set (a manual clock): nothing
	// replicates on its own; ReplicateDue applies what the clock says is
	// due, Flush everything.
	Clock Clock
	// MaxMutations, when positive and below MaxMutations, is the limit
	// enforced in its place, so a test can exercise the limit with small
	// requests (beside rules.SetRequestLimitForTest, bttl's side of it).
	MaxMutations int
	// Seed makes the throttling, the UNAVAILABLE answers and multi-cluster
	// routing reproducible: each draws from its own stream seeded by it.
	Seed uint64
	// ThrottleRate is the fraction of data calls refused with
	// RESOURCE_EXHAUSTED and a RetryInfo of RetryDelay.
	ThrottleRate float64
	// RetryDelay is the delay RetryInfo asks for; zero means
	// DefaultRetryDelay.
	RetryDelay time.Duration
	// UnavailableRate is the fraction of writes answered UNAVAILABLE after
	// the backend applied them.
	UnavailableRate float64
	// Fault, when set, is asked first for every data call that passed the
	// profile and limit checks; FaultNone leaves the call to the rates.
	// Calls to it are serialized.
	Fault func(Call) Fault
}

// Counts are what the server has done so far.
type Counts struct {
	// Refused counts requests refused by a profile or a limit.
	Refused int64
	// Throttled counts RESOURCE_EXHAUSTED answers.
	Throttled int64
	// Unavailable counts UNAVAILABLE answers after a backend applied a write.
	Unavailable int64
	// Replicated counts row writes the replicator applied to another cluster
	// or a Data Boost replica.
	Replicated int64
}

// Server is a production-rules Bigtable server: a gRPC server serving the
// Bigtable data API (and the table and instance admin calls tests need) in
// front of one backend per cluster, enforcing the documented rules of
// production that the emulators do not. See the package doc.
type Server struct {
	// Addr is the server's address: dial it like an emulator.
	Addr string

	cfg      Config
	clock    Clock
	grpc     *grpc.Server
	order    []string            // cluster IDs, in Config order
	clusters map[string]*backend // by cluster ID
	boost    map[string]*backend // Data Boost replica by cluster ID
	profiles map[string]AppProfile
	repl     *replicator

	mu          sync.Mutex
	throttleRNG *rand.Rand
	unavailRNG  *rand.Rand
	routeRNG    *rand.Rand
	pinned      string

	refused, throttled, unavailable atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// backend is one backend server: a cluster or a Data Boost replica.
type backend struct {
	name  string
	addr  string
	srv   *bttest.Server // nil when external
	conn  *grpc.ClientConn
	data  btpb.BigtableClient
	admin btapb.BigtableTableAdminClient
	// writeMu orders writes accepted on this cluster: a write and its
	// enqueueing for replication happen together, so each other cluster
	// applies them in the order this one did.
	writeMu sync.Mutex
}

// Start starts the backends (in-process ones for clusters without Addr),
// a Data Boost replica for each cluster a Data Boost profile reads, the
// replicator and the server.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if len(cfg.Clusters) == 0 {
		cfg.Clusters = []Cluster{{ID: DefaultCluster}}
	}
	if cfg.DataBoostLag == 0 {
		cfg.DataBoostLag = DefaultDataBoostLag
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = DefaultRetryDelay
	}
	if cfg.Lag < 0 || cfg.DataBoostLag < 0 || cfg.RetryDelay < 0 {
		return nil, fmt.Errorf("prodserver: negative lag or retry delay")
	}
	if cfg.ThrottleRate < 0 || cfg.ThrottleRate > 1 || cfg.UnavailableRate < 0 || cfg.UnavailableRate > 1 {
		return nil, fmt.Errorf("prodserver: rates must be within [0, 1], got throttle %v, unavailable %v", cfg.ThrottleRate, cfg.UnavailableRate)
	}
	s := &Server{
		cfg:         cfg,
		clock:       cfg.Clock,
		clusters:    map[string]*backend{},
		boost:       map[string]*backend{},
		profiles:    map[string]AppProfile{},
		throttleRNG: rand.New(rand.NewPCG(cfg.Seed, 1)),
		unavailRNG:  rand.New(rand.NewPCG(cfg.Seed, 2)),
		routeRNG:    rand.New(rand.NewPCG(cfg.Seed, 3)),
	}
	if s.clock == nil {
		s.clock = realClock{}
	}
	for _, c := range cfg.Clusters {
		if c.ID == "" {
			return nil, fmt.Errorf("prodserver: a cluster without an ID")
		}
		if _, dup := s.clusters[c.ID]; dup {
			return nil, fmt.Errorf("prodserver: cluster %q given twice", c.ID)
		}
		b, err := startBackend(c.ID, c.Addr)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.clusters[c.ID] = b
		s.order = append(s.order, c.ID)
	}
	for _, p := range cfg.Profiles {
		if p.id == "" {
			s.Close()
			return nil, fmt.Errorf("prodserver: a profile without an ID (build profiles with SingleCluster, MultiCluster or DataBoost)")
		}
		if _, dup := s.profiles[p.id]; dup {
			s.Close()
			return nil, fmt.Errorf("prodserver: profile %q given twice", p.id)
		}
		if p.routing != routeMulti {
			if _, ok := s.clusters[p.cluster]; !ok {
				s.Close()
				return nil, fmt.Errorf("prodserver: profile %q routes to cluster %q, which the instance does not have", p.id, p.cluster)
			}
		}
		if p.routing == routeDataBoost && s.boost[p.cluster] == nil {
			b, err := startBackend(p.cluster+"/data-boost", "")
			if err != nil {
				s.Close()
				return nil, err
			}
			s.boost[p.cluster] = b
		}
		s.profiles[p.id] = p
	}
	if _, ok := s.profiles[DefaultProfileID]; !ok {
		s.profiles[DefaultProfileID] = defaultProfile(s.order)
	}
	s.repl = newReplicator(s)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("prodserver: listen: %w", err)
	}
	s.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes))
	btpb.RegisterBigtableServer(s.grpc, &dataServer{s: s})
	btapb.RegisterBigtableTableAdminServer(s.grpc, &tableAdminServer{s: s})
	btapb.RegisterBigtableInstanceAdminServer(s.grpc, &instanceAdminServer{s: s})
	s.Addr = lis.Addr().String()
	go func() { _ = s.grpc.Serve(lis) }()
	if cfg.Clock == nil {
		s.repl.startBackground()
	}
	return s, nil
}

// New starts a server for a test and closes it when the test ends.
func New(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	s, err := Start(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("prodserver: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func startBackend(name, addr string) (*backend, error) {
	b := &backend{name: name, addr: addr}
	if addr == "" {
		g := &gate{}
		srv, err := bttest.NewServer("127.0.0.1:0", grpc.ChainUnaryInterceptor(g.unary), grpc.ChainStreamInterceptor(g.stream), grpc.MaxRecvMsgSize(maxMessageBytes))
		if err != nil {
			return nil, fmt.Errorf("prodserver: start bttest for %s: %w", name, err)
		}
		b.srv, b.addr = srv, srv.Addr
	}
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)))
	if err != nil {
		if b.srv != nil {
			b.srv.Close()
		}
		return nil, fmt.Errorf("prodserver: dial backend %s at %s: %w", name, b.addr, err)
	}
	b.conn, b.data, b.admin = conn, btpb.NewBigtableClient(conn), btapb.NewBigtableTableAdminClient(conn)
	return b, nil
}

func (b *backend) close() error {
	var err error
	if b.conn != nil {
		err = b.conn.Close()
	}
	if b.srv != nil {
		b.srv.Close()
	}
	return err
}

// Close stops the server, the replicator (pending writes are dropped: call
// Flush first to apply them) and the in-process backends.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.repl != nil {
			s.repl.stop()
		}
		if s.grpc != nil {
			s.grpc.Stop()
		}
		var errs []error
		for _, id := range s.order {
			errs = append(errs, s.clusters[id].close())
		}
		for _, b := range s.boost {
			errs = append(errs, b.close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// ClusterAddr is the address of cluster id's backend, to read or write it
// directly, past every rule and the replicator; "" if there is no such
// cluster.
func (s *Server) ClusterAddr(id string) string {
	if b := s.clusters[id]; b != nil {
		return b.addr
	}
	return ""
}

// Profile is the instance's profile id (the default one for "") and
// whether it exists.
func (s *Server) Profile(id string) (AppProfile, bool) {
	if id == "" {
		id = DefaultProfileID
	}
	p, ok := s.profiles[id]
	return p, ok
}

// RouteMultiCluster sends every later multi-cluster request to cluster id
// (a test forcing a read onto the lagging cluster, say); "" returns to the
// seeded random choice. It panics on an unknown cluster.
func (s *Server) RouteMultiCluster(id string) {
	if id != "" && s.clusters[id] == nil {
		panic(fmt.Sprintf("prodserver: RouteMultiCluster(%q): no such cluster", id))
	}
	s.mu.Lock()
	s.pinned = id
	s.mu.Unlock()
}

// Counts is what the server has done so far.
func (s *Server) Counts() Counts {
	return Counts{Refused: s.refused.Load(), Throttled: s.throttled.Load(), Unavailable: s.unavailable.Load(), Replicated: s.repl.applied.Load()}
}

// Flush applies every write still pending replication, now, whatever its
// lag, and returns the errors of replication so far (each once).
func (s *Server) Flush(ctx context.Context) error { return s.repl.run(ctx, true) }

// ReplicateDue applies the pending writes whose lag has passed on the
// clock, and returns the errors of replication so far (each once).
func (s *Server) ReplicateDue(ctx context.Context) error { return s.repl.run(ctx, false) }

// Pending is how many row writes wait for replication (to clusters and
// Data Boost replicas).
func (s *Server) Pending() int { return s.repl.pending() }

// resolve finds the request's profile and refuses what it does not allow.
func (s *Server) resolve(id string, write, transaction bool) (AppProfile, error) {
	p, ok := s.Profile(id)
	if !ok {
		return p, s.refuse(unknownProfile(id))
	}
	if write && p.routing == routeDataBoost {
		return p, s.refuse(dataBoostWrite(p))
	}
	// App profiles overview, "Single-row transactions": only a
	// single-cluster profile that allows them may send CheckAndMutateRow
	// and ReadModifyWriteRow; instance.proto's allow_transactional_writes.
	if transaction && (p.routing != routeSingle || !p.transactional) {
		return p, s.refuse(status.Error(codes.FailedPrecondition, msgTransactions))
	}
	return p, nil
}

func (s *Server) refuse(err error) error {
	s.refused.Add(1)
	return err
}

// target is the backend a request with profile p goes to.
func (s *Server) target(p AppProfile) *backend {
	switch p.routing {
	case routeSingle:
		return s.clusters[p.cluster]
	case routeDataBoost:
		return s.boost[p.cluster]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pinned != "" {
		return s.clusters[s.pinned]
	}
	return s.clusters[s.order[s.routeRNG.IntN(len(s.order))]]
}

// cluster is the cluster ID of a cluster backend, "" for a Data Boost
// replica.
func (s *Server) cluster(b *backend) string {
	for id, c := range s.clusters {
		if c == b {
			return id
		}
	}
	return ""
}

// fault decides a data call's fault: Config.Fault first, then the rates.
func (s *Server) fault(c Call, write bool) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := FaultNone
	if s.cfg.Fault != nil {
		f = s.cfg.Fault(c)
	}
	if f == FaultNone && s.cfg.ThrottleRate > 0 && s.throttleRNG.Float64() < s.cfg.ThrottleRate {
		f = FaultThrottle
	}
	if f == FaultNone && write && s.cfg.UnavailableRate > 0 && s.unavailRNG.Float64() < s.cfg.UnavailableRate {
		f = FaultUnavailableAfterApply
	}
	if f == FaultUnavailableAfterApply && !write {
		f = FaultNone
	}
	return f
}

// throttle is the RESOURCE_EXHAUSTED answer, with a google.rpc.RetryInfo
// detail: the Quotas and limits page says requests over a quota fail, and
// google/rpc/error_details.proto's RetryInfo is how a Google API says when
// to retry. The message is the double's.
func (s *Server) throttle() error {
	s.throttled.Add(1)
	st := status.New(codes.ResourceExhausted, "prodserver: request throttled, retry after the RetryInfo delay")
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(s.cfg.RetryDelay)}); err == nil {
		st = d
	}
	return st.Err()
}

// unavailableAfterApply is the UNAVAILABLE answer to a write the backend
// applied: what a client sees when the connection fails after the server
// committed, the reason "Writes" tells to make writes idempotent.
func (s *Server) unavailableAfterApply() error {
	s.unavailable.Add(1)
	return status.Error(codes.Unavailable, "prodserver: connection lost after the write was applied")
}

// nowMicros is the time a server-timestamped cell gets, in whole
// milliseconds. It is real time, as the backends' GC is.
func nowMicros() int64 {
	us := time.Now().UnixMicro()
	return us - us%microsPerMilli
}

// gate keeps an in-process bttest from running a ReadRows while a write
// runs: bttest (v1.58.0) lets a write sort a row's column names in place
// while a read iterates them unlocked (bttest_harness's package doc says
// more). The proxy reads a backend's ReadRows stream to its end before
// answering, so a read never holds the gate waiting for a client.
type gate struct{ mu sync.RWMutex }

var gateWrites = map[string]bool{
	"/google.bigtable.v2.Bigtable/MutateRow":          true,
	"/google.bigtable.v2.Bigtable/MutateRows":         true,
	"/google.bigtable.v2.Bigtable/CheckAndMutateRow":  true,
	"/google.bigtable.v2.Bigtable/ReadModifyWriteRow": true,
}

func (g *gate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if gateWrites[info.FullMethod] {
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	return handler(ctx, req)
}

func (g *gate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	switch {
	case gateWrites[info.FullMethod]:
		g.mu.Lock()
		defer g.mu.Unlock()
	case info.FullMethod == "/google.bigtable.v2.Bigtable/ReadRows":
		g.mu.RLock()
		defer g.mu.RUnlock()
	}
	return handler(srv, ss)
}
