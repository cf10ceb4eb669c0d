package changestreams

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"
	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// Defaults of Config.
const (
	DefaultProject  = "project"
	DefaultInstance = "instance"
	DefaultCluster  = "cluster-a"
	// DefaultHeartbeat is the heartbeat interval when a request names none:
	// "If specified, the duration between Heartbeat messages on the stream.
	// Otherwise, defaults to 5 seconds." (ReadChangeStreamRequest.heartbeat_duration)
	DefaultHeartbeat = 5 * time.Second
)

// Clock tells commit times. *bttestharness.ManualClock and strategy.Clock
// implementations satisfy it. It must not go backwards: later commits get
// later (or equal) times, which the watermarks rely on.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Config describes the server.
type Config struct {
	// Project and Instance name the tables (default DefaultProject,
	// DefaultInstance).
	Project, Instance string
	// Cluster is every user change's source_cluster_id (default
	// DefaultCluster).
	Cluster string
	// Clock gives commit times and watermarks; nil is real time.
	Clock Clock
	// SplitKeys are each table's initial partition boundaries: keys k1 <
	// k2 < ... make partitions ["",k1), [k1,k2), ..., [kn,"").
	SplitKeys []string
	// Tables, when not empty, are the IDs of the only tables whose
	// changes are recorded; the others' writes are applied and recorded
	// nowhere (their streams stay empty). A long test writing much to
	// side tables (a consumer's store, a timer index) then keeps no log of
	// them. Empty: every table's changes are recorded.
	Tables []string
	// ChunkBytes, when positive, sends every change one MutationChunk per
	// message and chunks SetCell values longer than ChunkBytes, so
	// consumers meet CONTINUATION messages and chunked values.
	ChunkBytes int
}

// Server is a Bigtable server with change streams: the data API and the
// table admin calls tests need, forwarded to an in-process bttest backend,
// plus GenerateInitialChangeStreamPartitions and ReadChangeStream serving
// what it recorded. See the package doc.
type Server struct {
	// Addr is the server's address: dial it like an emulator.
	Addr string

	cfg     Config
	clock   Clock
	grpc    *grpc.Server
	backend *bttest.Server
	// backendLis and memLis are in-memory listeners: the backend's, and
	// the server's for Dial.
	backendLis, memLis *bufconn.Listener
	conn               *grpc.ClientConn
	data               btpb.BigtableClient
	admin              btapb.BigtableTableAdminClient
	client             *bigtable.Client // reads the backend for RunGC

	// mu orders every accepted write with its record: the log's order is
	// the order the backend applied them in.
	mu     sync.Mutex
	tables map[string]*table // by full table name
	nextID int
	drop   chan struct{} // closed and replaced by DropStreams

	closeOnce sync.Once
}

// record is one change in a table's log, at position seq (1-based).
type record struct {
	seq    int64
	key    []byte
	commit time.Time
	gc     bool
	muts   []*btpb.Mutation
}

// inst is one incarnation of a partition: created at log position created,
// closed (split or merged) at closed, or open (closed < 0).
type inst struct {
	id              int
	start, end      string
	created, closed int64
	children        []*inst
}

type table struct {
	records []*record
	insts   []*inst
	rules   map[string]*btapb.GcRule // the families' GC rules, kept here
	// stream is the table's change stream configuration (nil: disabled),
	// kept here: bttest keeps none.
	stream *btapb.ChangeStreamConfig
	// generated is the partition GenerateInitialChangeStreamPartitions
	// last returned for each range (start + "\x00" + end).
	generated map[string]*inst
	// unrecorded: Config.Tables leaves this table out; its changes are
	// not logged.
	unrecorded bool
	// changed is closed and replaced on every change of this table, so a
	// write to another table (a consumer's checkpoint, a timer index)
	// wakes none of this table's streams.
	changed chan struct{}
}

