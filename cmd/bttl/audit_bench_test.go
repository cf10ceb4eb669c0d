package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/internal/testenv"
)

// auditBench is the shared setup of BenchmarkAuditPace: one cbtemulator
// holding the table, the built binary, and the files the commands take.
// It lives for the test process (TestMain stops the emulator), so that
// -count repeats interleave the commands without loading again.
var auditBench struct {
	once                sync.Once
	err                 error
	em                  *bttestharness.Emulator
	dir, bin, schema    string
	creds               string
	cells, rows, perRow int
}

func TestMain(m *testing.M) {
	// The in-process server the tests embed (bttest) logs every GC pass
	// through the standard logger; the command itself leaves the logger
	// alone, so the bigtable client's own warnings reach its users.
	log.SetOutput(io.Discard)
	code := m.Run()
	if auditBench.em != nil {
		auditBench.em.Kill()
	}
	if auditBench.dir != "" {
		_ = os.RemoveAll(auditBench.dir)
	}
	os.Exit(code)
}

// setupAuditBench starts the emulator and loads BTTL_AUDIT_BENCH_CELLS
// cells (default 1,000,000) in rows of BTTL_AUDIT_BENCH_PER_ROW cells
// (default 10), 32-byte values, one family. cbt count reads one cell per
// row (its filter is cells_per_row_limit 1 + strip_value): with 1 cell per
// row it receives what the audit does.
func setupAuditBench(b *testing.B) {
	a := &auditBench
	a.once.Do(func() {
		a.cells = 1_000_000
		if s := os.Getenv("BTTL_AUDIT_BENCH_CELLS"); s != "" {
			if a.cells, a.err = strconv.Atoi(s); a.err != nil {
				return
			}
		}
		a.perRow = 10
		if s := os.Getenv("BTTL_AUDIT_BENCH_PER_ROW"); s != "" {
			if a.perRow, a.err = strconv.Atoi(s); a.err != nil {
				return
			}
		}
		a.rows = a.cells / a.perRow
		if a.dir, a.err = os.MkdirTemp("", "bttl-audit-bench"); a.err != nil {
			return
		}
		a.bin = filepath.Join(a.dir, "bttl")
		if out, err := exec.Command("go", "build", "-o", a.bin, ".").CombinedOutput(); err != nil {
			a.err = fmt.Errorf("go build: %v: %s", err, out)
			return
		}
		a.schema = filepath.Join(a.dir, "schema.yaml")
		a.creds = filepath.Join(a.dir, "no-credentials.json")
		if a.err = os.WriteFile(a.schema, []byte("tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n"), 0o600); a.err != nil {
			return
		}
		if a.em, a.err = bttestharness.StartEmulator(context.Background()); a.err != nil {
			return
		}
		a.err = loadAuditBench(a.em.Addr, a.rows, a.perRow)
	})
	if a.err != nil {
		b.Fatal(a.err)
	}
}

func loadAuditBench(addr string, rows, perRow int) error {
	ctx := context.Background()
	os.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	defer os.Unsetenv("BIGTABLE_EMULATOR_HOST")
	ac, err := bigtable.NewAdminClient(ctx, "p", "i")
	if err != nil {
		return err
	}
	defer ac.Close()
	dc, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	if err != nil {
		return err
	}
	defer dc.Close()
	if err := ac.CreateTable(ctx, "events"); err != nil {
		return err
	}
	if err := ac.CreateColumnFamily(ctx, "events", "clicks"); err != nil {
		return err
	}
	tbl := dc.Open("events")
	now := bigtable.Now().TruncateToMilliseconds()
	value := []byte("0123456789abcdef0123456789abcdef")
	const batch = 1000
	for lo := 0; lo < rows; lo += batch {
		var keys []string
		var muts []*bigtable.Mutation
		for r := lo; r < min(lo+batch, rows); r++ {
			m := bigtable.NewMutation()
			for c := 0; c < perRow; c++ {
				m.Set("clicks", fmt.Sprintf("c%02d", c), now, value)
			}
			keys = append(keys, fmt.Sprintf("user#%08d", r))
			muts = append(muts, m)
		}
		errs, err := tbl.ApplyBulk(ctx, keys, muts)
		if err != nil {
			return err
		}
		for _, e := range errs {
			if e != nil {
				return e
			}
		}
	}
	return nil
}

