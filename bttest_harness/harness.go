package bttestharness

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Project and Instance name the emulated instance.
const (
	Project  = "bttl-project"
	Instance = "bttl-instance"
)

// Harness is a running Bigtable emulator with clients on it: a ttlclient
// client whose tables use Clock, a raw data client to inspect what is really
// stored, and an admin client.
type Harness struct {
	// Addr is the emulator's address.
	Addr string
	// Server is the in-process server, nil when BIGTABLE_EMULATOR_HOST
	// named another one.
	Server *bttest.Server
	// Raw reads and writes past the library: what is physically stored.
	Raw *bigtable.Client
	// Admin creates tables and sets GC rules.
	Admin *bigtable.AdminClient
	// Client is the ttlclient over Raw; its tables use Clock.
	Client *ttlclient.Client
	// Clock is the time the library sees. It starts at the real time (the
	// servers' GC runs on real time), truncated to the millisecond.
	Clock *ManualClock

	noGC      bool
	conn      *grpc.ClientConn
	closeOnce sync.Once
	closeErr  error
}

// Config adjusts Start.
type Config struct {
	// ServerOptions are given to the in-process server (interceptors for
	// fault injection, say). Ignored when BIGTABLE_EMULATOR_HOST is set.
	ServerOptions []grpc.ServerOption
	// Addr, when set, is an emulator to use instead of starting one or
	// reading BIGTABLE_EMULATOR_HOST.
	Addr string
	// DialOptions are added to the clients' connection (client
	// interceptors, say).
	DialOptions []grpc.DialOption
	// NoGC makes CreateTable leave the server's garbage collection off, so
	// that every expired or excess cell stays stored: for tests of what
	// reads hide, which GC would otherwise race. The rules are still on the
	// families. It holds on the emulators (bttest and cbtemulator start
	// collecting, for every table, only once some family's rule is
	// modified) while nothing else modifies a rule on the same server; real
	// Bigtable collects regardless.
	NoGC bool
	// ClientOptions are added to Client's options (ttlclient.Wrap's), after
	// its clock and admin client: the bounds of its pools, say.
	ClientOptions []ttlclient.ClientOption
}

// Start starts an in-process bttest server, or connects to the emulator that
// BIGTABLE_EMULATOR_HOST names, and returns clients on it. Close releases
// everything.
func Start(ctx context.Context) (*Harness, error) {
	return StartWithConfig(ctx, Config{})
}

// StartWithConfig is Start with options.
func StartWithConfig(ctx context.Context, cfg Config) (*Harness, error) {
	h := &Harness{Clock: NewManualClock(time.Now().Truncate(time.Millisecond)), noGC: cfg.NoGC}
	h.Addr = cfg.Addr
	if h.Addr == "" {
		h.Addr = os.Getenv("BIGTABLE_EMULATOR_HOST")
	}
	if h.Addr == "" {
		opts := append(append([]grpc.ServerOption(nil), cfg.ServerOptions...), newReadWriteGate().serverOptions()...)
		srv, err := bttest.NewServer("127.0.0.1:0", opts...)
		if err != nil {
			return nil, bttlerr.Wrap(err, "start bttest server")
		}
		h.Server, h.Addr = srv, srv.Addr
	}
	// bttl's interceptor (ttlclient.DialOptions), as ttlclient.NewClient
	// installs it: Table.API and reads with options need it.
	dial := append(append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, ttlclient.DialOptions()...), cfg.DialOptions...)
	conn, err := grpc.NewClient(h.Addr, dial...)
	if err != nil {
		h.Close()
		return nil, bttlerr.Wrap(err, "dial emulator %s", h.Addr)
	}
	h.conn = conn
	// Built-in metrics would try to export to Cloud Monitoring.
	btcfg := bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}
	h.Raw, err = bigtable.NewClientWithConfig(ctx, Project, Instance, btcfg, option.WithGRPCConn(conn))
	if err != nil {
		h.Close()
		return nil, bttlerr.Wrap(err, "data client")
	}
	h.Admin, err = bigtable.NewAdminClient(ctx, Project, Instance, option.WithGRPCConn(conn))
	if err != nil {
		h.Close()
		return nil, bttlerr.Wrap(err, "admin client")
	}
	h.Client = ttlclient.Wrap(h.Raw, append([]ttlclient.ClientOption{ttlclient.WithClock(h.Clock), ttlclient.WithAdminClient(h.Admin, Project, Instance)}, cfg.ClientOptions...)...)
	return h, nil
}

// New starts a harness for a test and closes it when the test ends.
func New(tb testing.TB) *Harness {
	tb.Helper()
	h, err := Start(context.Background())
	if err != nil {
		tb.Fatalf("bttestharness: %v", err)
	}
	tb.Cleanup(func() { _ = h.Close() })
	return h
}

