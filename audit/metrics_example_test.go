package audit_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
)

// The figures of a scan as Prometheus gauges: the stock of expired data
// still stored, next to what is live. Write them where node_exporter's
// textfile collector reads (WriteMetricsFile), or anywhere (WriteMetrics).
func ExampleWriteMetrics() {
	rep := scanExample()
	var out strings.Builder
	if err := audit.WriteMetrics(&out, []*audit.Report{rep}); err != nil {
		panic(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "bttl_audit_expired_not_collected_cells") || strings.HasPrefix(line, "bttl_audit_live_cells") {
			fmt.Println(line)
		}
	}
	// Output:
	// bttl_audit_expired_not_collected_cells{family="clicks",strategy="default-expiry",table="events"} 2
	// bttl_audit_live_cells{family="clicks",strategy="default-expiry",table="events"} 1
}

// WriteMetricsFile replaces the file atomically: a collector never reads
// half of it.
func ExampleWriteMetricsFile() {
	rep := scanExample()
	dir, err := os.MkdirTemp("", "textfile")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "bttl.prom") // node_exporter reads *.prom
	if err := audit.WriteMetricsFile(path, []*audit.Report{rep}); err != nil {
		panic(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.Contains(string(raw), `bttl_audit_expired_not_collected_cells{family="clicks",strategy="default-expiry",table="events"} 2`))
	// Output:
	// true
}

// scanExample scans a table of three clicks cells, two of them expired.
func scanExample() *audit.Report {
	ctx := context.Background()
	// NoGC: the emulator would otherwise collect the expired cells at once.
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	schema := strategy.Schema{"clicks": strategy.DefaultExpiry(24 * time.Hour)}
	if err := h.CreateTable(ctx, "events", schema); err != nil {
		panic(err)
	}
	now := h.Clock.Now()
	m := bigtable.NewMutation()
	m.Set("clicks", "c1", bigtable.Time(now.Add(-48*time.Hour)), []byte("expired"))
	m.Set("clicks", "c2", bigtable.Time(now.Add(-30*time.Hour)), []byte("expired"))
	m.Set("clicks", "c3", bigtable.Time(now.Add(-time.Hour)), []byte("live"))
	tbl := h.Raw.Open("events")
	if err := tbl.Apply(ctx, "user#1", m); err != nil {
		panic(err)
	}
	rep, err := audit.Scan(ctx, tbl, "events", schema, bigtable.Time(now))
	if err != nil {
		panic(err)
	}
	return rep
}
