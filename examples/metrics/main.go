// Command metrics shows bttl's metrics on the embedded Bigtable emulator: it
// serves /metrics with promhttp on a loopback port, writes cells with
// several TTLs, moves the clock past most of them (the server's GC, which
// runs on real time, has not collected them), reads them back through bttl,
// and prints a scrape of /metrics: expired-but-not-collected cells and their
// GC lag per family, refusals, TTLs written, the latency bttl adds.
//
//	go run ./examples/metrics
//
// Every read is sampled here (ttlclient.WithShadowSampling(1)) so the
// figures are exact; the default is 1% of reads.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/metrics"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

func main() {
	log.SetOutput(io.Discard) // the emulator logs every GC pass
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "metrics:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		return err
	}
	defer h.Close()

	// One recorder: OpenTelemetry through the global MeterProvider, and
	// Prometheus through the registry it is registered on.
	rec := metrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(rec)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// The audit's gauges are read from the file it writes, as
	// node_exporter's textfile collector reads *.prom files.
	dir, err := os.MkdirTemp("", "bttl-textfile")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	textfile := filepath.Join(dir, "bttl.prom")
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, textfileGatherer(textfile)}, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	client := ttlclient.Wrap(h.Raw, ttlclient.WithClock(h.Clock), ttlclient.WithRecorder(rec),
		ttlclient.WithAdminClient(h.Admin, bttestharness.Project, bttestharness.Instance),
		ttlclient.WithShadowSampling(1), ttlclient.WithShadowConcurrency(8))
	defer client.Close()
	schema := ttlclient.Schema{
		"session": strategy.OneSecond(),
		"clicks":  strategy.DefaultExpiry(48 * time.Hour),
		"doc":     strategy.Sequence(2),
		"meta":    strategy.Unmanaged(),
	}
	if err := h.CreateTable(ctx, "events", schema); err != nil {
		return err
	}
	tbl, err := client.Open(ctx, "events", schema)
	if err != nil {
		return err
	}

	const users = 20
	for u := 0; u < users; u++ {
		m := ttlclient.NewMutation()
		m.SetTTL("session", "token", 30*time.Minute, []byte("t"))
		m.SetTTL("clicks", "promo", time.Hour, []byte("1"))
		m.Set("clicks", "home", bigtable.ServerTime, []byte("2")) // the 48h default
		m.SetTTL("clicks", "checkout", 72*time.Hour, []byte("3"))
		m.SetVersion("doc", "body", int64(u+1), []byte("rev"))
		m.Set("meta", "owner", 1000, []byte("ada"))
		if err := tbl.Apply(ctx, fmt.Sprintf("user#%02d", u), m); err != nil {
			return err
		}
	}
	// A writer breaking the convention: refused, and counted.
	bad := ttlclient.NewMutation()
	bad.Set("session", "token", bigtable.ServerTime, []byte("oops"))
	if err := tbl.Apply(ctx, "user#00", bad); !errors.Is(err, strategy.ErrServerTimestamp) {
		return fmt.Errorf("want a refusal, got %v", err)
	}

	// 50 hours later for the library; the server's GC runs on real time and
	// has collected nothing.
	h.Clock.Advance(50 * time.Hour)
	live := 0
	if err := tbl.ReadRows(ctx, bigtable.PrefixRange("user#"), func(r bigtable.Row) bool {
		live += len(r["clicks"])
		return true
	}); err != nil {
		return err
	}
	for u := 0; u < 5; u++ {
		if _, err := tbl.ReadRow(ctx, fmt.Sprintf("user#%02d", u)); err != nil {
			return err
		}
	}
	const sampledReads = 6
	if err := waitShadowReads(ctx, reg, sampledReads); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d users, read 50h later: %d live clicks cells (the 72h ones); the rest is expired but still stored.\n", users, live)

	// The stock: an audit of the table at the same instant.
	rep, err := audit.Scan(ctx, h.Raw.Open("events"), "events", schema, bigtable.Time(h.Clock.Now()))
	if err != nil {
		return err
	}
	if err := audit.WriteMetricsFile(textfile, []*audit.Report{rep}); err != nil {
		return err
	}

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	fmt.Fprintf(out, "\nscrape of http://%s/metrics (bttl_ series; histogram buckets left out).\n", ln.Addr())
	fmt.Fprintln(out, "bttl_shadow_read_expired_cells_total counts expired cells reads walked past (a cell read twice counts twice);")
	fmt.Fprintln(out, "bttl_audit_expired_not_collected_cells is how many are stored now, as the audit counted them:")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "bttl_") || strings.Contains(line, "_bucket{") {
			continue
		}
		fmt.Fprintln(out, line)
	}
	return sc.Err()
}

// textfileGatherer gathers the metrics of a text-format file, as
// node_exporter's textfile collector does; nothing before the file exists.
func textfileGatherer(path string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(f)
		if err != nil {
			return nil, err
		}
		out := make([]*dto.MetricFamily, 0, len(fams))
		for _, mf := range fams {
			out = append(out, mf)
		}
		return out, nil
	})
}

// waitShadowReads waits until n shadow reads have ended: they run on their
// own goroutines, after the reads that were sampled.
func waitShadowReads(ctx context.Context, reg *prometheus.Registry, n float64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		fams, err := reg.Gather()
		if err != nil {
			return err
		}
		done := 0.0
		for _, f := range fams {
			if f.GetName() == metrics.ShadowReadsTotal || f.GetName() == metrics.ShadowReadsFailedTotal {
				for _, m := range f.GetMetric() {
					done += m.GetCounter().GetValue()
				}
			}
		}
		if done >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for shadow reads: %d of %v ended: %w", int(done), n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
