package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Three cells written through bttl into a write-time family are 3 live cells
// and 3 companions, counted apart, in audit's text, JSON and metrics output
// (before: 6 live cells; reads return 3) (issue 26 item 6).
func TestAuditCountsWriteTimeCompanionsApart(t *testing.T) {
	t.Run("bttest", func(t *testing.T) {
		ac, dc, addr := newServer(t)
		auditCompanions(t, ac, dc, addr)
	})
	t.Run("cbtemulator", func(t *testing.T) {
		ac, dc, addr := emulatorClients(t)
		auditCompanions(t, ac, dc, addr)
	})
}

func auditCompanions(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string) {
	ctx := context.Background()
	schema := strategy.Schema{"s": strategy.DefaultExpiry(48*time.Hour, strategy.WithWriteTime())}
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "wt", ColumnFamilies: map[string]bigtable.Family{
		"s": {GCPolicy: schema["s"].GCPolicy()},
	}}))
	tbl, err := ttlclient.Wrap(dc, ttlclient.WithAdminClient(ac, "p", "i")).Open(context.Background(), "wt", schema)
	require.NoError(t, err)
	for _, row := range []string{"a", "b", "c"} {
		m := ttlclient.NewMutation()
		m.Set("s", "tok", bigtable.ServerTime, []byte("v"))
		require.NoError(t, tbl.Apply(ctx, row, m))
	}
	file := writeFile(t, "s.yaml", "tables:\n  wt:\n    s: {strategy: default-expiry, ttl: 48h, write_time: true}\n")

	r := bttl(t, addr, "", "-schema", file, "verify")
	assert.Equal(t, exitOK, r.code, "companions bttl wrote hide nothing: %s", r.stdout+r.stderr)

	r = bttl(t, addr, "", "-schema", file, "audit", "-bytes", "-progress", "0")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `family "s" (write time): 3 write-time companion cell(s), 24 bytes, stored beside the data and counted apart from it`)
	assert.Regexp(t, `\ns +default-expiry\(D=48h0m0s\)\+writetime +3 +3 +0 `, r.stdout, "CELLS 3, LIVE 3")
	assert.NotContains(t, r.stdout, "hidden")

	prom := writeFile(t, "m.prom", "")
	r = bttl(t, addr, "", "-schema", file, "audit", "-json", "-progress", "0", "-metrics-out", prom)
	require.Equal(t, exitOK, r.code, r.stderr)
	var got struct {
		Tables   []audit.Report
		Findings []string
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Len(t, got.Tables, 1)
	require.Len(t, got.Tables[0].Families, 1)
	f := got.Tables[0].Families[0]
	assert.Equal(t, int64(3), f.Cells)
	assert.Equal(t, int64(3), f.Live)
	assert.Equal(t, int64(3), f.Companions)
	assert.Equal(t, int64(0), f.HiddenReserved)
	assert.Empty(t, got.Findings)
	assert.Contains(t, r.stdout, `"write_time_companion_cells": 3`)
	b, err := os.ReadFile(prom)
	require.NoError(t, err)
	metrics := string(b)
	assert.Contains(t, metrics, `bttl_audit_live_cells{family="s",strategy="default-expiry",table="wt"} 3`)
	assert.Contains(t, metrics, `bttl_audit_stored_cells{family="s",strategy="default-expiry",table="wt"} 3`)
	assert.Contains(t, metrics, `bttl_audit_write_time_companion_cells{family="s",strategy="default-expiry",table="wt"} 3`)
	assert.Contains(t, metrics, `bttl_audit_hidden_reserved_cells{family="s",strategy="default-expiry",table="wt"} 0`)
}
