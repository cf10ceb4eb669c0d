package provisionjob_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	provision "github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/strategy"
)

// seqCellsBeyondSample makes table "t" with a MaxVersions(3) family "doc"
// of 200 rows doc#000..doc#199 holding live real-time cells, except
// doc#150, which holds three seq*1000 cells: an age rule deletes them at
// the next compaction.
func seqCellsBeyondSample(t *testing.T, h *bttestharness.Harness) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"doc": {GCPolicy: bigtable.MaxVersionsPolicy(3)},
	}}))
	now := bigtable.Timestamp(h.Clock.Now().UnixMicro()).TruncateToMilliseconds()
	var rows []string
	var muts []*bigtable.Mutation
	for r := 0; r < 200; r++ {
		m := bigtable.NewMutation()
		if r == 150 {
			for seq := int64(1); seq <= 3; seq++ {
				m.Set("doc", "body", bigtable.Timestamp(seq*1000), []byte("legacy"))
			}
		} else {
			m.Set("doc", "body", now, []byte("recent"))
		}
		rows = append(rows, fmt.Sprintf("doc#%03d", r))
		muts = append(muts, m)
	}
	errs, err := h.Raw.Open("t").ApplyBulk(ctx, rows, muts)
	require.NoError(t, err)
	require.Nil(t, errs)
}

// The safety scan that decides refusal reads every row by default
// (WithSampleRows(20) sizes only the sampled scan, which is not asked
// for): Apply refuses and the rule stays.
func TestSafetyScanIsExhaustiveByDefault(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	seqCellsBeyondSample(t, h)

	var out bytes.Buffer
	plan, err := newProvisioner(h, &out, provision.WithSampleRows(20)).Apply(ctx, "t", strategy.Schema{"doc": strategy.DefaultExpiry(48 * time.Hour)})
	require.ErrorIs(t, err, provision.ErrAgeOverSequence, "the sequence cells of doc#150 are deleted at the next compaction")
	var sc *provision.AdoptionError
	require.ErrorAs(t, err, &sc)
	assert.Equal(t, provision.ErrAgeOverSequence, sc.Err, "the first finding is the one named")
	assert.Equal(t, int64(3), sc.Cells)
	assert.True(t, sc.Exact, "every row was read")
	assert.False(t, sc.Sampled)
	assert.Equal(t, "doc#150", sc.Row)
	assert.Contains(t, err.Error(), ": 3 cell(s) already past")
	require.Len(t, plan.Changes, 1)
	assert.Equal(t, int64(200), plan.Changes[0].Impact.Rows, "Plan's count reads every row")

	assert.NoError(t, verify(t, h, "t", strategy.Schema{"doc": strategy.Sequence(3)}), "nothing changed: the rule is still max versions 3")
}

// A sampled safety scan is an explicit, unsafe opt-in: it misses doc#150
// here, and both Apply's output and a refusal say the scan was sampled
// and not exhaustive.
func TestSampledSafetyScanSaysSo(t *testing.T) {
	h := lastKeySampleHarness(t)
	ctx := context.Background()
	seqCellsBeyondSample(t, h)

	var out bytes.Buffer
	p := newProvisioner(h, &out, provision.WithSampleRows(20), provision.WithSampledSafetyScan())
	plan, err := p.Plan(ctx, "t", strategy.Schema{"doc": strategy.DefaultExpiry(48 * time.Hour)})
	require.NoError(t, err)
	require.NoError(t, p.CheckAdoptions(ctx, plan), "the 20-row sample misses doc#150")
	require.NoError(t, p.Execute(ctx, plan, strategy.Schema{"doc": strategy.DefaultExpiry(48 * time.Hour)}))
	assert.Regexp(t, `safety scan of table "t", family "doc": sampled \d+ row\(s\), not exhaustive: cells outside the sample were not checked`, out.String())

	// A refusal from a sampled scan says so too: every row of "one" holds
	// a real timestamp at or before now.
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "one", ColumnFamilies: map[string]bigtable.Family{
		"ev": {GCPolicy: bigtable.MaxAgePolicy(48 * time.Hour)},
	}}))
	now := bigtable.Timestamp(h.Clock.Now().UnixMicro()).TruncateToMilliseconds()
	for r := 0; r < 50; r++ {
		m := bigtable.NewMutation()
		m.Set("ev", "c", now-1000, []byte("v"))
		require.NoError(t, h.Raw.Open("one").Apply(ctx, fmt.Sprintf("r%02d", r), m))
	}
	_, err = p.Apply(ctx, "one", strategy.Schema{"ev": strategy.OneSecond()})
	require.ErrorIs(t, err, provision.ErrRealTimestamps)
	var rt *provision.AdoptionError
	require.ErrorAs(t, err, &rt)
	assert.Equal(t, provision.ErrRealTimestamps, rt.Err, "the first finding is the one named")
	assert.True(t, rt.Sampled)
	assert.False(t, rt.Exact)
	assert.Less(t, rt.Rows, int64(50), "a sample")
	assert.Contains(t, err.Error(), fmt.Sprintf("%d cell(s) in a sample of %d row(s) (sampled scan, not exhaustive: cells outside the sample were not checked)", rt.Cells, rt.Rows))
}