// Close closes the clients (Client first, which stops and waits for its
// background work) and stops the in-process server.
func (h *Harness) Close() error {
	h.closeOnce.Do(func() {
		var errs []error
		// The clients share one connection: the first to close it makes the
		// others report Canceled, which is not a failure.
		keep := func(err error) {
			if err != nil && status.Code(err) != codes.Canceled {
				errs = append(errs, err)
			}
		}
		// First the library's client: it stops its background work (shadow
		// reads, time-to-idle refreshes) while the server still answers.
		if h.Client != nil {
			keep(h.Client.Close())
		}
		if h.Admin != nil {
			keep(h.Admin.Close())
		}
		if h.Raw != nil {
			keep(h.Raw.Close())
		}
		if h.conn != nil {
			keep(h.conn.Close())
		}
		if h.Server != nil {
			h.Server.Close()
		}
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}

// CreateTable creates table with one family per schema entry, each carrying
// exactly the GC rule its policy needs (none for unmanaged families), and
// has the server collect by those rules unless Config.NoGC is set. An
// existing table of that name is deleted first, so runs against a shared
// emulator start clean.
func (h *Harness) CreateTable(ctx context.Context, table string, schema strategy.Schema) error {
	if err := schema.Validate(); err != nil {
		return err
	}
	if err := h.Admin.DeleteTable(ctx, table); err != nil && status.Code(err) != codes.NotFound {
		return bttlerr.Wrap(err, "delete table %q", table)
	}
	fams := make(map[string]bigtable.Family, len(schema))
	for fam, p := range schema {
		fams[fam] = bigtable.Family{GCPolicy: p.GCPolicy()}
	}
	if err := h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: table, ColumnFamilies: fams}); err != nil {
		return bttlerr.Wrap(err, "create table %q", table)
	}
	// bttest starts its GC loop only when a GC rule is modified, not when a
	// table is created with one: set each rule again so GC really runs.
	if h.noGC {
		return nil
	}
	for fam, p := range schema {
		if err := h.Admin.SetGCPolicy(ctx, table, fam, p.GCPolicy()); err != nil {
			return bttlerr.Wrap(err, "set GC rule of %q", fam)
		}
	}
	return nil
}

// Table creates table for schema and opens it through the library.
func (h *Harness) Table(ctx context.Context, table string, schema strategy.Schema, opts ...ttlclient.TableOption) (*ttlclient.Table, error) {
	if err := h.CreateTable(ctx, table, schema); err != nil {
		return nil, err
	}
	return h.Client.Open(ctx, table, schema, opts...)
}

// MustTable is Table for tests: it fails tb on error.
func (h *Harness) MustTable(tb testing.TB, table string, schema strategy.Schema, opts ...ttlclient.TableOption) *ttlclient.Table {
	tb.Helper()
	tbl, err := h.Table(context.Background(), table, schema, opts...)
	if err != nil {
		tb.Fatalf("bttestharness: %v", err)
	}
	return tbl
}

// Stored reads row with the raw client, unfiltered: every cell physically
// stored, including expired cells GC has not collected yet. A missing row
// is nil.
func (h *Harness) Stored(ctx context.Context, table, row string) (bigtable.Row, error) {
	return h.Raw.Open(table).ReadRow(ctx, row)
}

// ManualClock is a clock that moves only when told. Safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock reading start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now is the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// DataClient is a data client on a connection of its own to the harness's
// server. Close closes both.
type DataClient struct {
	*bigtable.Client
	conn *grpc.ClientConn
}

// Close closes the client and its connection.
func (d *DataClient) Close() error {
	err := d.Client.Close()
	if cerr := d.conn.Close(); cerr != nil && status.Code(cerr) != codes.Canceled {
		err = errors.Join(err, cerr)
	}
	return err
}

// DialDataClient dials the harness's server again with opts (a wire
// guard's DialOptions, say) and returns a plain data client on that
// connection: every call it makes passes the connection's interceptors, on
// the in-process server and on cbtemulator alike (a dialled connection is
// how an interceptor reaches a client under an emulator, where
// option.WithGRPCDialOption is ignored). Sessions are disabled, as a
// guarded client needs. The caller closes it.
func (h *Harness) DialDataClient(ctx context.Context, opts ...grpc.DialOption) (*DataClient, error) {
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(h.Addr, dial...)
	if err != nil {
		return nil, bttlerr.Wrap(err, "dial emulator %s", h.Addr)
	}
	c, err := bigtable.NewClientWithConfig(ctx, Project, Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true}, option.WithGRPCConn(conn))
	if err != nil {
		_ = conn.Close()
		return nil, bttlerr.Wrap(err, "data client")
	}
	return &DataClient{Client: c, conn: conn}, nil
}