// Start starts a bttest backend and the server on a loopback port.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Project == "" {
		cfg.Project = DefaultProject
	}
	if cfg.Instance == "" {
		cfg.Instance = DefaultInstance
	}
	if cfg.Cluster == "" {
		cfg.Cluster = DefaultCluster
	}
	if !sort.StringsAreSorted(cfg.SplitKeys) {
		return nil, fmt.Errorf("changestreams: split keys %q not sorted", cfg.SplitKeys)
	}
	s := &Server{cfg: cfg, clock: cfg.Clock, tables: map[string]*table{}, drop: make(chan struct{})}
	if s.clock == nil {
		s.clock = realClock{}
	}
	var err error
	// The backend is reached in memory: a forwarded call costs no
	// syscalls nor kernel wake-ups, which dominate on a loaded machine.
	s.backendLis = bufconn.Listen(bufSize)
	if s.backend, err = bttest.NewServerWithListener(s.backendLis); err != nil {
		return nil, err
	}
	if s.conn, err = dialBuf(s.backendLis); err != nil {
		s.backendLis.Close()
		s.backend.Close()
		return nil, err
	}
	s.data = btpb.NewBigtableClient(s.conn)
	s.admin = btapb.NewBigtableTableAdminClient(s.conn)
	// No client-side metrics: their exporter would call Cloud Monitoring
	// on the backend's connection every minute, and log its refusal.
	if s.client, err = bigtable.NewClientWithConfig(ctx, cfg.Project, cfg.Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}, option.WithGRPCConn(s.conn)); err != nil {
		s.conn.Close()
		s.backendLis.Close()
		s.backend.Close()
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.conn.Close()
		s.backendLis.Close()
		s.backend.Close()
		return nil, err
	}
	s.Addr = lis.Addr().String()
	s.grpc = grpc.NewServer()
	btpb.RegisterBigtableServer(s.grpc, &dataServer{s: s})
	btapb.RegisterBigtableTableAdminServer(s.grpc, &adminServer{s: s})
	s.memLis = bufconn.Listen(bufSize)
	go s.grpc.Serve(lis)
	go s.grpc.Serve(s.memLis)
	return s, nil
}

// bufSize is each in-memory connection's buffer.
const bufSize = 1 << 20

func dialBuf(l *bufconn.Listener) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///changestreams-in-memory",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// Dial returns a connection to the server held in memory: the same
// server as Addr, without the loopback network, so a test making many
// calls does not wait on the kernel for each. The caller closes it.
func (s *Server) Dial() (*grpc.ClientConn, error) { return dialBuf(s.memLis) }

// Close stops the server (ending open streams) and the backend.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.grpc.Stop()
		s.client.Close()
		s.conn.Close()
		// bttest does not close a listener it was given, and its Close
		// waits for Serve, which returns once the listener is closed.
		s.backendLis.Close()
		s.backend.Close()
	})
}

func (s *Server) fullName(tableID string) string {
	return fmt.Sprintf("projects/%s/instances/%s/tables/%s", s.cfg.Project, s.cfg.Instance, tableID)
}

// tableLocked returns the table's state, creating it with the initial
// partitions. s.mu is held.
func (s *Server) tableLocked(name string) *table {
	t, ok := s.tables[name]
	if ok {
		return t
	}
	t = &table{rules: map[string]*btapb.GcRule{}, generated: map[string]*inst{}, changed: make(chan struct{})}
	if len(s.cfg.Tables) > 0 {
		t.unrecorded = true
		for _, id := range s.cfg.Tables {
			t.unrecorded = t.unrecorded && s.fullName(id) != name
		}
	}
	bounds := append([]string{""}, s.cfg.SplitKeys...)
	for i, b := range bounds {
		end := ""
		if i+1 < len(bounds) {
			end = bounds[i+1]
		}
		t.insts = append(t.insts, s.newInst(b, end, 0))
	}
	s.tables[name] = t
	return t
}

func (s *Server) newInst(start, end string, at int64) *inst {
	s.nextID++
	return &inst{id: s.nextID, start: start, end: end, created: at, closed: -1}
}

// notifyLocked wakes every stream of t. s.mu is held.
func (t *table) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// appendLocked records a change. s.mu is held.
func (s *Server) appendLocked(t *table, key []byte, gc bool, commit time.Time, muts []*btpb.Mutation) {
	if t.unrecorded {
		return
	}
	t.records = append(t.records, &record{seq: int64(len(t.records)) + 1, key: key, commit: commit, gc: gc, muts: muts})
	t.notifyLocked()
}

