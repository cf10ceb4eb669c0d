package ttlclient_test

// What turning the client's session data plane off costs (issue 34):
// the raw client with sessions on, the raw client with them off
// (ClientConfig.DisableSession) and ttlclient (which turns them off: its
// interceptor cannot rewrite a session's virtual calls), interleaved in
// one process against one bttest server that serves sessions
// (bttest_harness/sessionserver). See docs/design.md#session-cost.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/bttest_harness/sessionserver"
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/benchloop"
	"github.com/bttl/bttl/ttlclient"
)

// sessionSides are the sides of BenchmarkSessions: on, off, ttl.
var sessionSides = []string{"on", "off", "ttl"}

// BenchmarkSessions: Apply (one row of 10 cells, the 4-family schema) and
// ReadRow (that row) by the raw client with sessions on (side on), with
// them off (off) and by ttlclient (ttl), interleaved. The raw sides read
// with the TTL filter of package filters, built per call at the table's
// clock, so all three send a filter of the same kind (the hand-written
// one, naiveFilter, selects families by regex, which bttest compiles
// again for every cell: it would outweigh the plane). Every client dials the server itself (a
// client given a connection builds no session plane), ttlclient through
// NewClientWithConfig as its users do. Before timing, each side's calls
// are checked to take the plane named; after, on-virtual/op is the
// virtual calls the server served per on call (1: every one on a
// session) and classic/op the classic ones per off and ttl call. The
// server runs in process (server=inprocess: process CPU counts its work
// too) and in a child process (server=child: process CPU is the clients'
// alone).
func BenchmarkSessions(b *testing.B) {
	// Under BIGTABLE_EMULATOR_HOST a client takes a connection and builds
	// no session plane, and the harness would not start the server below.
	b.Setenv("BIGTABLE_EMULATOR_HOST", "")
	b.Run("server=inprocess", func(b *testing.B) {
		sess, err := sessionserver.New(sessionserver.Config{SessionLoad: 1})
		if err != nil {
			b.Fatal(err)
		}
		h, err := startSessionHarness(sess)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		benchSessions(b, h.Addr, h.Clock, sess.Stats)
	})
	// The server in a child process (this test binary, as
	// TestSessionServerChild): the process CPU is then the clients' alone.
	b.Run("server=child", func(b *testing.B) {
		child, err := startSessionChild()
		if err != nil {
			b.Fatal(err)
		}
		defer child.close()
		benchSessions(b, child.addr, bttestharness.NewManualClock(child.now), func() sessionserver.Stats {
			st, err := child.stats()
			if err != nil {
				b.Fatal(err)
			}
			return st
		})
	})
}

// sessionTable is BenchmarkSessions' table, created with the 4-family
// schema (10 cells) on a harness whose server serves sessions.
const sessionTable = "bench-sessions"

func startSessionHarness(sess *sessionserver.Server) (*bttestharness.Harness, error) {
	ctx := context.Background()
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true, ServerOptions: sess.ServerOptions()})
	if err != nil {
		return nil, err
	}
	if err := h.CreateTable(ctx, sessionTable, benchSchemas()[0].schema); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func benchSessions(b *testing.B, addr string, clock *bttestharness.ManualClock, stats func() sessionserver.Stats) {
	ctx := context.Background()
	s := benchSchemas()[0] // 4-family, 10 cells
	table := sessionTable
	dial := []option.ClientOption{
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
	noMetrics := bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}}
	on, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, noMetrics, dial...)
	if err != nil {
		b.Fatal(err)
	}
	defer on.Close()
	offCfg := noMetrics
	offCfg.DisableSession = true
	off, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance, offCfg, dial...)
	if err != nil {
		b.Fatal(err)
	}
	defer off.Close()
	ttl, err := ttlclient.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		ttlclient.ClientConfig{ClientConfig: noMetrics, Options: []ttlclient.ClientOption{ttlclient.WithClock(clock)}}, dial...)
	if err != nil {
		b.Fatal(err)
	}
	defer ttl.Close()
	ttlTbl, err := ttl.Open(ctx, table, s.schema)
	if err != nil {
		b.Fatal(err)
	}
	// serverEnv's mutations read only its harness's clock.
	e := &serverEnv{h: &bttestharness.Harness{Clock: clock}, s: s, raw: on.Open(table), ttl: ttlTbl, ctx: ctx}
	offTbl := off.Open(table)
	// The client moves traffic to sessions once its first configuration
	// poll is back.
	deadline := time.Now().Add(time.Minute)
	for {
		before := stats()
		if _, err := e.raw.ReadRow(ctx, "probe"); err != nil {
			b.Fatal(err)
		}
		if after := stats(); after.VirtualReadRows > before.VirtualReadRows {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("no call on a session after a minute")
		}
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	const key = "row"
	apply := map[string]func(){
		"on":  func() { must(e.raw.Apply(ctx, key, e.rawMutation())) },
		"off": func() { must(offTbl.Apply(ctx, key, e.rawMutation())) },
		"ttl": func() { must(ttlTbl.Apply(ctx, key, e.ttlMutation(len(s.cells)))) },
	}
	h := e.h
	read := func(tbl interface {
		ReadRow(context.Context, string, ...bigtable.ReadOption) (bigtable.Row, error)
	}, opts ...bigtable.ReadOption) func() {
		return func() {
			row, err := tbl.ReadRow(ctx, key, opts...)
			must(err)
			if len(row) == 0 {
				b.Fatal("row not read")
			}
		}
	}
	// As ttlclient builds it for a table whose families are the schema's.
	ttlFilter, err := filters.New(s.schema, filters.WithFamilies(sortedFamilies(s.schema)))
	if err != nil {
		b.Fatal(err)
	}
	filter := func() bigtable.ReadOption { return bigtable.RowFilter(ttlFilter.TTL(bigtable.Time(h.Clock.Now()))) }
	readRow := map[string]func(){
		"on":  func() { read(e.raw, filter())() },
		"off": func() { read(offTbl, filter())() },
		"ttl": read(ttlTbl),
	}
	for _, op := range []struct {
		name  string
		impls map[string]func()
	}{{"Apply", apply}, {"ReadRow", readRow}} {
		checkPlanes(b, stats, op.impls)
		b.Run("op="+op.name, func(b *testing.B) {
			before := stats()
			r := benchloop.Run(b, sessionSides, op.impls)
			d := stats()
			virtual := d.VirtualReadRows + d.VirtualMutateRows - before.VirtualReadRows - before.VirtualMutateRows
			classic := d.ReadRows + d.MutateRow - before.ReadRows - before.MutateRow
			r.ReportEach(b, sessionSides)
			r.ReportRatio(b, "off", "on")
			r.ReportRatio(b, "ttl", "on")
			r.ReportRatio(b, "ttl", "off")
			b.ReportMetric(float64(virtual)/float64(r.N), "on-virtual/op")
			b.ReportMetric(float64(classic)/float64(2*r.N), "classic/op")
		})
	}
}

