package metrics_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/gclag"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// plantedStock is the number of expired-but-not-collected cells
// auditStock plants in the default-expiry family.
const plantedStock = 13

// auditStock plants plantedStock expired cells (and live ones) in a table
// of e's server through e's bttl client, and scans it two hours later.
func auditStock(t *testing.T, e *env, tableName string) *audit.Report {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.h.CreateTable(ctx, tableName, schema()))
	tbl, err := e.client.Open(context.Background(), tableName, schema())
	require.NoError(t, err)
	for i := 0; i < plantedStock+2; i++ {
		m := ttlclient.NewMutation()
		ttl := 30 * time.Minute // expired by the advance below
		if i >= plantedStock {
			ttl = 100 * time.Hour
		}
		m.SetTTL(famDef, "c", ttl, []byte("v"))
		m.SetTTL(famOne, "c", 100*time.Hour, []byte("v"))
		m.SetVersion(famSeq, "c", int64(i+1), []byte("v"))
		require.NoError(t, tbl.Apply(ctx, "stock#"+string(rune('a'+i)), m))
	}
	now := e.h.Clock.Now().Add(2 * time.Hour)
	rep, err := audit.Scan(ctx, e.h.Raw.Open(tableName), tableName, schema(), bigtable.Time(now))
	require.NoError(t, err)
	return rep
}

// exportedWithAudit is exported plus every name audit.WriteMetrics writes
// for a table of every strategy.
func exportedWithAudit(t *testing.T) map[string]bool {
	t.Helper()
	have := exported(t)
	e := newEnv(t, nil)
	var buf bytes.Buffer
	require.NoError(t, audit.WriteMetrics(&buf, []*audit.Report{auditStock(t, e, "stock"), auditUnruled(t, e, "unruled")}))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(&buf)
	require.NoError(t, err)
	for name := range fams {
		require.True(t, strings.HasPrefix(name, "bttl_audit_"), name)
		have[name] = true
	}
	for _, n := range gcLagExported(t) {
		have[n] = true
	}
	sreg := prometheus.NewPedanticRegistry()
	streamStock(t, sreg)
	sfams, err := sreg.Gather()
	require.NoError(t, err)
	for _, f := range sfams {
		have[f.GetName()] = true
	}
	return have
}

// gcLagExported is what changestream/gclag exports once it has seen a GC
// deletion of a managed cell (the stream's GC lag, which the dashboard and
// the BttlStreamGCLag alerts read).
func gcLagExported(t *testing.T) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	rec, err := gclag.New("t", strategy.Schema{"f": strategy.DefaultExpiry(time.Hour)}, gclag.WithRegisterer(reg))
	require.NoError(t, err)
	require.NoError(t, rec.Handle(context.Background(), gcChange("f", time.Now().Add(-3*time.Hour))))
	fams, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, fams, 1)
	f := fams[0]
	require.Equal(t, dto.MetricType_HISTOGRAM, f.GetType())
	return []string{f.GetName() + "_bucket", f.GetName() + "_sum", f.GetName() + "_count"}
}

// auditUnruled creates table tableName with schema()'s families and no GC
// rule, writes a live cell in each managed family, and audits it with its
// rules read (Report.NoteGCRules): every managed family is never
// collected.
func auditUnruled(t *testing.T, e *env, tableName string) *audit.Report {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.h.Admin.CreateTable(ctx, tableName))
	for fam := range schema() {
		require.NoError(t, e.h.Admin.CreateColumnFamily(ctx, tableName, fam))
	}
	now := e.h.Clock.Now()
	m := bigtable.NewMutation()
	m.Set(famOne, "c", bigtable.Time(now.Add(time.Hour)), []byte("v"))
	m.Set(famDef, "c", bigtable.Time(now), []byte("v"))
	require.NoError(t, e.h.Raw.Open(tableName).Apply(ctx, "r", m))
	rep, err := audit.Scan(ctx, e.h.Raw.Open(tableName), tableName, schema(), bigtable.Time(now))
	require.NoError(t, err)
	fams, err := gcrule.NewAdmin(e.h.Admin, bttestharness.Project, bttestharness.Instance).Families(ctx, tableName)
	require.NoError(t, err)
	rep.NoteGCRules(fams)
	return rep
}

// gcChange is a GARBAGE_COLLECTION change deleting the cell of family fam
// stamped ts (at millisecond granularity), committed now, as the
// change-stream server records one (bttest_harness/changestreams RunGC).
func gcChange(fam string, ts time.Time) changestream.Change {
	us := ts.UnixMilli() * 1000
	return changestream.Change{
		Type: changestream.GarbageCollection, RowKey: []byte("r"), CommitTime: time.Now(),
		Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
			FamilyName: fam, ColumnQualifier: []byte("c"),
			TimeRange: &btpb.TimestampRange{StartTimestampMicros: us, EndTimestampMicros: us + 1000},
		}}}},
	}
}