// The full safety scan stops once it has found enough offending cells to
// refuse, and its count then says it is a lower bound.
func TestSafetyScanStopsEarlyWithALowerBound(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"doc": {GCPolicy: bigtable.MaxVersionsPolicy(3)},
	}}))
	var rows []string
	var muts []*bigtable.Mutation
	for r := 0; r < 1500; r++ {
		m := bigtable.NewMutation()
		m.Set("doc", "body", 1000, []byte("seq1"))
		rows = append(rows, fmt.Sprintf("doc#%04d", r))
		muts = append(muts, m)
	}
	errs, err := h.Raw.Open("t").ApplyBulk(ctx, rows, muts)
	require.NoError(t, err)
	require.Nil(t, errs)

	_, err = newProvisioner(h, &bytes.Buffer{}).Apply(ctx, "t", strategy.Schema{"doc": strategy.OneSecond()})
	var sc *provision.AdoptionError
	require.ErrorAs(t, err, &sc)
	assert.Equal(t, provision.ErrAgeOverSequence, sc.Err, "the first finding is the one named")
	assert.False(t, sc.Exact)
	assert.False(t, sc.Sampled)
	assert.Equal(t, int64(1000), sc.Cells)
	assert.Contains(t, err.Error(), "at least 1000 cell(s) (the scan stopped after the first 1000)")
}

// A cell at timestamp 0 is not a sequence number but outranks nothing:
// the refusal must not say it hides new writes.
func TestNotSequenceErrorAtTimestampZero(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{"a": {}}}))
	m := bigtable.NewMutation()
	m.Set("a", "c", 0, []byte("zero"))
	m.Set("a", "c", 2000, []byte("seq2"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", m))

	_, err := newProvisioner(h, &bytes.Buffer{}).Apply(ctx, "t", strategy.Schema{"a": strategy.Sequence(3)})
	var ns *provision.AdoptionError
	require.ErrorAs(t, err, &ns)
	assert.Equal(t, provision.ErrNotSequenceNumbers, ns.Err, "the first finding is the one named")
	assert.Equal(t, int64(1), ns.Cells)
	assert.Equal(t, int64(0), ns.RealTimes)
	assert.NotContains(t, err.Error(), "outrank every")
	assert.Contains(t, err.Error(), "none is a real time; they are below the floor and not seq*1000: they outrank nothing")
}

// lastKeySampleHarness is a bttest harness whose SampleRowKeys answers with
// the table's last row key only. bttest adds each other row key with a 1%
// chance, so a sampled scan's ranges, and which rows it reads, change from
// run to run: a split key just before doc#150 made the sample read it in
// about one run in ten. With the last key alone the sample is the first
// rows of the table and the last row, every run.
func lastKeySampleHarness(t *testing.T) *bttestharness.Harness {
	t.Helper()
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{
		ServerOptions: []grpc.ServerOption{grpc.ChainStreamInterceptor(
			func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
				if !strings.HasSuffix(info.FullMethod, "/SampleRowKeys") {
					return handler(srv, ss)
				}
				return handler(srv, &lastKeyStream{ServerStream: ss})
			})},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// lastKeyStream holds back each sampled key until the next one shows it was
// not the last: bttest always sends the table's last key, then the empty
// key that ends the sample.
type lastKeyStream struct {
	grpc.ServerStream
	held *btpb.SampleRowKeysResponse
}

func (s *lastKeyStream) SendMsg(m any) error {
	resp, ok := m.(*btpb.SampleRowKeysResponse)
	if !ok {
		return s.ServerStream.SendMsg(m)
	}
	if len(resp.RowKey) > 0 {
		s.held = resp
		return nil
	}
	if s.held != nil {
		if err := s.ServerStream.SendMsg(s.held); err != nil {
			return err
		}
	}
	return s.ServerStream.SendMsg(resp)
}
