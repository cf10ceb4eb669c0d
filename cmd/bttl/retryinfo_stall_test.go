package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/bttest_harness/prodserver"
)

// A RESOURCE_EXHAUSTED whose RetryInfo asks for an hour holds every scan
// worker inside its row callback, where -stall does not look: the
// command must not sit there for the hour (no -timeout given). The hold
// is at most -stall; the refused ReadRows' own retry is cut by -stall, and
// the read once more from its last row finds the server answering.
func TestLongRetryInfoDoesNotHoldTheScanPastTheStall(t *testing.T) {
	first := true
	srv := prodserver.New(t, prodserver.Config{RetryDelay: time.Hour, Fault: func(c prodserver.Call) prodserver.Fault {
		if c.Method == "ReadRows" && first {
			first = false
			return prodserver.FaultThrottle
		}
		return prodserver.FaultNo
	}})
	clientsWithTable(t, srv.Addr, "legacy", "f")
	_, dc := serverClientsAt(t, srv.ClusterAddr(prodserver.DefaultCluster))
	now := time.Now().Add(-time.Second)
	loadRealTimestamps(t, dc, "legacy", "f", 20, 2, now)
	schema := writeFile(t, "s.yaml", oneSecondSchema)
	t.Setenv("BIGTABLE_EMULATOR_HOST", srv.Addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		done <- runRaw(ctx, "-project=p", "-instance=i", "-schema="+schema, "audit", "-table=legacy", "-json", "-stall=1s",
			"-now="+now.Add(time.Hour).UTC().Format(time.RFC3339Nano))
	}()
	select {
	case r := <-done:
		require.Equal(t, exitOK, r.code, r.stderr)
		t.Logf("audit done in %s, server counts %+v", time.Since(start), srv.Counts())
		assert.EqualValues(t, 1, srv.Counts().Throttled)
	case <-time.After(30 * time.Second):
		cancel()
		<-done
		t.Fatalf("the audit still waited after 30s for a RetryInfo of an hour, with -stall 1s")
	}
}