// Split splits the open partition of table containing key at key, as
// production does when a tablet splits: the parent's streams end with
// CloseStream naming both children.
func (s *Server) Split(tableID, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tableLocked(s.fullName(tableID))
	for _, in := range t.insts {
		if in.closed < 0 && in.start < key && (in.end == "" || key < in.end) {
			at := int64(len(t.records))
			in.closed = at
			a, b := s.newInst(in.start, key, at), s.newInst(key, in.end, at)
			in.children = []*inst{a, b}
			t.insts = append(t.insts, a, b)
			t.notifyLocked()
			return nil
		}
	}
	return fmt.Errorf("changestreams: no open partition of %s splits at %q", tableID, key)
}

// Merge merges the two open partitions of table that meet at key.
func (s *Server) Merge(tableID, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tableLocked(s.fullName(tableID))
	var left, right *inst
	for _, in := range t.insts {
		if in.closed < 0 && in.end == key && key != "" {
			left = in
		}
		if in.closed < 0 && in.start == key {
			right = in
		}
	}
	if left == nil || right == nil {
		return fmt.Errorf("changestreams: no two open partitions of %s meet at %q", tableID, key)
	}
	at := int64(len(t.records))
	child := s.newInst(left.start, right.end, at)
	left.closed, right.closed = at, at
	left.children, right.children = []*inst{child}, []*inst{child}
	t.insts = append(t.insts, child)
	t.notifyLocked()
	return nil
}

// Partitions returns table's open partitions as [start, end) pairs.
func (s *Server) Partitions(tableID string) [][2]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][2]string
	for _, in := range s.tableLocked(s.fullName(tableID)).open() {
		out = append(out, [2]string{in.start, in.end})
	}
	return out
}

func (t *table) open() []*inst {
	var out []*inst
	for _, in := range t.insts {
		if in.closed < 0 {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// DropStreams ends every open ReadChangeStream with UNAVAILABLE, as a
// dropped connection does.
func (s *Server) DropStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.drop)
	s.drop = make(chan struct{})
}

// Records returns how many changes (user and GC) table's log holds.
func (s *Server) Records(tableID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tableLocked(s.fullName(tableID)).records)
}

// token encodes a position: the partition incarnation and the log position
// after which its stream resumes. Opaque to clients ("An encoded position
// in the stream to restart reading from", StreamContinuationToken.token).
func token(id int, seq int64) string { return strconv.Itoa(id) + "." + strconv.FormatInt(seq, 10) }

func parseToken(s string) (id int, seq int64, err error) {
	a, b, ok := strings.Cut(s, ".")
	if ok {
		if id, err = strconv.Atoi(a); err == nil {
			if seq, err = strconv.ParseInt(b, 10, 64); err == nil {
				return id, seq, nil
			}
		}
	}
	return 0, 0, status.Errorf(codes.InvalidArgument, "invalid continuation token %q", s)
}

func rangeOf(sp *btpb.StreamPartition) (start, end string, err error) {
	rr := sp.GetRowRange()
	switch k := rr.GetStartKey().(type) {
	case nil:
	case *btpb.RowRange_StartKeyClosed:
		start = string(k.StartKeyClosed)
	default:
		// "[start_key_closed, end_key_open)" (StreamPartition.row_range).
		return "", "", status.Errorf(codes.InvalidArgument, "partition start must be start_key_closed")
	}
	switch k := rr.GetEndKey().(type) {
	case nil:
	case *btpb.RowRange_EndKeyOpen:
		end = string(k.EndKeyOpen)
	default:
		return "", "", status.Errorf(codes.InvalidArgument, "partition end must be end_key_open")
	}
	return start, end, nil
}

func partitionPB(start, end string) *btpb.StreamPartition {
	rr := &btpb.RowRange{StartKey: &btpb.RowRange_StartKeyClosed{StartKeyClosed: []byte(start)}}
	if end != "" {
		rr.EndKey = &btpb.RowRange_EndKeyOpen{EndKeyOpen: []byte(end)}
	}
	return &btpb.StreamPartition{RowRange: rr}
}

func inRange(key []byte, start, end string) bool {
	k := string(key)
	return k >= start && (end == "" || k < end)
}