// checkPlanes runs each side once and fails b unless side on's call took
// a session and the others' the classic RPCs.
func checkPlanes(b *testing.B, stats func() sessionserver.Stats, impls map[string]func()) {
	b.Helper()
	for _, side := range sessionSides {
		before := stats()
		impls[side]()
		after := stats()
		virtual := after.VirtualReadRows + after.VirtualMutateRows - before.VirtualReadRows - before.VirtualMutateRows
		classic := after.ReadRows + after.MutateRow - before.ReadRows - before.MutateRow
		if want := side == "on"; (virtual == 1 && classic == 0) != want || (virtual == 0 && classic == 1) == want {
			b.Fatalf("side %s: %d virtual and %d classic calls", side, virtual, classic)
		}
	}
}

// childEnv set to 1 makes TestSessionServerChild the server of
// BenchmarkSessions/server=child.
const childEnv = "BTTL_SESSIONSERVER_CHILD"

// TestSessionServerChild is not a test: it is the server process of
// BenchmarkSessions/server=child (skipped otherwise). It serves sessions
// on a harness with BenchmarkSessions' table, writes "addr ADDR", answers
// each "stats" line read on stdin with "stats JSON", and ends at stdin's
// end.
func TestSessionServerChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("the server process of BenchmarkSessions/server=child")
	}
	sess, err := sessionserver.New(sessionserver.Config{SessionLoad: 1})
	require.NoError(t, err)
	h, err := startSessionHarness(sess)
	require.NoError(t, err)
	defer h.Close()
	fmt.Println("addr", h.Addr)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "stats" {
			js, err := json.Marshal(sess.Stats())
			require.NoError(t, err)
			fmt.Printf("stats %s\n", js)
		}
	}
}

// sessionChild is a running TestSessionServerChild.
type sessionChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	addr  string
	now   time.Time
}

func startSessionChild() (*sessionChild, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestSessionServerChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", "BIGTABLE_EMULATOR_HOST=")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &sessionChild{cmd: cmd, stdin: stdin, lines: make(chan string), now: time.Now().Truncate(time.Millisecond)}
	go func() {
		defer close(c.lines)
		out := bufio.NewScanner(stdout)
		for out.Scan() {
			c.lines <- out.Text()
		}
	}()
	line, err := c.await("addr ", 30*time.Second)
	if err != nil {
		c.close()
		return nil, err
	}
	c.addr = line
	return c, nil
}

// await is the rest of the child's next line starting with prefix.
func (c *sessionChild) await(prefix string, within time.Duration) (string, error) {
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				return "", fmt.Errorf("session server child %d ended before %q", c.cmd.Process.Pid, prefix)
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return rest, nil
			}
		case <-timeout:
			return "", fmt.Errorf("session server child %d: no %q within %v", c.cmd.Process.Pid, prefix, within)
		}
	}
}

func (c *sessionChild) stats() (sessionserver.Stats, error) {
	var st sessionserver.Stats
	if _, err := io.WriteString(c.stdin, "stats\n"); err != nil {
		return st, err
	}
	js, err := c.await("stats ", 10*time.Second)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal([]byte(js), &st)
}

// close ends the child (stdin's end; killed if it has not exited 10s on).
func (c *sessionChild) close() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range c.lines {
		}
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