// BenchmarkAuditPace (issue 29, acceptance 3) measures the wall time of a
// 1-worker bttl audit of the table against the real cbt on the same
// cbtemulator: audit without byte figures (values stripped) against
// `cbt count`, which strips values too, and audit -bytes against
// `cbt read`, output to /dev/null for all. Each iteration runs the four
// commands once, in turn, so that they share the machine's state; it
// reports each command's seconds (wall, its own CPU, and the emulator's
// CPU while it ran: the server's share) and the two ratios per iteration. Not in
// the default run (it needs cbt and cbtemulator, and loads 1,000,000
// cells):
//
//	go test -run '^$' -bench BenchmarkAuditPace -benchtime 1x -count 8 ./cmd/bttl | tee audit.txt
//	benchstat audit.txt
func BenchmarkAuditPace(b *testing.B) {
	if _, err := os.Stat(cbtPath); err != nil {
		testenv.Missing(b, testenv.CBT, err)
	}
	if _, err := bttestharness.FindEmulator(); err != nil {
		testenv.Missing(b, testenv.CBTEmulator, err)
	}
	setupAuditBench(b)
	a := &auditBench
	bttlCmd := func(extra ...string) []string {
		return append([]string{a.bin, "-project", "p", "-instance", "i", "-schema", a.schema, "audit", "-table", "events", "-progress", "0"}, extra...)
	}
	cbtCmd := func(verb string) []string {
		return []string{cbtPath, "-project", "p", "-instance", "i", "-creds", a.creds, verb, "events"}
	}
	cmds := []struct {
		unit string
		argv []string
	}{
		{"bttl-audit-s", bttlCmd()},
		{"cbt-count-s", cbtCmd("count")},
		{"bttl-audit-bytes-s", bttlCmd("-bytes")},
		{"cbt-read-s", cbtCmd("read")},
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	sums, cpu, srv := make([]time.Duration, len(cmds)), make([]time.Duration, len(cmds)), make([]time.Duration, len(cmds))
	serverCPU := func() time.Duration {
		d, err := a.em.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	var ratioCount, ratioRead float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		took := make([]time.Duration, len(cmds))
		for j, c := range cmds {
			cmd := exec.Command(c.argv[0], c.argv[1:]...)
			cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+a.em.Addr)
			cmd.Stdout, cmd.Stderr = devnull, devnull
			s0, start := serverCPU(), time.Now()
			if err := cmd.Run(); err != nil {
				b.Fatalf("%v: %v", c.argv, err)
			}
			took[j] = time.Since(start)
			srv[j] += serverCPU() - s0
			sums[j] += took[j]
			cpu[j] += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		ratioCount += took[0].Seconds() / took[1].Seconds()
		ratioRead += took[2].Seconds() / took[3].Seconds()
	}
	for j, c := range cmds {
		b.ReportMetric(sums[j].Seconds()/float64(b.N), c.unit)
		b.ReportMetric(cpu[j].Seconds()/float64(b.N), strings.TrimSuffix(c.unit, "-s")+"-cpu-s")
		b.ReportMetric(srv[j].Seconds()/float64(b.N), strings.TrimSuffix(c.unit, "-s")+"-server-cpu-s")
	}
	b.ReportMetric(ratioCount/float64(b.N), "audit/count")
	b.ReportMetric(ratioRead/float64(b.N), "audit-bytes/read")
}

// BenchmarkAuditProfile runs the audit of BenchmarkAuditPace's table in
// this process (the command's run, values stripped; -bytes with
// BTTL_AUDIT_BENCH_BYTES=1), so that -cpuprofile shows where the client's
// CPU goes:
//
//	go test ./cmd/bttl -run '^$' -bench BenchmarkAuditProfile -benchtime 3x -cpuprofile audit.cpu
//	go tool pprof -top -cum cmd/bttl.test audit.cpu
func BenchmarkAuditProfile(b *testing.B) {
	if _, err := bttestharness.FindEmulator(); err != nil {
		testenv.Missing(b, testenv.CBTEmulator, err)
	}
	setupAuditBench(b)
	a := &auditBench
	b.Setenv("BIGTABLE_EMULATOR_HOST", a.em.Addr)
	args := []string{"-project", "p", "-instance", "i", "-schema", a.schema, "audit", "-table", "events", "-progress", "0"}
	if os.Getenv("BTTL_AUDIT_BENCH_BYTES") == "1" {
		args = append(args, "-bytes")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if code := run(context.Background(), args, nil, io.Discard, io.Discard); code != exitOK {
			b.Fatalf("bttl %v: exit %d", args, code)
		}
	}
}

// BenchmarkAuditVsReadRows (issue 35's audit pace) measures, in one
// process against one cbtemulator holding BenchmarkAuditPace's table, the
// wall time of the whole `bttl audit` command (values stripped, 1 worker:
// dial, SampleRowKeys, the scan, the GC rules' read, the report) against
// the least an audit must receive: a plain client's ReadRows of the same
// table with bigtable.StripValueFilter, one stream, its client dialled and
// closed in the timing as the command's is. A third side is the same audit
// with -progress (as on a terminal), which keeps the scan engine's default
// cut of at least 64 key ranges; without progress or a checkpoint the
// command reads 4 ranges per worker. Each iteration runs the three, the
// order rotating, and reports each side's seconds, its own CPU (user and
// system of this process while it ran) and the emulator's CPU, and the
// ratios to ReadRows (target: audit/readrows at most 1.2):
//
//	BTTL_AUDIT_BENCH_CELLS=200000 go test -run '^$' -bench BenchmarkAuditVsReadRows -benchtime 1x -count 10 ./cmd/bttl | tee audit-vs-readrows.txt
//	benchstat audit-vs-readrows.txt
func BenchmarkAuditVsReadRows(b *testing.B) {
	if _, err := bttestharness.FindEmulator(); err != nil {
		testenv.Missing(b, testenv.CBTEmulator, err)
	}
	setupAuditBench(b)
	a := &auditBench
	b.Setenv("BIGTABLE_EMULATOR_HOST", a.em.Addr)
	audit := func(extra ...string) func() {
		args := append([]string{"-project", "p", "-instance", "i", "-schema", a.schema, "audit", "-table", "events"}, extra...)
		return func() {
			if code := run(context.Background(), args, nil, io.Discard, io.Discard); code != exitOK {
				b.Fatalf("bttl %v: exit %d", args, code)
			}
		}
	}
	readRows := func() {
		ctx := context.Background()
		c, err := bigtable.NewClientWithConfig(ctx, "p", "i", bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cells := 0
		err = c.Open("events").ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
			for _, items := range r {
				cells += len(items)
			}
			return true
		}, bigtable.RowFilter(bigtable.StripValueFilter()))
		if err != nil {
			b.Fatal(err)
		}
		if cells != a.rows*a.perRow {
			b.Fatalf("ReadRows received %d cells, want %d", cells, a.rows*a.perRow)
		}
	}
	sides := []struct {
		name string
		f    func()
	}{
		{"readrows-strip", readRows},
		{"bttl-audit", audit("-progress", "0")},
		{"bttl-audit-progress", audit("-progress", "1h")},
	}
	self := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	serverCPU := func() time.Duration {
		d, err := a.em.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	wall, cpu, srv := make([]time.Duration, len(sides)), make([]time.Duration, len(sides)), make([]time.Duration, len(sides))
	ratios := make([]float64, len(sides))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		took := make([]time.Duration, len(sides))
		for k := range sides {
			j := (k + i) % len(sides) // rotate which goes first
			c0, s0, start := self(), serverCPU(), time.Now()
			sides[j].f()
			took[j] = time.Since(start)
			cpu[j] += self() - c0
			srv[j] += serverCPU() - s0
			wall[j] += took[j]
		}
		for j := range sides {
			ratios[j] += took[j].Seconds() / took[0].Seconds()
		}
	}
	for j, s := range sides {
		b.ReportMetric(wall[j].Seconds()/float64(b.N), s.name+"-s")
		b.ReportMetric(cpu[j].Seconds()/float64(b.N), s.name+"-cpu-s")
		b.ReportMetric(srv[j].Seconds()/float64(b.N), s.name+"-server-cpu-s")
	}
	b.ReportMetric(ratios[1]/float64(b.N), "audit/readrows")
	b.ReportMetric(ratios[2]/float64(b.N), "audit-progress/readrows")
}
