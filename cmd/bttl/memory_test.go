package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	"github.com/bttl/bttl/internal/testenv"
)

// TestAuditMemory (acceptance 4) audits BTTL_AUDIT_CELLS cells (e.g.
// 1000000) on the in-process server with the built bttl binary, and checks
// the binary's peak RSS stays under 200 MB. Not in the default run:
//
//	BTTL_AUDIT_CELLS=1000000 go test -run TestAuditMemory -v ./cmd/bttl
func TestAuditMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BTTL_AUDIT_CELLS"))
	if n <= 0 {
		t.Skip("set BTTL_AUDIT_CELLS to run")
	}
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		testenv.Missing(t, testenv.GNUTime, err)
	}
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", ColumnFamilies: map[string]bigtable.Family{
		"session": {GCPolicy: bigtable.MaxAgePolicy(time.Second)},
		"clicks":  {GCPolicy: bigtable.MaxAgePolicy(48 * time.Hour)},
		"doc":     {GCPolicy: bigtable.MaxVersionsPolicy(2)},
	}}))
	// 10 cells a row: 4 one-second (2 expired), 3 default-expiry, 3 versions.
	const perRow = 10
	rows := n / perRow
	now := bigtable.Now().TruncateToMilliseconds()
	hour := bigtable.Timestamp(time.Hour / time.Microsecond)
	value := bytes.Repeat([]byte("v"), 32)
	tbl := dc.Open("events")
	start := time.Now()
	const batch = 1000
	for b := 0; b < rows; b += batch {
		keys := make([]string, 0, batch)
		muts := make([]*bigtable.Mutation, 0, batch)
		for r := b; r < b+batch && r < rows; r++ {
			m := bigtable.NewMutation()
			for c := 0; c < 4; c++ {
				m.Set("session", "c"+strconv.Itoa(c), now+bigtable.Timestamp(c-2)*hour, value)
			}
			for c := 0; c < 3; c++ {
				m.Set("clicks", "c"+strconv.Itoa(c), now-bigtable.Timestamp(c*24)*hour, value)
			}
			for v := bigtable.Timestamp(1); v <= 3; v++ {
				m.Set("doc", "body", v*1000, value)
			}
			keys = append(keys, fmt.Sprintf("row%09d", r))
			muts = append(muts, m)
		}
		errs, err := tbl.ApplyBulk(ctx, keys, muts)
		require.NoError(t, err)
		require.Nil(t, errs)
	}
	t.Logf("wrote %d cells in %d rows in %s", rows*perRow, rows, time.Since(start))

	bin := filepath.Join(t.TempDir(), "bttl")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	schema := writeFile(t, "schema.yaml", schemaYAML)
	// /usr/bin/time measures it: the child's own ru_maxrss would include
	// this test process's (which holds the server's data), since Linux
	// carries the high-water mark across the vfork+exec.
	rssFile := filepath.Join(t.TempDir(), "maxrss")
	cmd := exec.Command("/usr/bin/time", "-f", "%M", "-o", rssFile, bin, "-project", "p", "-instance", "i", "-schema", schema, "audit", "-json")
	cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+addr)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	start = time.Now()
	require.NoError(t, cmd.Run())
	elapsed := time.Since(start)
	kib, err := os.ReadFile(rssFile)
	require.NoError(t, err)
	maxRSS, err := strconv.ParseInt(strings.TrimSpace(string(kib)), 10, 64)
	require.NoError(t, err, string(kib))
	maxRSS *= 1024
	var got struct{ Tables []audit.Report }
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Equal(t, int64(rows*perRow), got.Tables[0].Cells)
	t.Logf("bttl audit: %d cells in %s, peak RSS %.1f MB", got.Tables[0].Cells, elapsed, float64(maxRSS)/(1<<20))
	require.Less(t, maxRSS, int64(200<<20), "peak RSS under 200 MB")
}
