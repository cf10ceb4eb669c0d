package main

import (
	"context"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

func TestZZProbe(t *testing.T) {
	em := startCBTEmulatorProcess(t)
	if err := loadAuditBench(em.Addr, 20000, 10); err != nil {
		t.Fatal(err)
	}
	schema := writeFile(t, "s.yaml", "tables: {events: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	t.Setenv("BIGTABLE_EMULATOR_HOST", em.Addr)
	f, _ := os.Create("/tmp/audit.prof")
	pprof.StartCPUProfile(f)
	s := time.Now()
	for i := 0; i < 3; i++ {
		code := run(context.Background(), []string{"-project", "p", "-instance", "i", "-schema", schema, "audit", "-table", "events", "-progress", "0"}, strings.NewReader(""), io.Discard, io.Discard)
		if code != 0 {
			t.Fatal(code)
		}
	}
	pprof.StopCPUProfile()
	t.Logf("%s", time.Since(s))
}
